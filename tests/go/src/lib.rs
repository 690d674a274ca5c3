//! The Go example plugins (`plugins/go/<name>/`), built from source for the tests.
//!
//! [`component`] runs the SDK's build command (`guest-sdk/go/build`: wit-bindgen's Go
//! generator, stock Go for `wasip1`, wasm-tools, all installed by `./dev setup`) into
//! `<workspace>/target/go-plugins/<name>.wasm`. The command skips the build when the plugin,
//! the SDK, the WIT and the toolchain are unchanged, and Go's build cache makes a changed
//! build incremental; it writes the component by renaming a finished file, so a test never
//! reads a half-written one.
//!
//! As for the Python plugins, a Go plugin keeps its Rust twin's name (`database-config`):
//! it is the same plugin, passing the same golden cases with equal reports ([`twin_cases`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The workspace root (this crate is `tests/go`).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("tests/go sits two levels below the workspace root")
        .to_path_buf()
}

/// Where built Go plugins go.
pub fn out_dir() -> PathBuf {
    workspace().join("target/go-plugins")
}

/// The Go plugins there are: the directories under `plugins/go/` with a `go.mod`.
pub fn names() -> Vec<String> {
    let root = workspace().join("plugins/go");
    let mut names: Vec<String> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", root.display()))
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            path.join("go.mod")
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

/// The component of `plugins/go/<name>`, built if it is missing or out of date.
///
/// # Panics
/// When the plugin does not exist or does not build; the build command's output (which says
/// to run `./dev setup` when the toolchain is missing) is on stderr.
pub fn component(name: &str) -> PathBuf {
    build(&workspace().join("plugins/go").join(name), name)
}

/// A changed build of `plugins/go/<name>`, as a plugin author's next version: its module's
/// files (`go.mod`, `go.sum` and the `.go` sources, each source with `edit` applied; an
/// example plugin is one package) copied to `<out_dir>/variants/<variant>/` and built into
/// `<out_dir>/<variant>.wasm` (skipped when the result is unchanged).
///
/// The copy keeps the module path: the build points it at the copy (`replace`), and builds
/// one plugin at a time. Relative `replace` targets in `go.mod` (the SDK's
/// `../../../guest-sdk/go`) are made absolute, so that the copy is a module that also
/// builds and tests on its own.
///
/// # Panics
/// When the plugin does not exist, `edit` changes no source, or the variant does not build.
pub fn variant(name: &str, variant: &str, edit: impl Fn(&str) -> String) -> PathBuf {
    let from = workspace().join("plugins/go").join(name);
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
        let file_name = path.file_name().expect("a file name");
        let text = || {
            std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
        };
        let copied = if path.extension().is_some_and(|e| e == "go") {
            let source = text();
            let edited = edit(&source);
            changed |= edited != source;
            edited
        } else if file_name == "go.mod" {
            absolute_replaces(&text(), &from)
        } else if file_name == "go.sum" {
            text()
        } else {
            continue;
        };
        let to = dir.join(file_name);
        std::fs::write(&to, copied)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", to.display()));
    }
    assert!(changed, "the variant {variant} of {name} changes nothing");
    build(&dir, variant)
}

/// `go_mod` (of the module in `dir`) with each `replace` target that is a relative path
/// (`./` or `../`, as the Go reference defines one) resolved against `dir`.
fn absolute_replaces(go_mod: &str, dir: &Path) -> String {
    go_mod
        .lines()
        .map(|line| match line.split_once("=>") {
            Some((module, target))
                if target.trim().starts_with("./") || target.trim().starts_with("../") =>
            {
                let target = dir.join(target.trim());
                let target = std::fs::canonicalize(&target).unwrap_or(target);
                format!("{module}=> {}\n", target.display())
            }
            _ => format!("{line}\n"),
        })
        .collect()
}

/// Builds the Go plugin in `dir` into `<out_dir>/<name>.wasm` (skipped when unchanged).
fn build(dir: &Path, name: &str) -> PathBuf {
    assert!(
        dir.join("go.mod").is_file(),
        "no Go plugin `{name}`: {} has no go.mod",
        dir.display()
    );
    let out = out_dir().join(format!("{name}.wasm"));
    let _one_at_a_time = BUILDS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let build = workspace().join("guest-sdk/go/build");
    let status = Command::new("python3")
        .arg(&build)
        .arg(dir)
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", build.display()));
    assert!(
        status.success(),
        "building the Go plugin {} failed ({status}); the build's output is above. \
         Reproduce with: guest-sdk/go/build {} -o {}",
        dir.display(),
        dir.display(),
        out.display()
    );
    out
}

/// The golden cases of `name`'s Rust twin, `plugins/rust/<name>/tests/cases`, which the Go
/// plugin must pass with equal reports.
pub fn twin_cases(name: &str) -> PathBuf {
    workspace()
        .join("plugins/rust")
        .join(name)
        .join("tests/cases")
}

/// The admission cases of `name`'s Rust twin, `plugins/rust/<name>/tests/admission`, which
/// the Go plugin's webhooks must pass with equal reports.
pub fn twin_admission_cases(name: &str) -> PathBuf {
    workspace()
        .join("plugins/rust")
        .join(name)
        .join("tests/admission")
}

/// The paths of the Go toolchain `./dev setup` installed (`guest-sdk/go/build --tools`):
/// wit-bindgen, wasm-tools, the adapter and the patched copy of wit-bindgen's Go package.
///
/// # Panics
/// When the build command cannot run.
pub fn tools() -> Vec<PathBuf> {
    let build = workspace().join("guest-sdk/go/build");
    let output = Command::new("python3")
        .arg(&build)
        .arg("--tools")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", build.display()));
    assert!(
        output.status.success(),
        "{} --tools failed",
        build.display()
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(PathBuf::from)
        .collect()
}

/// The test plugin `tests/go/panicky` (its reconcile panics as the target's name says),
/// built like [`component`].
///
/// # Panics
/// As [`component`].
pub fn panicky() -> PathBuf {
    build(&workspace().join("tests/go/panicky"), "panicky")
}

/// The hostile test plugin `tests/go/hostile` (its reconcile attacks the host as the
/// target's name says), built like [`component`].
///
/// # Panics
/// As [`component`].
pub fn hostile() -> PathBuf {
    build(&workspace().join("tests/go/hostile"), "hostile")
}

/// Removes the compiled artefacts in the artefact cache `cache` of every component whose
/// digest is not in `keep`: each Go component's artefact is ~10 MB, and every earlier build
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    #[test]
    fn a_variants_go_mod_points_relative_replaces_at_the_plugins_neighbours() {
        let go_mod = "module wasmop.dev/plugins/p\n\nrequire wasmop.dev/wasmop v0.0.0\n\n\
                      replace wasmop.dev/wasmop => ../../sdk\n\
                      replace (\n\texample.com/a => ./a\n\texample.com/b v1.0.0 => example.com/c v1.1.0\n)\n";
        assert_eq!(
            super::absolute_replaces(go_mod, Path::new("/nowhere/plugins/p")),
            "module wasmop.dev/plugins/p\n\nrequire wasmop.dev/wasmop v0.0.0\n\n\
             replace wasmop.dev/wasmop => /nowhere/plugins/p/../../sdk\n\
             replace (\n\texample.com/a => /nowhere/plugins/p/./a\n\texample.com/b v1.0.0 => example.com/c v1.1.0\n)\n"
        );
    }
}
