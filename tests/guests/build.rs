//! Builds every guest crate under `plugins/rust/*/`, `tests/hostile/*/` and `tests/sdk/*/` as a
//! wasm32-wasip2 component and generates the table `src/lib.rs` serves paths from.
//!
//! Guests are discovered by listing those directories, so adding a guest is adding a
//! directory (and its workspace `members` entry); this crate never needs an edit. All guests
//! are built by one nested `cargo build` with the `wasm` profile into
//! `<workspace>/target/wasm-guests`: a separate target directory, because the outer cargo holds
//! the lock on its own and a nested cargo waiting for it would deadlock.
//!
//! Example plugins live under `plugins/<language>/<name>/`; only `plugins/rust` is listed
//! here. The Python ones (`plugins/python/<name>`) are built by `tests/python`
//! (`wasmop_python_plugins::component`) instead: each is the twin of a Rust plugin and keeps
//! its name (`database-config`), which this table, keyed by the bare directory name, cannot
//! hold twice (`guest_dirs` refuses two guests of one name); and a CPython build (componentize-py,
//! ~30 s, ~19 MB) should not sit in the build of every test binary that uses this crate.

use std::collections::BTreeMap;
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The directories (relative to the workspace root) whose subdirectories are guest crates,
/// and the role each one's guests play. Only Rust guests are here: they are all built by the
/// one nested cargo (see the file's header for how other languages' plugins will join).
const GUEST_ROOTS: &[(&str, &str)] = &[
    ("plugins/rust", "Plugin"),
    ("tests/hostile", "Hostile"),
    ("tests/sdk", "Sdk"),
];

/// The target every guest is built for: its linker (`wasm-component-ld`) emits a component.
const WASM_TARGET: &str = "wasm32-wasip2";

/// The profile from the root `Cargo.toml` that guests are built with.
const WASM_PROFILE: &str = "wasm";

/// One guest crate found on disk.
struct Guest {
    /// The directory name, which is the key tests look guests up by.
    name: String,
    /// `Plugin`, `Hostile` or `Sdk` (a variant of `GuestKind`).
    kind: &'static str,
    /// The cargo package name.
    package: String,
    /// The name of its `cdylib` target, which names the `.wasm` file.
    lib_name: String,
    /// Its directory.
    dir: PathBuf,
}

fn main() {
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let workspace = manifest_dir
        .parent()
        .and_then(Path::parent)
        .expect("tests/guests sits two levels below the workspace root")
        .to_path_buf();
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());

    emit_rerun_lines(&workspace);

    let dirs = guest_dirs(&workspace);
    let guests = if dirs.is_empty() {
        Vec::new()
    } else {
        let guests = resolve_packages(&cargo, &workspace, dirs);
        build(&cargo, &workspace, &guests);
        guests
    };

    let built_dir = workspace
        .join("target/wasm-guests")
        .join(WASM_TARGET)
        .join(WASM_PROFILE);
    let copy_dir = out_dir.join("guests");
    fs::create_dir_all(&copy_dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", copy_dir.display()));

    let mut table = String::from(
        "/// Every guest built from `plugins/rust/*/`, `tests/hostile/*/` and `tests/sdk/*/`, sorted by name.\n",
    );
    table.push_str("pub static GUESTS: &[Guest] = &[\n");
    for guest in &guests {
        let built = built_dir.join(format!("{}.wasm", guest.lib_name));
        // A copy per outer build keeps the path stable while a later build rewrites the shared
        // target directory, so a running test never reads a half-written component.
        let copy = copy_dir.join(format!("{}.wasm", guest.name));
        fs::copy(&built, &copy).unwrap_or_else(|e| {
            panic!(
                "guest `{}` ({}) built, but its component {} cannot be copied to {}: {e}",
                guest.name,
                guest.dir.display(),
                built.display(),
                copy.display()
            )
        });
        writeln!(
            table,
            "    Guest {{ name: {:?}, kind: GuestKind::{}, package: {:?}, path: {:?} }},",
            guest.name,
            guest.kind,
            guest.package,
            copy.to_str()
                .unwrap_or_else(|| panic!("{} is not valid UTF-8", copy.display())),
        )
        .expect("writing to a String cannot fail");
    }
    table.push_str("];\n");
    let table_path = out_dir.join("guests.rs");
    fs::write(&table_path, table)
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", table_path.display()));
}

