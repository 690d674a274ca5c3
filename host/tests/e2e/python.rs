//! Plugins written in Python on the real control plane: `plugins/python/database-config`
//! (built from source by `wasmop_python_plugins`, with the SDK) run by `wasmop run` from its
//! plugin directory, converging Databases into ConfigMaps and Ready conditions, serving its
//! admission webhooks (a bad Database refused, replicas defaulted), then a changed
//! build of it dropped into the directory hot-reloaded and serving the next reconcile; and the
//! hostile Python plugin (`tests/python/hostile`) beside it, each attack reported on its
//! Target as a Warning Event with its typed outcome while the Databases keep converging.
//!
//! One test for the first two, because each first load of a CPython component (~19 MB) is a cold
//! compile: Winch first, Cranelift in the background. The host keeps its artefacts in a
//! `cacheDirectory` under `target/python-plugins/artefacts/e2e` (as a deployed host does), so
//! the next run of an unchanged plugin compiles nothing.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use crate::harness::{self, Host, confined, message, test_kinds};
use wasmop_testenv::TestEnv;

use crate::admission::{admission_config, database_config_reviews, free_port};
use crate::database::{DATABASE_CRD, apply_database, managers, wait_config, wait_ready};

/// Databases the plugin converges.
const DATABASES: usize = 5;

/// Removes the artefacts in the host's cache directory `cache` of every component but
/// `keep`.
fn prune(cache: &Path, keep: &[&Path]) {
    let keep: Vec<String> = keep
        .iter()
        .map(|path| wasmop_core::Digest::of(&std::fs::read(path).unwrap()).to_string())
        .collect();
    let keep: Vec<&str> = keep.iter().map(String::as_str).collect();
    wasmop_python_plugins::prune_artefacts(cache, &keep);
}

/// Puts the component at `from` into the plugin directory as `database-config.wasm` at once
/// (written aside, then renamed over the old file, as `kubectl cp` or a CI job would).
async fn put(dir: &Path, from: &Path) {
    put_as(dir, "database-config.wasm", from).await;
}

