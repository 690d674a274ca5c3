//! Plugins written in Go on the real control plane: `plugins/go/database-config` (built from
//! source by `wasmop_go_plugins`, with the SDK) run by `wasmop run` from its plugin directory,
//! converging Databases into ConfigMaps and Ready conditions, then a changed build of it
//! dropped into the directory hot-reloaded and serving the next reconcile, with no reconcile
//! failing on the way; and the other two Go example plugins doing on the cluster what their
//! Rust twins do (`run.rs`'s scenario functions, as `python.rs` runs them for the Python twins);
//! and the Go `database-config` shipped the way a Go plugin fits a ConfigMap, compressed with
//! `zstd -19`, beside a zstd bomb in the same ConfigMap that is refused on its own.
//!
//! As in `python.rs`, the host keeps its artefacts in a `cacheDirectory` under
//! `target/go-plugins/artefacts/e2e*` (as a deployed host does; stale ones pruned). Loads are
//! tiered, as a deployed host's: Winch first, and the background Cranelift compile's artefact
//! is stored only if it finishes before the test kills the host. The first `database-config`'s
//! does, so the next run loads it; the changed build and the twins are quicker than their
//! Cranelift compiles, so every run compiles them with Winch again (cheaper than compiling
//! them with Cranelift up front, `tieredCompilation: false`, on a cold run).

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::harness::{
    Host, PLUGINS_CONFIGMAP, confined, message, plugins_configmap_source, put_plugins_configmap,
};
use wasmop_testenv::TestEnv;

use crate::admission::{admission_config, database_config_reviews, free_port};
use crate::database::{DATABASE_CRD, apply_database, managers, wait_config, wait_ready};

/// Databases the plugin converges.
const DATABASES: usize = 5;

/// The series of `database-config`'s failed reconciles (in the plugin or in the host around
/// it), and of its successful ones.
const FAILED: &str = r#"controller_runtime_reconcile_errors_total{controller="database-config"}"#;
const SUCCEEDED: &str =
    r#"controller_runtime_reconcile_total{controller="database-config",result="success"}"#;

/// Removes the artefacts in the host's cache directory `cache` of every component but
/// `keep` (each Go component's is ~10 MB).
fn prune(cache: &Path, keep: &[&Path]) {
    let keep: Vec<String> = keep
        .iter()
        .map(|path| wasmop_core::Digest::of(&std::fs::read(path).unwrap()).to_string())
        .collect();
    let keep: Vec<&str> = keep.iter().map(String::as_str).collect();
    wasmop_go_plugins::prune_artefacts(cache, &keep);
}

/// No reconcile of `database-config` failed (in the plugin or in the host around it).
async fn assert_no_reconcile_failed(host: &Host) {
    assert_eq!(
        host.metric(FAILED).await,
        0.0,
        "a reconcile failed; log:\n{}",
        host.log_text()
    );
}

