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
//! A plugin that serves admission has its review cases in `tests/admission/<case>/` (apart, so
//! that a twin in another language runs them only if it reviews too: the Python
//! `database-config` does, `tests/python/tests/golden.rs`):
//! - `validate.yaml` or `mutate.yaml`: the AdmissionReview (admission.k8s.io/v1) the API server
//!   would send, and which export reviews it.
//! - `state.yaml` (optional): the objects already in the cluster, for reviews that read.
//! - `config.yaml` (optional): as above.
//! - `expected.yaml`: the review's report (the verdict, the JSON patch of a mutation, the log
//!   lines), as `wasmop test --validate validate.yaml` prints it.
//!
//! `WASMOP_BLESS=1 cargo test -p <plugin>` rewrites the `expected.yaml` files; review the diff.
//! The same case runs from the command line as
//! `wasmop test <plugin>.wasm --object object.yaml --state state.yaml [--config config.yaml]
//! [--case case.yaml] --expect expected.yaml` (`--bless` to rewrite it); `wasmop test` reads
//! `case.yaml` with the same parser (`wasmop_offline::CaseSettings`).

use std::path::Path;

use wasmop_offline::Harness;

#[path = "golden_runner.rs"]
mod runner;

/// Runs every case of `plugin` (its guest name, the name of its directory: `database-config`
/// for `plugins/rust/database-config`) found in `<manifest_dir>/tests/cases`, failing with the
/// case's name and a diff on a mismatch.
pub fn run_cases(plugin: &str, manifest_dir: &str) {
    let component = wasmop_test_guests::component(plugin);
    let cases_dir = Path::new(manifest_dir).join("tests/cases");
    runner::run_cases_in(
        component,
        &cases_dir,
        &|component: &Path, config| Harness::load_with_config_blocking(component, config),
        runner::Expected::Own,
    );
}

/// Runs every admission case of `plugin` in `<manifest_dir>/tests/admission` (see the module
/// documentation), failing with the case's name and a diff on a mismatch.
// Included by every plugin's tests; only those that serve admission call it.
#[allow(dead_code)]
pub fn run_admission_cases(plugin: &str, manifest_dir: &str) {
    runner::run_admission_cases_in(
        wasmop_test_guests::component(plugin),
        &Path::new(manifest_dir).join("tests/admission"),
        &|component: &Path, config| Harness::load_with_config_blocking(component, config),
        runner::Expected::Own,
    );
}
