//! The golden offline tests every example plugin runs (included by each plugin's
//! `tests/golden.rs`).
//!
//! Each directory `tests/cases/<case>/` holds:
//! - `object.yaml`: the primary object. When it has `metadata.deletionTimestamp`, the case
//!   calls `cleanup` (the host does so for an object being deleted that carries the plugin's
//!   finalizer); otherwise `reconcile`.
//! - `state.yaml`: the objects already in the cluster (several documents).
//! - `config.yaml` (optional): the plugin's configuration; `{}` without it.
//! - `expected.yaml`: the report `wasmop test` prints (the writes, in order, and the outcome).
//!
//! `WASMOP_BLESS=1 cargo test -p <plugin>` rewrites the `expected.yaml` files; review the diff.
//! The same case runs from the command line as
//! `wasmop test <plugin>.wasm --object object.yaml --state state.yaml [--config config.yaml]
//! --expect expected.yaml`.

use std::path::Path;

use wasmop_offline::{Harness, Scenario};

/// Runs every case of `plugin` (its guest name, the name of its directory: `database-config`
/// for `plugins/rust/database-config`) found in `<manifest_dir>/tests/cases`, failing with the
/// case's name and a diff on a mismatch.
pub fn run_cases(plugin: &str, manifest_dir: &str) {
    let component = wasmop_test_guests::component(plugin);
    let cases_dir = Path::new(manifest_dir).join("tests/cases");
    let mut cases: Vec<_> = std::fs::read_dir(&cases_dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", cases_dir.display()))
        .map(|entry| entry.expect("readable directory entry").path())
        .filter(|path| path.is_dir())
        .collect();
    cases.sort();
    assert!(!cases.is_empty(), "no cases in {}", cases_dir.display());
    for case in cases {
        run_case(component, &case);
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn run_case(component: &Path, case: &Path) {
    let config = match case.join("config.yaml") {
        path if path.exists() => serde_yaml::from_str(&read(&path))
            .unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", path.display())),
        _ => serde_json::json!({}),
    };
    let object = read(&case.join("object.yaml"));
    let mut scenario = Scenario::from_yaml(&object)
        .and_then(|s| s.with_state_yaml(&read(&case.join("state.yaml"))))
        .unwrap_or_else(|e| panic!("case {}: {e:#}", case.display()));
    let being_deleted = serde_yaml::from_str::<serde_json::Value>(&object)
        .map(|o| !o["metadata"]["deletionTimestamp"].is_null())
        .unwrap_or(false);
    if being_deleted {
        scenario = scenario.cleanup();
    }
    let harness = Harness::load_with_config_blocking(component, config)
        .unwrap_or_else(|e| panic!("case {}: {e:#}", case.display()));
    let report = harness
        .run_blocking(&scenario)
        .unwrap_or_else(|e| panic!("case {}: {e:#}", case.display()));
    eprintln!("case {}: {}", case.display(), report.outcome.result);
    report.assert_golden(case.join("expected.yaml"));
}
