//! The workspace's layering, as `cargo tree` sees it (see ARCHITECTURE.md, "Crates"): each
//! crate may depend only on the crates below it, the wasmtime side never reaches the API
//! server's client, and nothing depends on the binary.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// Packages that talk to the API server or serve HTTP: none may appear in the runtime's, the
/// core's or the offline harness's dependencies (and so in a plugin crate's tests).
const CLIENT_SIDE: &[&str] = &[
    "kube",
    "kube-client",
    "kube-runtime",
    "hyper",
    "hyper-util",
    "rustls",
    "tower",
    "prometheus-client",
    "notify",
    "clap",
];

/// What the runtime owns: only it (and what is above it) may pull wasmtime in.
const WASM_SIDE: &[&str] = &["wasmtime", "wasmtime-wasi"];

/// The package names `cargo tree` prints with `args` (one `{p}` per line), for the host
/// platform.
fn tree(args: &[&str]) -> BTreeSet<String> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(&workspace)
        .args(["tree", "--locked"])
        .args(args)
        .args(["--prefix", "none", "--format", "{p}"])
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("cargo tree prints UTF-8")
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// The package names in `package`'s dependency tree over the `edges` kinds.
fn closure(package: &str, edges: &str) -> BTreeSet<String> {
    tree(&["-p", package, "-e", edges])
}

fn assert_none_of(package: &str, edges: &str, banned: &[&str]) {
    let deps = closure(package, edges);
    let found: Vec<&&str> = banned.iter().filter(|b| deps.contains(**b)).collect();
    assert!(
        found.is_empty(),
        "{package} ({edges} dependencies) must not depend on {found:?}; see ARCHITECTURE.md"
    );
}

#[test]
fn the_runtime_never_reaches_the_api_client() {
    assert_none_of("wasmop-runtime", "normal", CLIENT_SIDE);
}

#[test]
fn the_core_is_neither_client_nor_runtime() {
    assert_none_of("wasmop-core", "normal", CLIENT_SIDE);
    assert_none_of("wasmop-core", "normal", WASM_SIDE);
}

#[test]
fn plugin_crates_test_without_the_host_client() {
    // What `cargo test -p <plugin>` builds: the offline harness, the runtime, the core.
    assert_none_of("wasmop-offline", "normal", CLIENT_SIDE);
    assert_none_of("database-config", "normal,dev", CLIENT_SIDE);
}

#[test]
fn crates_depend_only_downwards() {
    // Each crate and the workspace crates it must never depend on, at any depth.
    let rules: &[(&str, &[&str])] = &[
        (
            "wasmop-core",
            &[
                "wasmop-runtime",
                "wasmop-offline",
                "wasmop-controller",
                "wasmop",
            ],
        ),
        (
            "wasmop-runtime",
            &["wasmop-offline", "wasmop-controller", "wasmop"],
        ),
        ("wasmop-offline", &["wasmop-controller", "wasmop"]),
        ("wasmop-controller", &["wasmop-offline", "wasmop"]),
    ];
    for (package, below) in rules {
        assert_none_of(package, "normal,build", below);
    }
}

#[test]
fn nothing_depends_on_the_binary() {
    let mut dependents = tree(&[
        "--workspace",
        "-e",
        "normal,dev,build",
        "--invert",
        "wasmop",
    ]);
    dependents.remove("wasmop");
    assert!(
        dependents.is_empty(),
        "the binary crate `wasmop` must be a leaf, but {dependents:?} depend on it"
    );
}
