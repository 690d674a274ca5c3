//! The Python example plugins against their Rust twins' golden cases: each case of
//! `plugins/rust/<name>/tests/cases` (reconcile) and `tests/admission` (reviews) runs the
//! component built from `plugins/python/<name>`, and its report must equal the case's
//! `expected.yaml` (never rewritten from here: those files are the Rust plugin's, see
//! `plugins/rust/golden_runner.rs`).
//!
//! A CPython component is ~19 MB, so compiling it is the slow part (tens of seconds with
//! Cranelift); the cases share one artefact cache under `target/python-plugins/artefacts/`,
//! so only the first case of a changed plugin compiles it, and later runs of an unchanged one
//! compile nothing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use wasmop_offline::{Harness, OfflineError, Scenario, offline_runtime_config};
use wasmop_runtime::{LoadOptions, Runtime};

#[path = "../../../plugins/rust/golden_runner.rs"]
mod golden_runner;

/// One load per cache directory at a time, so that of the tests sharing a plugin only the
/// first compiles it and the others load its artefact.
static LOADING: LazyLock<Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>> = LazyLock::new(Default::default);

/// Loads `component` as `wasmop test` does, with the plugin's artefact cache.
fn load_cached(
    cache: &Path,
    component: &Path,
    config: serde_json::Value,
) -> Result<Harness, OfflineError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(OfflineError::AsyncRuntime)?;
    let lock = LOADING
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(cache.to_owned())
        .or_default()
        .clone();
    let _one_load = lock.lock().unwrap_or_else(PoisonError::into_inner);
    let harness = runtime.block_on(async {
        let rt = Runtime::new(offline_runtime_config().cache_dir(cache))?;
        let options = LoadOptions {
            config,
            policy: wasmop_core::policy::Policy::declared(),
            ..LoadOptions::default()
        };
        Harness::load_on(&rt, component, options).await
    })?;
    wasmop_python_plugins::prune_artefacts(cache, &[&harness.plugin().digest().to_string()]);
    Ok(harness)
}

/// The artefact cache of the plugin `name`.
fn cache(name: &str) -> PathBuf {
    wasmop_python_plugins::out_dir()
        .join("artefacts")
        .join(name)
}

fn run_twin_cases(name: &str) {
    let component = wasmop_python_plugins::component(name);
    let cache = cache(name);
    golden_runner::run_cases_in(
        &component,
        &wasmop_python_plugins::twin_cases(name),
        &|component, config| load_cached(&cache, component, config),
        golden_runner::Expected::Twin,
    );
}

/// The Rust twin's review cases (`tests/admission`), as `wasmop test --validate/--mutate`
/// runs them.
fn run_twin_admission_cases(name: &str) {
    let component = wasmop_python_plugins::component(name);
    let cache = cache(name);
    golden_runner::run_admission_cases_in(
        &component,
        &wasmop_python_plugins::twin_admission_cases(name),
        &|component, config| load_cached(&cache, component, config),
        golden_runner::Expected::Twin,
    );
}

#[test]
fn python_database_config_passes_the_rust_plugins_golden_cases() {
    run_twin_cases("database-config");
}

/// Its admission half too.
#[test]
fn python_database_config_passes_the_rust_plugins_admission_cases() {
    run_twin_admission_cases("database-config");
}

/// An admission-only plugin (world `admission-plugin`: no reconciler): its review cases are
/// all it has.
#[test]
fn python_required_labels_passes_the_rust_plugins_admission_cases() {
    run_twin_admission_cases("required-labels");
}

#[test]
fn python_namespace_defaults_passes_the_rust_plugins_golden_cases() {
    run_twin_cases("namespace-defaults");
}

#[test]
fn python_configmap_mirror_passes_the_rust_plugins_golden_cases() {
    run_twin_cases("configmap-mirror");
}

#[test]
fn every_python_plugin_has_a_rust_twin_with_cases() {
    let names = wasmop_python_plugins::names();
    assert_eq!(
        names,
        [
            "configmap-mirror",
            "database-config",
            "namespace-defaults",
            "required-labels"
        ],
        "a new Python plugin needs its golden test here"
    );
    for name in names {
        let cases = wasmop_python_plugins::twin_cases(&name);
        let admission = wasmop_python_plugins::twin_admission_cases(&name);
        assert!(
            cases.is_dir() || admission.is_dir(),
            "plugins/python/{name} has no Rust twin with golden cases at {} or {}",
            cases.display(),
            admission.display()
        );
    }
}

/// The SDK's promise for what a plugin does not catch, on the built component: a Database
/// whose `status.conditions` is not a list makes `database-config`'s reconcile raise a
/// `TypeError` after its apply. The call ends as a retryable plugin error (not a trap) whose
/// message names the exception and the plugin's frame; the write made before it stays in the
/// report.
#[test]
fn an_uncaught_exception_in_a_python_plugin_is_a_retryable_error_with_its_traceback() {
    let component = wasmop_python_plugins::component("database-config");
    let harness = load_cached(&cache("database-config"), &component, serde_json::json!({}))
        .expect("the Python database-config loads");
    let scenario = Scenario::from_yaml(
        "apiVersion: demo.wasmop.dev/v1\nkind: Database\n\
         metadata: {name: orders, namespace: shop, uid: u-1, generation: 1}\n\
         spec: {engine: postgres, host: db, port: 5432, replicas: 1}\n\
         status: {conditions: 5}\n",
    )
    .and_then(|s| s.with_state_yaml("apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n"))
    .expect("a valid scenario");
    let report = harness.run_blocking(&scenario).expect("the call runs");
    let message = report.outcome.message.clone().unwrap_or_default();
    assert_eq!(report.outcome.result, "retryable-error", "{message}");
    assert!(
        message.starts_with("TypeError: 'int' object is not iterable\\ntraceback (innermost "),
        "{message}"
    );
    assert!(
        message.contains("/app.py:") && message.contains(" in reconcile"),
        "{message}"
    );
    assert_eq!(
        report.writes.len(),
        1,
        "the apply before the exception: {:?}",
        report.writes
    );
}
