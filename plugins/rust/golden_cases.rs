//! The golden offline tests every example plugin runs (included by each plugin's
//! `tests/golden.rs`).
//!
//! Each directory `tests/cases/<case>/` holds:
//! - `object.yaml`: the primary object. When it has `metadata.deletionTimestamp`, the case
//!   calls `cleanup` (the host does so for an object being deleted that carries the plugin's
//!   finalizer); otherwise `reconcile`.
//! - `state.yaml`: the objects already in the cluster (several documents).
//! - `config.yaml` (optional): the plugin's configuration; `{}` without it.
//! - `case.yaml` (optional): settings of the case, a mapping; an unknown key fails the case
//!   with the file and the key. Today one key:
//!   - `now: <RFC 3339>`: the guest's wall clock (and the time the harness stamps), e.g.
//!     `now: 2025-01-01T00:01:00Z` for "a minute later"; default 2025-01-01T00:00:00Z
//!     (`wasmop_offline::OFFLINE_CLOCK`).
//! - `expected.yaml`: the report `wasmop test` prints (the writes, in order, the plugin's log
//!   lines and the outcome).
//!
//! `WASMOP_BLESS=1 cargo test -p <plugin>` rewrites the `expected.yaml` files; review the diff.
//! The same case runs from the command line as
//! `wasmop test <plugin>.wasm --object object.yaml --state state.yaml [--config config.yaml]
//! [--case case.yaml] --expect expected.yaml` (`--bless` to rewrite it); `wasmop test` reads
//! `case.yaml` with the same parser (`wasmop_offline::CaseSettings`).

use std::path::Path;

use wasmop_offline::{CaseSettings, Harness, Scenario};

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
    let settings = CaseSettings::read(case)
        .unwrap_or_else(|e| panic!("case {}: {}", case.display(), causes(&e)));
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
    if let Some(now) = settings.now {
        scenario = scenario.at(now);
    }
    let harness = Harness::load_with_config_blocking(component, config)
        .unwrap_or_else(|e| panic!("case {}: {e:#}", case.display()));
    let report = harness
        .run_blocking(&scenario)
        .unwrap_or_else(|e| panic!("case {}: {e:#}", case.display()));
    eprintln!("case {}: {}", case.display(), report.outcome.result);
    report.assert_golden(case.join("expected.yaml"));
}

/// `error` and its causes, one after another (the file, then what is wrong in it).
fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
