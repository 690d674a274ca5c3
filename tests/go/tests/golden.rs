//! The Go example plugins against their Rust twins' golden cases: each case of
//! `plugins/rust/<name>/tests/cases` runs the component built from `plugins/go/<name>`, and
//! its report must equal the case's `expected.yaml` (never rewritten from here: those files
//! are the Rust plugin's, see `plugins/rust/golden_runner.rs`).
//!
//! The cases of a plugin share one artefact cache under `target/go-plugins/artefacts/`, so
//! only the first case of a changed plugin compiles it (a Go component is ~3.5 MB: seconds
//! with Cranelift), and later runs of an unchanged one compile nothing.

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
    wasmop_go_plugins::prune_artefacts(cache, &[&harness.plugin().digest().to_string()]);
    Ok(harness)
}

/// The artefact cache of the plugin `name`.
fn cache(name: &str) -> PathBuf {
    wasmop_go_plugins::out_dir().join("artefacts").join(name)
}

fn run_twin_cases(name: &str) {
    let component = wasmop_go_plugins::component(name);
    let cache = cache(name);
    golden_runner::run_cases_in(
        &component,
        &wasmop_go_plugins::twin_cases(name),
        &|component, config| load_cached(&cache, component, config),
        golden_runner::Expected::Twin,
    );
}

#[test]
fn go_database_config_passes_the_rust_plugins_golden_cases() {
    run_twin_cases("database-config");
}

/// The Rust twin's review cases (`tests/admission`), as `wasmop test --validate/--mutate`
/// runs them.
fn run_twin_admission_cases(name: &str) {
    let component = wasmop_go_plugins::component(name);
    let cache = cache(name);
    golden_runner::run_admission_cases_in(
        &component,
        &wasmop_go_plugins::twin_admission_cases(name),
        &|component, config| load_cached(&cache, component, config),
        golden_runner::Expected::Twin,
    );
}

/// Its admission half too.
#[test]
fn go_database_config_passes_the_rust_plugins_admission_cases() {
    run_twin_admission_cases("database-config");
}

/// An admission-only plugin (world `admission-plugin`: no reconciler), so admission cases
/// alone.
#[test]
fn go_required_labels_passes_the_rust_plugins_admission_cases() {
    run_twin_admission_cases("required-labels");
}

#[test]
fn go_namespace_defaults_passes_the_rust_plugins_golden_cases() {
    run_twin_cases("namespace-defaults");
}

#[test]
fn go_configmap_mirror_passes_the_rust_plugins_golden_cases() {
    run_twin_cases("configmap-mirror");
}

#[test]
fn every_go_plugin_has_a_rust_twin_with_cases() {
    let names = wasmop_go_plugins::names();
    assert_eq!(
        names,
        [
            "configmap-mirror",
            "database-config",
            "namespace-defaults",
            "required-labels"
        ],
        "a new Go plugin needs its golden test here"
    );
    for name in names {
        // An admission-only plugin's twin has review cases and no reconcile ones.
        let cases = wasmop_go_plugins::twin_cases(&name);
        let admission = wasmop_go_plugins::twin_admission_cases(&name);
        assert!(
            cases.is_dir() || admission.is_dir(),
            "plugins/go/{name} has no Rust twin with golden cases at {} or {}",
            cases.display(),
            admission.display()
        );
    }
}

/// Runs `reconcile` of `tests/go/panicky` on a ConfigMap called `name`.
fn run_panicky(name: &str) -> wasmop_offline::Report {
    let component = wasmop_go_plugins::panicky();
    let harness = load_cached(&cache("panicky"), &component, serde_json::json!({}))
        .expect("the panicky test plugin loads");
    let scenario = Scenario::from_yaml(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: shop, uid: u-1}}\n"
    ))
    .and_then(|s| s.with_state_yaml("apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n"))
    .expect("a valid scenario");
    harness.run_blocking(&scenario).expect("the call runs")
}

/// The SDK's promise for a panic, on the built component: the call ends as a retryable
/// plugin error (not a trap) whose message is the panic's and names the plugin's frames; the
/// write made before it stays in the report.
#[test]
fn a_panic_in_a_go_plugin_is_a_retryable_error_with_its_message_and_frames() {
    let report = run_panicky("panic");
    let message = report.outcome.message.clone().unwrap_or_default();
    assert_eq!(report.outcome.result, "retryable-error", "{message}");
    assert!(
        message.starts_with("panic: reconciling panic went wrong\\ngoroutine (innermost "),
        "{message}"
    );
    assert!(
        message.contains("wasmop.dev/tests/panicky@v0.0.0/plugin.go:")
            && message.contains("panicky.explode")
            && message.contains("panicky.Panicky.Reconcile"),
        "{message}"
    );
    assert_eq!(
        report.writes.len(),
        1,
        "the apply before the panic: {:?}",
        report.writes
    );

    let report = run_panicky("nil-map");
    let message = report.outcome.message.clone().unwrap_or_default();
    assert_eq!(report.outcome.result, "retryable-error", "{message}");
    assert!(
        message.starts_with("panic: assignment to entry in nil map\\n"),
        "{message}"
    );

    let report = run_panicky("fine");
    assert_eq!(report.outcome.result, "done", "{:?}", report.outcome);
}
