//! The Python example plugins (`plugins/python/<name>/`), built from source for the tests.
//!
//! [`component`] runs the SDK's build command (`guest-sdk/python/build`, componentize-py from
//! the venv `./dev setup` installs) into `<workspace>/target/python-plugins/<name>.wasm`. The
//! command skips the build when the plugin, the SDK, the WIT and the toolchain are unchanged,
//! so only the first test run after a change pays for it (about half a minute), and writes
//! the component by renaming a finished file, so a test never reads a half-written one.
//!
//! These plugins are not in `wasmop-test-guests`' table: that table is keyed by directory
//! name, and a Python plugin keeps its Rust twin's name (`database-config`) because it is the
//! same plugin, passing the same golden cases with equal reports ([`twin_cases`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The workspace root (this crate is `tests/python`).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("tests/python sits two levels below the workspace root")
        .to_path_buf()
}

/// Where built Python plugins go.
pub fn out_dir() -> PathBuf {
    workspace().join("target/python-plugins")
}

/// The Python plugins there are: the directories under `plugins/python/` with an `app.py`.
pub fn names() -> Vec<String> {
    let root = workspace().join("plugins/python");
    let mut names: Vec<String> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", root.display()))
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            path.join("app.py")
                .is_file()
                .then(|| path.file_name().and_then(|n| n.to_str()).map(str::to_owned))?
        })
        .collect();
    names.sort();
    names
}

/// One build at a time in this process: tests that want the same plugin wait for the one
/// build instead of racing it.
static BUILDS: Mutex<()> = Mutex::new(());

/// The component of `plugins/python/<name>`, built if it is missing or out of date.
///
/// # Panics
/// When the plugin does not exist or does not build; the build command's output (which says
/// to run `./dev setup` when componentize-py is missing) is on stderr.
pub fn component(name: &str) -> PathBuf {
    build(&workspace().join("plugins/python").join(name), name)
}

/// The hostile Python test plugin (`tests/python/hostile`), built like [`component`]: one
/// component whose reconcile attacks the host in the way the target object's name says.
///
/// # Panics
/// As [`component`].
pub fn hostile() -> PathBuf {
    build(&workspace().join("tests/python/hostile"), "hostile")
}

/// A changed build of `plugins/python/<name>`, as a plugin author's next version: its Python
/// modules (`app.py` and those beside it) each with `edit` applied, written to
/// `<out_dir>/variants/<variant>/` and built into `<out_dir>/<variant>.wasm` (skipped when the
/// result is unchanged).
///
/// # Panics
/// When the plugin does not exist, `edit` changes no module, or the variant does not build.
pub fn variant(name: &str, variant: &str, edit: impl Fn(&str) -> String) -> PathBuf {
    let from = workspace().join("plugins/python").join(name);
    let dir = out_dir().join("variants").join(variant);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    let mut changed = false;
    let entries =
        std::fs::read_dir(&from).unwrap_or_else(|e| panic!("cannot list {}: {e}", from.display()));
    for entry in entries {
        let path = entry
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", from.display()))
            .path();
        if path.extension().is_none_or(|e| e != "py") {
            continue;
        }
        let module = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let edited = edit(&module);
        changed |= edited != module;
        let to = dir.join(path.file_name().expect("a file name"));
        std::fs::write(&to, edited)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", to.display()));
    }
    assert!(changed, "the variant {variant} of {name} changes nothing");
    build(&dir, variant)
}

/// Builds the Python plugin in `dir` into `<out_dir>/<name>.wasm` (skipped when unchanged).
fn build(dir: &Path, name: &str) -> PathBuf {
    assert!(
        dir.join("app.py").is_file(),
        "no Python plugin `{name}`: {} has no app.py",
        dir.display()
    );
    let out = out_dir().join(format!("{name}.wasm"));
    let _one_at_a_time = BUILDS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let build = workspace().join("guest-sdk/python/build");
    let status = Command::new("python3")
        .arg(&build)
        .arg(dir)
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", build.display()));
    assert!(
        status.success(),
        "building the Python plugin {} failed ({status}); the build's output is above. \
         Reproduce with: guest-sdk/python/build {} -o {}",
        dir.display(),
        dir.display(),
        out.display()
    );
    out
}

/// The golden cases of `name`'s Rust twin, `plugins/rust/<name>/tests/cases`, which the
/// Python plugin must pass with equal reports.
pub fn twin_cases(name: &str) -> PathBuf {
    workspace()
        .join("plugins/rust")
        .join(name)
        .join("tests/cases")
}

/// The admission review cases of `name`'s Rust twin, `plugins/rust/<name>/tests/admission`,
/// which the Python plugin must pass with equal reports (an admission-only plugin has these
/// and no [`twin_cases`]).
pub fn twin_admission_cases(name: &str) -> PathBuf {
    workspace()
        .join("plugins/rust")
        .join(name)
        .join("tests/admission")
}

/// Removes the compiled artefacts in the artefact cache `cache` of every component whose
/// digest is not in `keep`: each Python component's artefact is ~40 MB, and every earlier build
/// of a plugin leaves one behind in the tests' caches.
pub fn prune_artefacts(cache: &Path, keep: &[&str]) {
    let Ok(engines) = std::fs::read_dir(cache) else {
        return;
    };
    for engine in engines.flatten() {
        let Ok(entries) = std::fs::read_dir(engine.path()) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if !keep.iter().any(|digest| name.starts_with(digest)) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}
