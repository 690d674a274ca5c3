//! Hot reload on the real control plane: the plugin `reload-probe` (guests `reload-v1`,
//! `reload-v2`, `reload-kinds`) served from a ConfigMap read through the API, or from the
//! host's plugin directory. Each version writes its version number into `<input>-out`, so a
//! test sees which version ran a reconcile.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use crate::harness::{
    self, Host, PATIENCE, PLUGINS_CONFIGMAP, message, plugins_configmap_source,
    put_plugins_configmap,
};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use wasmop_testenv::TestEnv;

const KEY: &str = "reload-probe.wasm";

fn guest(name: &str) -> Vec<u8> {
    std::fs::read(wasmop_test_guests::component(name)).unwrap()
}

fn configmaps(env: &TestEnv) -> Api<ConfigMap> {
    Api::namespaced(env.client(), env.namespace())
}

/// Creates or replaces the plugin ConfigMap with `entries` (key, guest).
async fn put_plugins(env: &TestEnv, entries: &[(&str, &str)]) {
    let entries = entries
        .iter()
        .map(|(key, name)| ((*key).to_owned(), guest(name)))
        .collect();
    put_plugins_configmap(env, entries).await;
}

/// The host config: the plugin confined to the test's namespace (other tests run their own
/// hosts beside this one).
fn config(env: &TestEnv) -> String {
    format!(
        "resyncPeriod: 0s\nplugins:\n  reload-probe:\n    namespaces: [{}]\n",
        env.namespace()
    )
}

async fn start_with_configmap(env: &TestEnv, first: &str) -> Host {
    put_plugins(env, &[(KEY, first)]).await;
    let source = plugins_configmap_source();
    Host::start_with_sources(env, &[], &[&source], &config(env)).await
}

/// Creates or changes the input `name` (a change makes the plugin reconcile it again).
async fn touch_input(env: &TestEnv, name: &str, data: &[(&str, &str)]) {
    let mut map: BTreeMap<String, String> = data
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    map.insert("nonce".into(), format!("{:?}", std::time::Instant::now()));
    let cm = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"wasmop.test/reload": "input"}},
        "data": map,
    });
    configmaps(env)
        .patch(
            name,
            &PatchParams::apply("e2e-reload").force(),
            &Patch::Apply(cm),
        )
        .await
        .unwrap();
}

/// Waits until `<input>-out` says `version`.
async fn wait_version(env: &TestEnv, input: &str, version: &str) {
    env.wait_for(
        &configmaps(env),
        &format!("{input}-out"),
        &format!("to be written by version {version}"),
        PATIENCE,
        |cm| {
            cm.and_then(|c| c.data.as_ref())
                .and_then(|d| d.get("version"))
                .is_some_and(|v| v == version)
        },
    )
    .await
    .unwrap();
}

