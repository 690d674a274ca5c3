//! The Python example plugins against their Rust twins' golden cases: each case of
//! `plugins/rust/<name>/tests/cases` runs the component built from `plugins/python/<name>`,
//! and its report must equal the case's `expected.yaml` (never rewritten from here: those
//! files are the Rust plugin's, see `plugins/rust/golden_runner.rs`).
//!
//! A CPython component is ~19 MB, so compiling it is the slow part (tens of seconds with
//! Cranelift); the cases share one artefact cache under `target/python-plugins/artefacts/`,
//! so only the first case of a changed plugin compiles it, and later runs of an unchanged one
//! compile nothing.

use std::path::{Path, PathBuf};

use wasmop_offline::{Harness, OfflineError, offline_runtime_config};
use wasmop_runtime::{LoadOptions, Runtime};

#[path = "../../../plugins/rust/golden_runner.rs"]
mod golden_runner;

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
    let harness = runtime.block_on(async {
        let rt = Runtime::new(offline_runtime_config().cache_dir(cache))?;
        let options = LoadOptions {
            config,
            policy: wasmop_core::policy::Policy::declared(),
            ..LoadOptions::default()
        };
        Harness::load_on(&rt, component, options).await
    })?;
    prune(cache, &harness.plugin().digest().to_string());
    Ok(harness)
}

/// Removes the artefacts of earlier builds of the plugin (each is ~40 MB), keeping the one
/// named by `digest`.
fn prune(cache: &Path, digest: &str) {
    let Ok(engines) = std::fs::read_dir(cache) else {
        return;
    };
    for engine in engines.flatten() {
        let Ok(entries) = std::fs::read_dir(engine.path()) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if !name.to_string_lossy().starts_with(digest) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

fn run_twin_cases(name: &str) {
    let component = wasmop_python_plugins::component(name);
    let cache: PathBuf = wasmop_python_plugins::out_dir()
        .join("artefacts")
        .join(name);
    golden_runner::run_cases_in(
        &component,
        &wasmop_python_plugins::twin_cases(name),
        &|component, config| load_cached(&cache, component, config),
        golden_runner::Expected::Twin,
    );
}

#[test]
fn python_database_config_passes_the_rust_plugins_golden_cases() {
    run_twin_cases("database-config");
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
        ["configmap-mirror", "database-config", "namespace-defaults"],
        "a new Python plugin needs its golden test here"
    );
    for name in names {
        let cases = wasmop_python_plugins::twin_cases(&name);
        assert!(
            cases.is_dir(),
            "plugins/python/{name} has no Rust twin with golden cases at {}",
            cases.display()
        );
    }
}
