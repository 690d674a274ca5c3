//! Golden offline tests: every review case in `tests/admission/` (see
//! `plugins/rust/golden_cases.rs`), as `wasmop test --validate` runs them.

// It has review cases only: the shared runner's reconcile half goes unused here.
#[allow(dead_code)]
#[path = "../../golden_cases.rs"]
mod golden_cases;

#[test]
fn admission_cases_match_their_expected_reports() {
    golden_cases::run_admission_cases("required-labels", env!("CARGO_MANIFEST_DIR"));
}
