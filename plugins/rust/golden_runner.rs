//! The golden-case runner shared by every language's example plugins: the Rust plugins'
//! `tests/golden.rs` reach it through `golden_cases.rs`, the Python plugins' test
//! (`tests/python/tests/golden.rs`) directly, so the same cases run the same way for both.
//! The case format is documented in `golden_cases.rs`.

use std::path::Path;

use wasmop_offline::{CaseSettings, Harness, OfflineError, ReviewKind, ReviewScenario, Scenario};

/// Loads a component with a case's settings (`config.yaml`, or `{}`).
pub type Load<'a> = &'a dyn Fn(&Path, serde_json::Value) -> Result<Harness, OfflineError>;

/// Whose cases they are, which says whether `WASMOP_BLESS=1` may rewrite them.
// Each file that includes this one uses one variant: a Rust plugin's test `Own`, the Python
// plugins' test `Twin`.
#[allow(dead_code)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// The plugin's own cases: `WASMOP_BLESS=1` rewrites its `expected.yaml` files.
    Own,
    /// Another plugin's cases (its twin in another language): the reports must equal those
    /// files, which are only compared, never rewritten from here.
    Twin,
}

/// Runs every case directory in `cases_dir` against `component`, loading it with `load` for
/// each case, failing with the case's name and a diff on a mismatch.
pub fn run_cases_in(component: &Path, cases_dir: &Path, load: Load<'_>, expected: Expected) {
    for case in case_dirs(cases_dir) {
        run_case(component, &case, load, expected);
    }
}

/// Runs every admission case directory in `dir` (`validate.yaml` or `mutate.yaml`, optional
/// `state.yaml` and `config.yaml`, `expected.yaml`) against `component`, loading it with
/// `load` for each case, failing with the case's name and a diff on a mismatch.
// Included by every plugin's tests; only those that serve admission call it.
#[allow(dead_code)]
pub fn run_admission_cases_in(component: &Path, dir: &Path, load: Load<'_>, expected: Expected) {
    for case in case_dirs(dir) {
        let (kind, file) = if case.join("validate.yaml").exists() {
            (ReviewKind::Validate, case.join("validate.yaml"))
        } else {
            (ReviewKind::Mutate, case.join("mutate.yaml"))
        };
        let mut scenario = ReviewScenario::from_yaml(kind, &read(&file))
            .unwrap_or_else(|e| panic!("case {}: {e:#}", case.display()));
        if case.join("state.yaml").exists() {
            scenario = scenario
                .with_state_yaml(&read(&case.join("state.yaml")))
                .unwrap_or_else(|e| panic!("case {}: {e:#}", case.display()));
        }
        let harness = load(component, case_config(&case))
            .unwrap_or_else(|e| panic!("case {}: {e:#}", case.display()));
        let report = harness
            .review_blocking(&scenario)
            .unwrap_or_else(|e| panic!("case {}: {e:#}", case.display()));
        eprintln!("case {}: {}", case.display(), report.result);
        let path = case.join("expected.yaml");
        match expected {
            Expected::Own => report.assert_golden(path),
            Expected::Twin => {
                let text = read(&path);
                if let Err(e) = report.compare(&text, &path) {
                    panic!(
                        "{} (these are the twin plugin's cases: its report is the one to match, \
                         and they are never blessed from here)",
                        causes(&e)
                    );
                }
            }
        }
    }
}

/// The case directories in `dir`, sorted; fails if there are none.
pub fn case_dirs(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut cases: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.expect("readable directory entry").path())
        .filter(|path| path.is_dir())
        .collect();
    cases.sort();
    assert!(!cases.is_empty(), "no cases in {}", dir.display());
    cases
}

/// A file of a case, which must exist.
pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// A case's settings for the plugin (`config.yaml`, or `{}`).
pub fn case_config(case: &Path) -> serde_json::Value {
    match case.join("config.yaml") {
        path if path.exists() => serde_yaml::from_str(&read(&path))
            .unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", path.display())),
        _ => serde_json::json!({}),
    }
}

fn run_case(component: &Path, case: &Path, load: Load<'_>, expected: Expected) {
    let settings = CaseSettings::read(case)
        .unwrap_or_else(|e| panic!("case {}: {}", case.display(), causes(&e)));
    let config = case_config(case);
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
    let harness =
        load(component, config).unwrap_or_else(|e| panic!("case {}: {e:#}", case.display()));
    let report = harness
        .run_blocking(&scenario)
        .unwrap_or_else(|e| panic!("case {}: {e:#}", case.display()));
    eprintln!("case {}: {}", case.display(), report.outcome.result);
    match expected {
        Expected::Own => report.assert_golden(case.join("expected.yaml")),
        Expected::Twin => {
            if let Err(e) = report.compare_with_file(case.join("expected.yaml")) {
                panic!(
                    "{} (these are the twin plugin's cases: its report is the one to match, \
                     and they are never blessed from here)",
                    causes(&e)
                );
            }
        }
    }
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
