//! The Python SDK's own checks as part of the test suite: `guest-sdk/python/check` runs its
//! unit tests (against the world's real bindings), mypy --strict over the SDK and the Python
//! example plugins, and ruff.

use std::process::Command;

#[test]
fn python_sdk_passes_its_unit_tests_mypy_strict_and_ruff() {
    let check = wasmop_python_plugins::workspace().join("guest-sdk/python/check");
    let status = Command::new("bash")
        .arg(&check)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", check.display()));
    assert!(
        status.success(),
        "{} failed ({status}); its output is above",
        check.display()
    );
}