fn reloads(result: &str) -> String {
    format!(r#"wasmop_plugin_reloads_total{{plugin="reload-probe",result="{result}"}}"#)
}

#[tokio::test(flavor = "multi_thread")]
async fn configmap_update_makes_the_next_reconcile_run_the_new_version() {
    let env = TestEnv::start().await.unwrap();
    let mut host = start_with_configmap(&env, "reload-v1").await;
    touch_input(&env, "a", &[]).await;
    wait_version(&env, "a", "1").await;

    put_plugins(&env, &[(KEY, "reload-v2")]).await;
    host.wait_log("the new version to be swapped in", |l| {
        message(l) == "plugin version swapped" && l["fields"]["version"] == "2"
    })
    .await;
    touch_input(&env, "a", &[]).await;
    wait_version(&env, "a", "2").await;
    assert_eq!(host.metric(&reloads("loaded")).await, 2.0);

    // The same bytes again change nothing.
    put_plugins(
        &env,
        &[(KEY, "reload-v2"), ("notes.txt.wasm.bak", "reload-v1")],
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(host.metric(&reloads("loaded")).await, 2.0);
    assert_eq!(host.metric(&reloads("unchanged")).await, 1.0);
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_version_is_rejected_and_the_last_good_one_keeps_writing() {
    let env = TestEnv::start().await.unwrap();
    let mut host = start_with_configmap(&env, "reload-v1").await;
    touch_input(&env, "a", &[]).await;
    wait_version(&env, "a", "1").await;

    put_plugins(&env, &[(KEY, "other-world")]).await;
    let error = host.wait_rejection("the bad version to be rejected").await;
    assert!(error.contains(KEY), "{error}");
    assert!(error.contains("version 1"), "{error}");
    assert_eq!(host.metric(&reloads("rejected")).await, 1.0);
    // What `wasmop status` reads: the plugin still runs version 1, and says why the new one
    // was refused.
    let (code, body) = host.probe("/status").await;
    assert_eq!(code, 200, "{body}");
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    let plugin = &status["plugins"]["reload-probe"];
    assert_eq!(plugin["version"], "1", "{body}");
    let last_error = plugin["last_error"].as_str().unwrap_or_default();
    assert!(
        last_error.starts_with("new version rejected:") && last_error.contains(KEY),
        "{body}"
    );

    configmaps(&env)
        .delete("a-out", &DeleteParams::default())
        .await
        .unwrap();
    touch_input(&env, "a", &[]).await;
    wait_version(&env, "a", "1").await;

    let rejected = wait_event_reason(&env, "PluginRejected").await;
    assert_eq!(harness::regarding(&rejected), Some(PLUGINS_CONFIGMAP));
    assert_eq!(rejected.type_.as_deref(), Some("Warning"));
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn change_of_kinds_restarts_the_controller() {
    let env = TestEnv::start().await.unwrap();
    let mut host = start_with_configmap(&env, "reload-v1").await;
    touch_input(&env, "a", &[]).await;
    wait_version(&env, "a", "1").await;

    put_plugins(&env, &[(KEY, "reload-kinds")]).await;
    host.wait_log("the controller to be restarted", |l| {
        message(l) == "plugin kinds changed; controller restarted"
    })
    .await;
    let starts = host
        .lines()
        .iter()
        .filter(|l| {
            message(l) == "plugin controller starting" && l["fields"]["plugin"] == "reload-probe"
        })
        .count();
    assert!(starts >= 1);
    host.wait_lines("the new controller to start", |lines| {
        let n = lines
            .iter()
            .filter(|l| message(l) == "plugin controller starting")
            .count();
        (n >= 2).then_some(())
    })
    .await;
    touch_input(&env, "a", &[]).await;
    wait_version(&env, "a", "3").await;
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn plugin_removed_from_its_source_stops() {
    let env = TestEnv::start().await.unwrap();
    let mut host = start_with_configmap(&env, "reload-v1").await;
    touch_input(&env, "a", &[]).await;
    wait_version(&env, "a", "1").await;

    put_plugins(&env, &[]).await;
    host.wait_log("the plugin to stop", |l| {
        message(l) == "plugin removed from its source; controller stopped"
    })
    .await;
    host.wait_log("its controller to end", |l| {
        message(l) == "plugin controller stopped" && l["fields"]["plugin"] == "reload-probe"
    })
    .await;
    assert_eq!(host.metric(&reloads("removed")).await, 1.0);
    touch_input(&env, "b", &[]).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let out = configmaps(&env).get_opt("b-out").await.unwrap();
    assert!(out.is_none(), "a removed plugin reconciled: {out:?}");
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn reconcile_in_flight_during_a_swap_completes_on_the_old_version() {
    let env = TestEnv::start().await.unwrap();
    let mut host = start_with_configmap(&env, "reload-v1").await;
    touch_input(&env, "slow", &[("slowMs", "4000")]).await;
    host.wait_log("the slow reconcile to start", |l| {
        message(l) == "slow reconcile started"
    })
    .await;
    put_plugins(&env, &[(KEY, "reload-v2")]).await;
    host.wait_log("the swap", |l| message(l) == "plugin version swapped")
        .await;
    wait_version(&env, "slow", "1").await;
    let lines = host.lines();
    assert!(
        lines
            .iter()
            .any(|l| message(l) == "version 1 reconciled slow"),
        "the in-flight reconcile finished on version 1; log:\n{}",
        host.log_text()
    );
    assert!(
        !lines.iter().any(|l| message(l).contains("failed")),
        "nothing failed; log:\n{}",
        host.log_text()
    );
    touch_input(&env, "slow", &[]).await;
    wait_version(&env, "slow", "2").await;
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn file_replaced_in_the_plugin_directory_is_swapped_in() {
    let env = TestEnv::start().await.unwrap();
    let mut host = Host::start(&env, &["reload-v1"], &config(&env)).await;
    touch_input(&env, "a", &[]).await;
    wait_version(&env, "a", "1").await;

    // As `kubectl cp` or a CI job would: write aside, then rename over the old file.
    let dir = host.plugin_dir().to_owned();
    tokio::fs::write(dir.join(".reload-v1.wasm.tmp"), guest("reload-v2"))
        .await
        .unwrap();
    tokio::fs::rename(dir.join(".reload-v1.wasm.tmp"), dir.join("reload-v1.wasm"))
        .await
        .unwrap();
    host.wait_log("the new version to be swapped in", |l| {
        message(l) == "plugin version swapped"
    })
    .await;
    touch_input(&env, "a", &[]).await;
    wait_version(&env, "a", "2").await;
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cold_version_serves_at_once_and_its_cranelift_code_takes_over_without_a_reload() {
    let env = TestEnv::start().await.unwrap();
    // No artefact cache: every version is cold, so it loads on Winch code first.
    let mut host = Host::start(&env, &["reload-v1"], &config(&env)).await;
    touch_input(&env, "a", &[]).await;
    wait_version(&env, "a", "1").await;
    let tier_up = |version: &'static str| {
        move |l: &serde_json::Value| {
            message(l).starts_with("plugin now runs on Cranelift code")
                && l["fields"]["plugin"] == "reload-probe"
                && l["fields"]["digest"] == wasmop_core::Digest::of(&guest(version)).short()
        }
    };
    let line = host
        .wait_log(
            "version 1's Cranelift code to take over",
            tier_up("reload-v1"),
        )
        .await;
    assert!(line["fields"]["winch_ms"].is_u64() && line["fields"]["cranelift_ms"].is_u64());

    // A new version, cold too: swapped in (one reload), then tiered up (no reload).
    let dir = host.plugin_dir().to_owned();
    tokio::fs::write(dir.join(".reload-v1.wasm.tmp"), guest("reload-v2"))
        .await
        .unwrap();
    tokio::fs::rename(dir.join(".reload-v1.wasm.tmp"), dir.join("reload-v1.wasm"))
        .await
        .unwrap();
    host.wait_log("the new version to be swapped in", |l| {
        message(l) == "plugin version swapped" && l["fields"]["version"] == "2"
    })
    .await;
    touch_input(&env, "a", &[]).await;
    wait_version(&env, "a", "2").await;
    host.wait_log(
        "version 2's Cranelift code to take over",
        tier_up("reload-v2"),
    )
    .await;
    // The version keeps serving on its new code.
    touch_input(&env, "b", &[]).await;
    wait_version(&env, "b", "2").await;
    assert_eq!(host.metric(&reloads("loaded")).await, 2.0);
    let swaps = host
        .lines()
        .iter()
        .filter(|l| message(l) == "plugin version swapped")
        .count();
    assert_eq!(swaps, 1, "the tier-ups are not reloads");
    host.stop().await;
}

/// Starts the host with `failureThreshold: 2` and `rollback` as given, version 1 serving `a`,
/// then swaps in the trapping version 4 and makes `a` reconcile again.
async fn start_then_break(env: &TestEnv, rollback: bool) -> Host {
    put_plugins(env, &[(KEY, "reload-v1")]).await;
    let source = plugins_configmap_source();
    let config = format!(
        "{}    failureThreshold: 2\n    rollback: {rollback}\n",
        config(env)
    );
    let mut host = Host::start_with_sources(env, &[], &[&source], &config).await;
    touch_input(env, "a", &[]).await;
    wait_version(env, "a", "1").await;
    put_plugins(env, &[(KEY, "reload-trap")]).await;
    host.wait_log("the broken version to be swapped in", |l| {
        message(l) == "plugin version swapped" && l["fields"]["version"] == "4"
    })
    .await;
    configmaps(env)
        .delete("a-out", &DeleteParams::default())
        .await
        .unwrap();
    touch_input(env, "a", &[]).await;
    host
}

/// Waits until an Event with `reason` has been written in the test namespace (the host writes
/// Events in the background, after what it logs), and returns the first such Event.
async fn wait_event_reason(env: &TestEnv, reason: &str) -> Event {
    let is = |e: &Event| e.reason.as_deref() == Some(reason);
    let events =
        harness::wait_events(env, &format!("{reason} Event"), |all| all.iter().any(is)).await;
    events.into_iter().find(is).expect("the Event waited for")
}

#[tokio::test(flavor = "multi_thread")]
async fn version_that_keeps_trapping_is_rolled_back_to_the_previous_one() {
    let env = TestEnv::start().await.unwrap();
    let mut host = start_then_break(&env, true).await;
    host.wait_log("the rollback", |l| {
        message(l) == "plugin version rolled back" && l["fields"]["version"] == "1"
    })
    .await;
    // The object's retry after its backoff runs on version 1 again.
    wait_version(&env, "a", "1").await;
    assert_eq!(host.metric(&reloads("rolled-back")).await, 1.0);
    wait_event_reason(&env, "PluginFailing").await;
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn failing_version_keeps_running_when_rollback_is_off() {
    let env = TestEnv::start().await.unwrap();
    let mut host = start_then_break(&env, false).await;
    let line = host
        .wait_log("the failing version to be reported", |l| {
            message(l).contains("failed 2 reconciles in a row")
        })
        .await;
    assert!(
        message(&line).ends_with("it keeps running (rollback is off)"),
        "{line}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(configmaps(&env).get_opt("a-out").await.unwrap().is_none());
    assert_eq!(host.metric(&reloads("rolled-back")).await, 0.0);
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn earlier_source_wins_a_plugin_name_and_the_later_one_takes_over_when_it_goes() {
    let env = TestEnv::start().await.unwrap();
    put_plugins(&env, &[(KEY, "reload-v2")]).await;
    let source = plugins_configmap_source();
    // The plugin directory is the first source, the ConfigMap the second.
    let mut host = Host::start_with_sources(&env, &["reload-v1"], &[&source], &config(&env)).await;
    let error = host.wait_rejection("the duplicate to be rejected").await;
    assert!(
        error.contains(&format!("`{KEY}` in ConfigMap {}/{PLUGINS_CONFIGMAP} is refused: plugin `reload-probe` already comes from `reload-v1.wasm` in directory", env.namespace())),
        "{error}"
    );
    touch_input(&env, "a", &[]).await;
    wait_version(&env, "a", "1").await;

    tokio::fs::remove_file(host.plugin_dir().join("reload-v1.wasm"))
        .await
        .unwrap();
    host.wait_log("the ConfigMap's version to take over", |l| {
        message(l) == "plugin version swapped" && l["fields"]["version"] == "2"
    })
    .await;
    touch_input(&env, "a", &[]).await;
    wait_version(&env, "a", "2").await;
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn first_of_two_components_with_one_name_in_a_directory_wins_though_they_load_at_once() {
    let env = TestEnv::start().await.unwrap();
    // Both declare `reload-probe`; the host loads them concurrently at start-up, and the first
    // key in the directory's order (`reload-v1.wasm`) must still be the one that runs.
    let mut host = Host::start(&env, &["reload-v2", "reload-v1"], &config(&env)).await;
    let error = host.wait_rejection("the duplicate to be rejected").await;
    assert!(
        error.contains("`reload-v2.wasm` in directory")
            && error
                .contains("is refused: plugin `reload-probe` already comes from `reload-v1.wasm`"),
        "{error}"
    );
    touch_input(&env, "a", &[]).await;
    wait_version(&env, "a", "1").await;
    host.stop().await;
}

/// Writes `guest` into the plugin directory `dir` as `key`, at once (through a rename).
async fn put_file(dir: &std::path::Path, key: &str, guest_name: &str) {
    let tmp = dir.join(format!(".{key}.tmp"));
    tokio::fs::write(&tmp, guest(guest_name)).await.unwrap();
    tokio::fs::rename(&tmp, dir.join(key)).await.unwrap();
}

/// The host config with `describeDeadline` far longer than a healthy plugin's load on a busy
/// machine, so that looping describes are still running when a healthy version settles.
fn slow_describe_config(env: &TestEnv) -> String {
    format!("describeDeadline: 30s\n{}", config(env))
}

fn loading(line: &serde_json::Value, key: &str) -> bool {
    message(line).starts_with("loading a new plugin version") && line["fields"]["key"] == key
}

fn rejected(line: &serde_json::Value, key: impl Fn(&str) -> bool) -> bool {
    message(line) == "plugin version rejected" && line["fields"]["key"].as_str().is_some_and(key)
}

fn swapped_to_v2(line: &serde_json::Value) -> bool {
    message(line) == "plugin version swapped" && line["fields"]["version"] == "2"
}

#[tokio::test(flavor = "multi_thread")]
async fn a_healthy_reload_goes_live_while_looping_describes_of_other_origins_still_run() {
    let env = TestEnv::start().await.unwrap();
    let mut host = Host::start(&env, &["reload-v1"], &slow_describe_config(&env)).await;
    touch_input(&env, "a", &[]).await;
    wait_version(&env, "a", "1").await;
    let dir = host.plugin_dir().to_owned();
    // Three looping describes at keys before the healthy plugin's, all loading before its new
    // version arrives (one update at a time would have kept it behind them).
    let loops = ["a-loop-1.wasm", "a-loop-2.wasm", "a-loop-3.wasm"];
    for key in loops {
        put_file(&dir, key, "describe-loop").await;
    }
    host.wait_lines("the loops to be loading", |lines| {
        loops
            .iter()
            .all(|key| lines.iter().any(|l| loading(l, key)))
            .then_some(())
    })
    .await;
    put_file(&dir, "reload-v1.wasm", "reload-v2").await;
    let lines = host
        .wait_lines("the swap and the loops' rejections", |lines| {
            let rejections = lines
                .iter()
                .filter(|l| rejected(l, |k| k.starts_with("a-loop-")))
                .count();
            (rejections == loops.len()).then(|| lines.to_vec())
        })
        .await;
    let swapped = lines.iter().position(swapped_to_v2);
    let first_rejection = lines
        .iter()
        .position(|l| rejected(l, |k| k.starts_with("a-loop-")));
    assert!(
        swapped.is_some() && swapped < first_rejection,
        "the healthy version went live before any loop ended: swap at {swapped:?}, first rejection at {first_rejection:?}"
    );
    touch_input(&env, "a", &[]).await;
    wait_version(&env, "a", "2").await;
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_version_still_loading_is_dropped_for_a_newer_one_and_never_settles() {
    let env = TestEnv::start().await.unwrap();
    let mut host = Host::start(&env, &["reload-v1"], &slow_describe_config(&env)).await;
    touch_input(&env, "a", &[]).await;
    wait_version(&env, "a", "1").await;
    let dir = host.plugin_dir().to_owned();
    // An older version whose load does not end before its describe deadline...
    put_file(&dir, "reload-v1.wasm", "describe-loop").await;
    host.wait_log("the looping version to be loading", |l| {
        loading(l, "reload-v1.wasm")
    })
    .await;
    // ... a marker that starts loading the same bytes later, so that it is rejected after the
    // older version's deadline would have ended it...
    put_file(&dir, "marker.wasm", "describe-loop").await;
    host.wait_log("the marker to be loading", |l| loading(l, "marker.wasm"))
        .await;
    // ... and the newer version of the same key, which supersedes the older one.
    put_file(&dir, "reload-v1.wasm", "reload-v2").await;
    let lines = host
        .wait_lines("the swap and the marker's rejection", |lines| {
            let marker = lines.iter().any(|l| rejected(l, |k| k == "marker.wasm"));
            let swapped = lines.iter().any(swapped_to_v2);
            (marker && swapped).then(|| lines.to_vec())
        })
        .await;
    let superseded = lines
        .iter()
        .position(|l| loading(l, "reload-v1.wasm") && l["fields"]["superseding"].is_string());
    let swapped = lines.iter().position(swapped_to_v2);
    assert!(
        superseded.is_some() && swapped.is_some() && superseded < swapped,
        "the newer version superseded the older and went live: superseded at {superseded:?}, swap at {swapped:?}"
    );
    assert!(
        !lines.iter().any(|l| rejected(l, |k| k == "reload-v1.wasm")),
        "the older version's load was dropped, never settled"
    );
    touch_input(&env, "a", &[]).await;
    wait_version(&env, "a", "2").await;
    host.stop().await;
}

/// A host that compiles components of at most 1 KiB (`maxCompileBytes`: a small node's
/// overlay sets it so that a big compile cannot get the pod OOM-killed) refuses a plugin it
/// would have to compile, saying why and how to ship it, and runs the same file once `wasmop
/// compile --config` has put its artefact into the host's `precompiledDirectory`.
#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_over_max_compile_bytes_runs_once_its_artefact_is_shipped() {
    let env = TestEnv::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let precompiled = dir.path().join("precompiled");
    let config = format!(
        "{}maxCompileBytes: 1Ki\nprecompiledDirectory: {}\n",
        config(&env),
        precompiled.display()
    );
    let mut host = Host::start(&env, &["reload-v1"], &config).await;
    let error = host.wait_rejection("the plugin to be refused").await;
    assert!(
        error.contains("reload-v1.wasm")
            && error.contains("at most 1024 bytes (`maxCompileBytes`)")
            && error.contains("wasmop compile --config"),
        "{error}"
    );
    // `wasmop status` lists the file: nothing of it runs.
    let (_, body) = host.probe("/status").await;
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    let refused = status["refused"]
        .as_object()
        .and_then(|r| {
            r.iter()
                .find(|(k, _)| k.starts_with("reload-v1.wasm in directory "))
        })
        .unwrap_or_else(|| panic!("no refusal of reload-v1.wasm: {body}"));
    assert!(
        refused.1["error"]
            .as_str()
            .unwrap()
            .contains("`maxCompileBytes`"),
        "{body}"
    );
    host.stop().await;

    // As the operator would: the artefact made with the host's config, shipped beside it.
    let file = dir.path().join("wasmop.yaml");
    std::fs::write(&file, &config).unwrap();
    let made = std::process::Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .arg("compile")
        .arg("--config")
        .arg(&file)
        .arg("--out")
        .arg(&precompiled)
        .arg(wasmop_test_guests::component("reload-v1"))
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let mut host = Host::start(&env, &["reload-v1"], &config).await;
    let loaded = host
        .wait_log("the plugin to load from its artefact", |l| {
            // The runtime's line (the registry's has no `precompiled`).
            message(l) == "plugin loaded"
                && l["fields"]["plugin"] == "reload-probe"
                && l["fields"].get("precompiled").is_some()
        })
        .await;
    assert_eq!(loaded["fields"]["precompiled"], true, "{loaded}");
    touch_input(&env, "a", &[]).await;
    wait_version(&env, "a", "1").await;
    host.stop().await;
}
