//! A plugin written in Python on the real control plane: `plugins/python/database-config`
//! (built from source by `wasmop_python_plugins`, with the SDK) run by `wasmop run` from its
//! plugin directory, converging Databases into ConfigMaps and Ready conditions, then a changed
//! build of it dropped into the directory hot-reloaded and serving the next reconcile.
//!
//! One test for both, because each first load of a CPython component (~19 MB) is a cold
//! compile: Winch first, Cranelift in the background. The host keeps its artefacts in a
//! `cacheDirectory` under `target/python-plugins/artefacts/e2e` (as a deployed host does), so
//! the next run of an unchanged plugin compiles nothing.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use crate::harness::{Host, PATIENCE, confined, message};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use wasmop_testenv::TestEnv;

/// The Rust and the Python plugin reconcile the same CRD.
const DATABASE_CRD: &str = include_str!("../../../plugins/rust/database-config/crd.yaml");

/// Databases the plugin converges.
const DATABASES: usize = 5;

fn databases(env: &TestEnv) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("demo.wasmop.dev", "v1", "Database"),
        "databases",
    );
    Api::namespaced_with(env.client(), env.namespace(), &ar)
}

async fn apply_database(env: &TestEnv, name: &str, host: &str) {
    env.apply_yaml(&format!(
        "apiVersion: demo.wasmop.dev/v1\nkind: Database\nmetadata:\n  name: {name}\n\
         spec:\n  engine: postgres\n  host: {host}\n  port: 5432\n  replicas: 1\n"
    ))
    .await
    .expect("Database applied");
}

/// Waits until the Database is Ready for its current generation, and returns that generation.
async fn wait_ready(env: &TestEnv, name: &str) -> i64 {
    let db = wasmop_testenv::wait_for_dyn(
        &databases(env),
        name,
        "to be Ready for its generation",
        PATIENCE,
        |o| {
            o.is_some_and(|o| {
                let status = &o.data["status"];
                let ready = status["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True");
                ready && status["observedGeneration"].as_i64() == o.metadata.generation
            })
        },
    )
    .await
    .unwrap()
    .unwrap();
    db.metadata.generation.unwrap()
}

/// Waits until `<name>-config` has `key: value` in its data, and returns it.
async fn wait_config(env: &TestEnv, name: &str, key: &str, value: &str) -> ConfigMap {
    let api: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    env.wait_for(
        &api,
        &format!("{name}-config"),
        &format!("to say {key}: {value}"),
        PATIENCE,
        |cm| {
            cm.and_then(|c| c.data.as_ref())
                .and_then(|d| d.get(key))
                .is_some_and(|v| v == value)
        },
    )
    .await
    .unwrap()
    .unwrap()
}

/// Removes the artefacts in the host's cache directory `cache` of every component but
/// `keep` (each is ~40 MB; an earlier build of the plugin leaves one behind).
fn prune(cache: &Path, keep: &[&Path]) {
    let keep: Vec<String> = keep
        .iter()
        .map(|path| wasmop_core::Digest::of(&std::fs::read(path).unwrap()).to_string())
        .collect();
    let Ok(engines) = std::fs::read_dir(cache) else {
        return;
    };
    for engine in engines.flatten() {
        let Ok(entries) = std::fs::read_dir(engine.path()) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if !keep.iter().any(|digest| name.starts_with(digest.as_str())) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

/// Puts the component at `from` into the plugin directory as `database-config.wasm` at once
/// (written aside, then renamed over the old file, as `kubectl cp` or a CI job would).
async fn put(dir: &Path, from: &Path) {
    let tmp = dir.join(".database-config.wasm.tmp");
    tokio::fs::copy(from, &tmp).await.unwrap();
    tokio::fs::rename(&tmp, dir.join("database-config.wasm"))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn python_database_config_converges_databases_and_a_changed_build_is_hot_reloaded() {
    let v1 = wasmop_python_plugins::component("database-config");
    // The author's next version: another plugin version, and one more key in the ConfigMap.
    let v2 = wasmop_python_plugins::variant("database-config", "database-config-v2", |app| {
        app.replace(
            r#"Info("database-config", "0.1.0")"#,
            r#"Info("database-config", "0.2.0")"#,
        )
        .replace(
            r#""url": f"{spec.engine}://{spec.host}:{spec.port}","#,
            r#""url": f"{spec.engine}://{spec.host}:{spec.port}", "revision": "2","#,
        )
    });
    let cache = wasmop_python_plugins::out_dir().join("artefacts/e2e");
    prune(&cache, &[&v1, &v2]);
    let env = TestEnv::start().await.unwrap();
    env.apply_yaml(DATABASE_CRD).await.unwrap();
    let config = format!(
        "cacheDirectory: {}\n{}",
        cache.display(),
        confined(&env, &["database-config"], "")
    );
    let mut host = Host::start(&env, &[], &config).await;
    put(host.plugin_dir(), &v1).await;

    let names: Vec<String> = (0..DATABASES).map(|i| format!("db-{i}")).collect();
    for name in &names {
        apply_database(&env, name, &format!("{name}.internal")).await;
    }
    for name in &names {
        let cm = wait_config(&env, name, "host", &format!("{name}.internal")).await;
        let data = cm.data.as_ref().unwrap();
        assert_eq!(data["url"], format!("postgres://{name}.internal:5432"));
        assert!(!data.contains_key("revision"), "{data:?}");
        let owner = &cm.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.controller),
            ("Database", name.as_str(), Some(true))
        );
        let managers: Vec<_> = cm
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .filter_map(|m| m.manager.clone())
            .collect();
        assert!(
            managers.contains(&"wasmop/database-config".to_owned()),
            "{managers:?}"
        );
        assert_eq!(wait_ready(&env, name).await, 1);
    }

    put(host.plugin_dir(), &v2).await;
    host.wait_log("the changed Python build to be swapped in", |l| {
        message(l) == "plugin version swapped" && l["fields"]["version"] == "0.2.0"
    })
    .await;
    apply_database(&env, "db-0", "moved.internal").await;
    let cm = wait_config(&env, "db-0", "host", "moved.internal").await;
    assert_eq!(cm.data.as_ref().unwrap()["revision"], "2");
    assert_eq!(wait_ready(&env, "db-0").await, 2);
    host.stop().await;
}