/// [`put`] as the file `key`.
async fn put_as(dir: &Path, key: &str, from: &Path) {
    let tmp = dir.join(format!(".{key}.tmp"));
    tokio::fs::copy(from, &tmp).await.unwrap();
    tokio::fs::rename(&tmp, dir.join(key)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn python_database_config_converges_databases_and_a_changed_build_is_hot_reloaded() {
    let v1 = wasmop_python_plugins::component("database-config");
    // The author's next version: another plugin version, and one more key in the ConfigMap.
    let v2 = wasmop_python_plugins::variant("database-config", "database-config-v2", |module| {
        module
            .replace(
                r#"Info("database-config", "0.1.0")"#,
                r#"Info("database-config", "0.2.0")"#,
            )
            .replace(
                r#""url": f"{engine}://{host}:{port}","#,
                r#""url": f"{engine}://{host}:{port}", "revision": "2","#,
            )
    });
    let cache = wasmop_python_plugins::out_dir().join("artefacts/e2e");
    prune(&cache, &[&v1, &v2]);
    let env = TestEnv::start().await.unwrap();
    env.apply_yaml(DATABASE_CRD).await.unwrap();
    let config = format!(
        "cacheDirectory: {}\n{}",
        cache.display(),
        admission_config(&env, &["database-config"], "", free_port())
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
        let managers = managers(&cm);
        assert!(
            managers.contains(&"wasmop/database-config".to_owned()),
            "{managers:?}"
        );
        assert_eq!(wait_ready(&env, name).await, 1);
    }
    // Its admission half, through the API server, answering as the Rust plugin's does.
    database_config_reviews(&env).await;

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

/// The hostile plugin's attacks (the Target's name) and what the Warning Event on the Target
/// must say: the outcome as `kubectl describe` shows it.
const ATTACKS: &[(&str, &str, &str)] = &[
    (
        "infinite-loop",
        "PluginFailed",
        "did not finish within its deadline of 2000 ms",
    ),
    ("memory-bomb", "PluginFailed", "ran out of memory"),
    ("deep-repr", "PluginFailed", "wasm stack overflow"),
    (
        "exception",
        "ReconcileFailed",
        "ValueError: hostile Python plugin raised on purpose",
    ),
    (
        "read-file",
        "ReconcileFailed",
        "FileNotFoundError: [Errno 44] No such file or directory: '/etc/passwd'",
    ),
    ("connect", "ReconcileFailed", "PermissionError: "),
    ("environ", "ReconcileFailed", "LookupError: environment: {}"),
];

#[tokio::test(flavor = "multi_thread")]
async fn hostile_python_plugin_is_reported_on_its_targets_while_a_python_plugin_beside_it_converges()
 {
    let hostile = wasmop_python_plugins::hostile();
    let healthy = wasmop_python_plugins::component("database-config");
    // Its own cache: the test above prunes its directory to its own builds. Cranelift only,
    // not tiered: the attacks keep the cores busy past the end of the test, so a background
    // Cranelift compile would never finish and write the cache, and every run would compile
    // again; and so the attacks meet Cranelift code here (the runtime test runs them on
    // Winch).
    let cache = wasmop_python_plugins::out_dir().join("artefacts/e2e-hostile");
    prune(&cache, &[&hostile, &healthy]);
    let env = TestEnv::start().await.unwrap();
    test_kinds(&env).await;
    env.apply_yaml(DATABASE_CRD).await.unwrap();
    let config = format!(
        "tieredCompilation: false\ncacheDirectory: {}\n{}",
        cache.display(),
        confined(
            &env,
            &["python-hostile", "database-config"],
            "    deadline: 2s\n"
        )
    );
    let host = Host::start(&env, &[], &config).await;
    put_as(host.plugin_dir(), "python-hostile.wasm", &hostile).await;
    put(host.plugin_dir(), &healthy).await;

    for (name, _, _) in ATTACKS {
        env.apply_yaml(&format!(
            "apiVersion: wasmop.test/v1\nkind: Target\nmetadata:\n  name: {name}\nspec:\n  value: \"1\"\n"
        ))
        .await
        .expect("Target created");
    }
    // The attacks fail again and again (with backoff) while the Databases are reconciled.
    for i in 0..DATABASES {
        apply_database(&env, &format!("db-{i}"), "db.internal").await;
    }
    for i in 0..DATABASES {
        wait_config(&env, &format!("db-{i}"), "host", "db.internal").await;
        assert_eq!(wait_ready(&env, &format!("db-{i}")).await, 1);
    }

    harness::wait_events(&env, "Warning Event for every attack", |all| {
        ATTACKS.iter().all(|(name, reason, note)| {
            all.iter().any(|e| {
                harness::regarding(e) == Some(name)
                    && e.reason.as_deref() == Some(reason)
                    && e.type_.as_deref() == Some("Warning")
                    && e.note.as_deref().is_some_and(|n| n.contains(note))
            })
        })
    })
    .await;
    // And the healthy plugin still converges what changes after the attacks.
    apply_database(&env, "db-0", "moved.internal").await;
    wait_config(&env, "db-0", "host", "moved.internal").await;
    assert_eq!(wait_ready(&env, "db-0").await, 2);
    host.stop().await;
}

/// The other two Python example plugins on the real control plane, in one host (each first
/// load is a cold compile): `namespace-defaults` and `configmap-mirror` do on the cluster what
/// their Rust twins' end-to-end tests check (`run.rs`, the same scenario functions), with
/// the same settings and grants.
#[tokio::test(flavor = "multi_thread")]
async fn python_namespace_defaults_and_configmap_mirror_do_what_their_rust_twins_do() {
    let defaults = wasmop_python_plugins::component("namespace-defaults");
    let mirror = wasmop_python_plugins::component("configmap-mirror");
    let cache = wasmop_python_plugins::out_dir().join("artefacts/e2e-twins");
    prune(&cache, &[&defaults, &mirror]);
    let env = TestEnv::start().await.unwrap();
    let config = format!(
        "cacheDirectory: {}\nresyncPeriod: 0s\nplugins:\n{}{}",
        cache.display(),
        crate::run::namespace_defaults_settings(&env),
        crate::run::configmap_mirror_settings(&env),
    );
    let host = Host::start(&env, &[], &config).await;
    put_as(host.plugin_dir(), "namespace-defaults.wasm", &defaults).await;
    put_as(host.plugin_dir(), "configmap-mirror.wasm", &mirror).await;
    crate::run::namespace_defaults_gives_its_defaults(&env).await;
    crate::run::configmap_mirror_copies_and_cleans_up(&env).await;
    host.stop().await;
}