/// Reruns this script when anything a guest is built from changes. Cargo scans a directory
/// recursively for newer mtimes; a path that does not exist yet is replaced by its parent so
/// that creating it is noticed.
fn emit_rerun_lines(workspace: &Path) {
    println!("cargo::rerun-if-changed=build.rs");
    for path in ["wit", "guest-sdk/rust", "Cargo.toml", "Cargo.lock"]
        .into_iter()
        .chain(GUEST_ROOTS.iter().map(|(root, _)| *root))
    {
        let mut watched = workspace.join(path);
        while !watched.exists() {
            match watched.parent() {
                Some(parent) => watched = parent.to_path_buf(),
                None => break,
            }
        }
        println!("cargo::rerun-if-changed={}", watched.display());
    }
    // The nested cargo reads these from the environment; a change must rebuild the guests.
    for var in ["RUSTUP_TOOLCHAIN", "CARGO_HOME", "CARGO_NET_OFFLINE"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
}

/// Lists `<root>/<name>/Cargo.toml` for every guest root, sorted, as (name, role, dir).
fn guest_dirs(workspace: &Path) -> Vec<(String, &'static str, PathBuf)> {
    let mut found = Vec::new();
    for (root, kind) in GUEST_ROOTS {
        let root_dir = workspace.join(root);
        let entries = match fs::read_dir(&root_dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => panic!("cannot list guest directory {}: {e}", root_dir.display()),
        };
        for entry in entries {
            let entry = entry.unwrap_or_else(|e| {
                panic!("cannot list guest directory {}: {e}", root_dir.display())
            });
            let dir = entry.path();
            if !dir.join("Cargo.toml").is_file() {
                continue;
            }
            let name = entry.file_name().into_string().unwrap_or_else(|n| {
                panic!(
                    "guest directory name {n:?} in {} is not UTF-8",
                    root_dir.display()
                )
            });
            found.push((name, *kind, dir));
        }
    }
    found.sort();
    let mut seen = BTreeMap::new();
    for (name, _, dir) in &found {
        if let Some(other) = seen.insert(name.clone(), dir.clone()) {
            panic!(
                "two guests are named `{name}` ({} and {}): tests look guests up by directory name, rename one",
                other.display(),
                dir.display()
            );
        }
    }
    found
}

/// Finds each guest directory's package and `cdylib` target in `cargo metadata`, failing with
/// a clear message for a directory that is not a workspace member or not a `cdylib`.
fn resolve_packages(
    cargo: &std::ffi::OsStr,
    workspace: &Path,
    dirs: Vec<(String, &'static str, PathBuf)>,
) -> Vec<Guest> {
    let mut command = Command::new(cargo);
    command
        .current_dir(workspace)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--manifest-path",
        ])
        .arg(workspace.join("Cargo.toml"));
    scrub_env(&mut command);
    let output = command
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("cannot run `cargo metadata` for the guests: {e}"));
    assert!(
        output.status.success(),
        "`cargo metadata` for the guests failed ({}); its output is above",
        output.status
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("`cargo metadata` printed invalid JSON: {e}"));

    let packages = metadata["packages"]
        .as_array()
        .expect("cargo metadata lists packages");
    dirs.into_iter()
        .map(|(name, kind, dir)| {
            let manifest = dir.join("Cargo.toml");
            let package = packages
                .iter()
                .find(|p| p["manifest_path"].as_str().map(Path::new) == Some(manifest.as_path()))
                .unwrap_or_else(|| {
                    panic!(
                        "guest {} is not a workspace member: add \"{}\" to `members` in the root Cargo.toml",
                        dir.display(),
                        dir.strip_prefix(workspace).unwrap_or(&dir).display()
                    )
                });
            let lib_name = package["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|t| t["crate_types"].as_array().is_some_and(|c| c.iter().any(|c| c == "cdylib")))
                .and_then(|t| t["name"].as_str())
                .unwrap_or_else(|| {
                    panic!("guest {} has no `cdylib` target: set `[lib] crate-type = [\"cdylib\"]`", manifest.display())
                })
                .replace('-', "_");
            Guest {
                name,
                kind,
                package: package["name"].as_str().expect("every package has a name").to_owned(),
                lib_name,
                dir,
            }
        })
        .collect()
}

/// Builds all guests with one nested cargo so that shared dependencies compile once and in
/// parallel. Its output goes to this script's stderr, which cargo shows when the build fails.
fn build(cargo: &std::ffi::OsStr, workspace: &Path, guests: &[Guest]) {
    let mut command = Command::new(cargo);
    command
        .current_dir(workspace)
        .args([
            "build",
            "--target",
            WASM_TARGET,
            "--profile",
            WASM_PROFILE,
            "--manifest-path",
        ])
        .arg(workspace.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(workspace.join("target/wasm-guests"));
    for guest in guests {
        command.args(["-p", &guest.package]);
    }
    scrub_env(&mut command);
    // stdout must not reach cargo, which would read it as build-script directives.
    command.stdout(std::io::stderr()).stderr(Stdio::inherit());
    let status = command
        .status()
        .unwrap_or_else(|e| panic!("cannot run the nested `cargo build` for the guests: {e}"));
    assert!(
        status.success(),
        "building the guest components failed ({status}); the nested cargo's output is above. \
         Reproduce with: cargo build --target {WASM_TARGET} --profile {WASM_PROFILE} {}",
        guests
            .iter()
            .map(|g| format!("-p {}", g.package))
            .collect::<Vec<_>>()
            .join(" ")
    );
}

/// Removes what the outer cargo put in the environment for this build script (flags for the
/// host target, the outer target directory, the jobserver, clippy's wrapper), keeping the
/// user's own cargo settings such as `CARGO_HOME` and network options.
fn scrub_env(command: &mut Command) {
    const KEEP_PREFIXES: &[&str] = &[
        "CARGO_HOME",
        "CARGO_NET_",
        "CARGO_HTTP_",
        "CARGO_REGISTRIES_",
        "CARGO_REGISTRY_",
        "CARGO_TERM_",
    ];
    const REMOVE: &[&str] = &[
        "RUSTFLAGS",
        "RUSTDOCFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_LINKER",
        "TARGET",
        "HOST",
        "OUT_DIR",
        "NUM_JOBS",
        "OPT_LEVEL",
        "DEBUG",
        "PROFILE",
        "MAKEFLAGS",
        "MFLAGS",
    ];
    for (key, _) in env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let outer_cargo =
            key.starts_with("CARGO_") && !KEEP_PREFIXES.iter().any(|p| key.starts_with(p));
        if outer_cargo || REMOVE.contains(&key) {
            command.env_remove(key);
        }
    }
}
