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
    let dir = workspace().join("plugins/python").join(name);
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
        .arg(&dir)
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", build.display()));
    assert!(
        status.success(),
        "building the Python plugin {} failed ({status}); the build's output is above. \
         Reproduce with: guest-sdk/python/build plugins/python/{name} -o {}",
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
