//! Golden offline tests: every case in `tests/cases/` (see `plugins/rust/golden_cases.rs`).

#[path = "../../golden_cases.rs"]
mod golden_cases;

#[test]
fn golden_cases_match_their_expected_reports() {
    golden_cases::run_cases("database-config", env!("CARGO_MANIFEST_DIR"));
}

#[test]
fn admission_cases_match_their_expected_reports() {
    golden_cases::run_admission_cases("database-config", env!("CARGO_MANIFEST_DIR"));
}