/// Puts the component at `from` into the plugin directory as the file `key` at once (written
/// aside, then renamed over the old file, as `kubectl cp` or a CI job would).
async fn put_as(dir: &Path, key: &str, from: &Path) {
    let tmp = dir.join(format!(".{key}.tmp"));
    tokio::fs::copy(from, &tmp).await.unwrap();
    tokio::fs::rename(&tmp, dir.join(key)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn go_database_config_converges_databases_and_a_changed_build_is_hot_reloaded() {
    let v1 = wasmop_go_plugins::component("database-config");
    // The author's next version: another plugin version, and one more key in the ConfigMap.
    let v2 = wasmop_go_plugins::variant("database-config", "database-config-v2", |source| {
        source
            .replace(
                r#"NewInfo("database-config", "0.1.0""#,
                r#"NewInfo("database-config", "0.2.0""#,
            )
            .replace(
                r#""url":      fmt.Sprintf("%s://%s:%s", spec.Engine, spec.Host, port),"#,
                r#""url": fmt.Sprintf("%s://%s:%s", spec.Engine, spec.Host, port), "revision": "2","#,
            )
    });
    let cache = wasmop_go_plugins::out_dir().join("artefacts/e2e");
    prune(&cache, &[&v1, &v2]);
    let env = TestEnv::start().await.unwrap();
    env.apply_yaml(DATABASE_CRD).await.unwrap();
    let config = format!(
        "cacheDirectory: {}\n{}",
        cache.display(),
        admission_config(&env, &["database-config"], "", free_port())
    );
    let mut host = Host::start(&env, &[], &config).await;
    put_as(host.plugin_dir(), "database-config.wasm", &v1).await;

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

    put_as(host.plugin_dir(), "database-config.wasm", &v2).await;
    host.wait_log("the changed Go build to be swapped in", |l| {
        message(l) == "plugin version swapped" && l["fields"]["version"] == "0.2.0"
    })
    .await;
    apply_database(&env, "db-0", "moved.internal").await;
    let cm = wait_config(&env, "db-0", "host", "moved.internal").await;
    assert_eq!(cm.data.as_ref().unwrap()["revision"], "2");
    assert_eq!(wait_ready(&env, "db-0").await, 2);

    // Every reconcile succeeded, on version 1, across the swap and on version 2 (the count of
    // successes guards the series' spelling: an absent series reads as 0).
    assert!(
        host.metric(SUCCEEDED).await > DATABASES as f64,
        "{SUCCEEDED} counts fewer reconciles than were made; metrics:\n{}",
        host.metrics().await
    );
    assert_no_reconcile_failed(&host).await;
    host.stop().await;
}

/// The other two Go example plugins on the real control plane, in one host:
/// `namespace-defaults` and `configmap-mirror` do on the cluster what their Rust twins'
/// end-to-end tests check (`run.rs`, the same scenario functions), with the same settings and
/// grants.
#[tokio::test(flavor = "multi_thread")]
async fn go_namespace_defaults_and_configmap_mirror_do_what_their_rust_twins_do() {
    let defaults = wasmop_go_plugins::component("namespace-defaults");
    let mirror = wasmop_go_plugins::component("configmap-mirror");
    let cache = wasmop_go_plugins::out_dir().join("artefacts/e2e-twins");
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

/// The most a ConfigMap may hold: the API server refuses more (`Too long: must have at most
/// 1048576 bytes`).
const CONFIGMAP_LIMIT: usize = 1 << 20;

/// `input` compressed as the README tells an author to: `zstd -19` (Debian's `zstd`, which
/// `./dev setup` installs).
fn zstd(args: &[&str], input: &[u8]) -> Vec<u8> {
    let mut child = Command::new("zstd")
        .args(args)
        .args(["-q", "-c"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("zstd runs (Debian's zstd; ./dev setup installs it)");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success(), "zstd {args:?} failed");
    out.stdout
}

/// The Go `database-config` compressed with `zstd -19`, beside its component.
fn compressed(component: &Path) -> PathBuf {
    let out = component.with_extension("wasm.zst");
    std::fs::write(&out, zstd(&["-19"], &std::fs::read(component).unwrap())).unwrap();
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn go_database_config_ships_compressed_in_a_configmap_beside_a_refused_zstd_bomb() {
    let component = wasmop_go_plugins::component("database-config");
    let packed = std::fs::read(compressed(&component)).unwrap();
    assert!(
        packed.len() < CONFIGMAP_LIMIT,
        "the compressed Go database-config is {} bytes: over a ConfigMap's {CONFIGMAP_LIMIT}",
        packed.len()
    );
    // 129 MiB of zeros, a few KB compressed: one MiB more than a component may be.
    let bomb = zstd(&["-19"], &vec![0u8; 129usize << 20]);
    let cache = wasmop_go_plugins::out_dir().join("artefacts/e2e-configmap");
    prune(&cache, &[&component]);

    let env = TestEnv::start().await.unwrap();
    env.apply_yaml(DATABASE_CRD).await.unwrap();
    put_plugins_configmap(
        &env,
        vec![
            ("bomb.wasm.zst".to_owned(), bomb),
            ("database-config.wasm.zst".to_owned(), packed),
        ],
    )
    .await;
    let config = format!(
        "cacheDirectory: {}\n{}",
        cache.display(),
        confined(&env, &["database-config"], "")
    );
    let source = plugins_configmap_source();
    let mut host = Host::start_with_sources(&env, &[], &[&source], &config).await;

    let refused = host
        .wait_log("the zstd bomb to be refused", |l| {
            message(l) == "plugin version rejected" && l["fields"]["key"] == "bomb.wasm.zst"
        })
        .await;
    let error = refused["fields"]["error"].as_str().unwrap();
    assert_eq!(
        error,
        format!(
            "`bomb.wasm.zst` in ConfigMap {}/{PLUGINS_CONFIGMAP} cannot be loaded: compressed with zstd, \
             but it decompresses to more than the 134217728 bytes a component may be",
            env.namespace()
        )
    );

    for name in ["db-0", "db-1"] {
        apply_database(&env, name, &format!("{name}.internal")).await;
        let cm = wait_config(&env, name, "host", &format!("{name}.internal")).await;
        assert_eq!(
            cm.data.as_ref().unwrap()["url"],
            format!("postgres://{name}.internal:5432")
        );
        assert_eq!(wait_ready(&env, name).await, 1);
    }
    // The version the host runs is the component's own: its digest is the decompressed
    // bytes', so `wasmop compile`'s artefacts of the plain file serve the compressed one.
    let loaded = host
        .wait_log("the compressed plugin's load", |l| {
            message(l) == "plugin loaded" && l["fields"]["plugin"] == "database-config"
        })
        .await;
    let digest = wasmop_core::Digest::of(&std::fs::read(&component).unwrap());
    assert_eq!(loaded["fields"]["digest"], digest.short());
    assert_no_reconcile_failed(&host).await;
    host.stop().await;
}
