//! Hot-reload benchmark (prints figures; not a test):
//!
//! ```text
//! cargo bench -p wasmop --bench reload
//! ```
//!
//! Runs the real `wasmop` binary against the test control plane (as `host/tests/e2e*.rs` do)
//! and measures, from the change (a file renamed into the plugin directory, or the plugin
//! ConfigMap updated through the API):
//! - **live**: until the host logs that the new version serves (`plugin version swapped`, or
//!   `plugin kinds changed; controller restarted`): debounce, read, compile or cached load,
//!   `describe`, checks and the swap. Host timestamps, no API propagation.
//! - **first reconcile**: until the first plugin log line of a reconcile by the new version
//!   (its span carries the new digest). For a swap, the input object is changed every 20 ms
//!   meanwhile, as on a busy cluster, so this includes up to 20 ms of waiting for a trigger
//!   and the watch's propagation of that trigger.
//! - **end to end** (ConfigMap source): until the object the new version writes is seen
//!   through the API.
//! - **Cranelift took over** (cold, tiered): until the host logs that the version's Cranelift
//!   code, compiled in the background, replaced its Winch code. Each cold round waits for it
//!   before the next, so no background compilation overlaps a measured change.
//!
//! Scenarios: (a) cold compile (no artefact cache; each version made unique by a custom
//! section), with tiered compilation (the default: Winch first), for `reload-probe` (~90 KB,
//! written against the WIT directly), the same plugin written with the SDK
//! (`tests/hostile/reload-sdk`, ~450 KB) and `configmap-mirror` (~500 KB, live only); the same
//! first two with `tieredCompilation: false` (Cranelift only), the baseline; (b) a
//! version whose precompiled artefact is cached; (c) a change of kinds (controller restart).
//! `WASMOP_BENCH_ROUNDS` sets the rounds per scenario (default 6). Debug builds of the guests
//! are used (the `wasm` profile the tests use).
//!
//! Measured on the 2-core development machine (2026-11-30 00:11 UTC, load average 8-9 from
//! other builds), medians: (a) cold, tiered: 89 KB live 56.9 ms, first reconcile 80.3 ms,
//! Cranelift took over at 194.9 ms; 450 KB live 136.5 ms, first reconcile 154.1 ms, Cranelift
//! at 660.2 ms; 502 KB live 73.6 ms, Cranelift at 428.9 ms; cold, Cranelift only: 89 KB live
//! 74.7 ms, first reconcile 86.8 ms; 450 KB live 394.9 ms, first reconcile 413.2 ms. The
//! cached cases of a second run (00:16 UTC, heavier load) are in the README's table.
//! The README ("Reload latency") says where the cold time goes.

#![allow(clippy::unwrap_used, missing_docs)]

#[path = "../tests/harness/mod.rs"]
mod harness;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use harness::{Host, message};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::Value;
use wasmop_core::Digest;
use wasmop_testenv::TestEnv;

const PLUGINS: &str = "wasmop-plugins";

fn guest(name: &str) -> Vec<u8> {
    std::fs::read(wasmop_test_guests::component(name)).unwrap()
}

/// `bytes` with a custom section `wasmop-bench` holding `salt` appended: the same code under
/// a new digest, so the host must compile it again.
fn salted(bytes: &[u8], salt: u64) -> Vec<u8> {
    wasmop_test_guests::with_custom_section(bytes, "wasmop-bench", &salt.to_le_bytes())
}

/// Seconds since midnight UTC, now.
fn now_of_day() -> f64 {
    let t = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    (t.as_secs() % 86_400) as f64 + f64::from(t.subsec_nanos()) / 1e9
}

/// Seconds since midnight UTC of a log line's RFC 3339 timestamp.
fn line_time(line: &Value) -> f64 {
    let ts = line["timestamp"].as_str().unwrap_or_default();
    let time = ts
        .split('T')
        .nth(1)
        .unwrap_or_default()
        .trim_end_matches('Z');
    let mut parts = time.split(':');
    let h: f64 = parts.next().unwrap_or("0").parse().unwrap_or(0.0);
    let m: f64 = parts.next().unwrap_or("0").parse().unwrap_or(0.0);
    let s: f64 = parts.next().unwrap_or("0").parse().unwrap_or(0.0);
    h * 3600.0 + m * 60.0 + s
}

fn config(env: &TestEnv, cache: Option<&Path>, tiered: bool) -> String {
    let mut text = format!(
        "resyncPeriod: 0s\nplugins:\n  reload-probe:\n    namespaces: [{ns}]\n  configmap-mirror:\n    namespaces: [{ns}]\n    grants: [{{kind: ConfigMap, verbs: [delete]}}]\n",
        ns = env.namespace()
    );
    if let Some(dir) = cache {
        text.push_str(&format!("cacheDirectory: {}\n", dir.display()));
    }
    text.push_str(&format!("tieredCompilation: {tiered}\n"));
    text
}

/// Changes the input every 20 ms until `stop` is set, so that a new version has a reconcile
/// to run soon after it is live.
fn touch_inputs(env: &TestEnv) -> tokio::sync::oneshot::Sender<()> {
    let (stop, mut stopped) = tokio::sync::oneshot::channel();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    tokio::spawn(async move {
        let mut n = 0u64;
        loop {
            n += 1;
            let cm = serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "a", "labels": {"wasmop.test/reload": "input"}},
                "data": {"n": n.to_string()},
            });
            let _ = api
                .patch("a", &PatchParams::apply("bench").force(), &Patch::Apply(cm))
                .await;
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(20)) => {}
                _ = &mut stopped => return,
            }
        }
    });
    stop
}

/// When the host logs that the Cranelift code of `digest` replaced its Winch code, in ms
/// after `t0`.
async fn tiered_up(host: &mut Host, t0: f64, digest: &str) -> f64 {
    let line = host
        .wait_log("the Cranelift code to take over", |l| {
            message(l).starts_with("plugin now runs on Cranelift code")
                && l["fields"]["digest"] == digest
                && line_time(l) >= t0
        })
        .await;
    (line_time(&line) - t0) * 1e3
}

/// One measured change: (live, first reconcile) in ms after `t0`.
async fn measure(host: &mut Host, t0: f64, digest: &str, first: bool) -> (f64, Option<f64>) {
    let live_line = host
        .wait_log("the new version to be live", |l| {
            (message(l) == "plugin version swapped"
                || message(l) == "plugin kinds changed; controller restarted")
                && l["fields"]["digest"] == digest
                && line_time(l) >= t0
        })
        .await;
    let live = (line_time(&live_line) - t0) * 1e3;
    if !first {
        return (live, None);
    }
    let reconciled = host
        .wait_log("a reconcile by the new version", |l| {
            l["span"]["plugin.digest"] == digest
                && message(l).starts_with("version ")
                && line_time(l) >= t0
        })
        .await;
    (live, Some((line_time(&reconciled) - t0) * 1e3))
}

async fn write_plugin(dir: &Path, file: &str, bytes: &[u8]) -> f64 {
    let tmp = dir.join(format!(".{file}.tmp"));
    tokio::fs::write(&tmp, bytes).await.unwrap();
    let t0 = now_of_day();
    tokio::fs::rename(&tmp, dir.join(file)).await.unwrap();
    t0
}

fn summary(label: &str, values: &[f64]) {
    if values.is_empty() {
        return;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let median = v[v.len() / 2];
    println!(
        "  {label:<44} median {median:>8.1} ms   min {:>8.1} ms   max {:>8.1} ms   (n={})",
        v[0],
        v[v.len() - 1],
        v.len()
    );
}

/// What a series of rounds measured, in ms: live, first reconcile, Cranelift took over.
type Rounds = (Vec<f64>, Vec<f64>, Vec<f64>);

/// Directory-source rounds alternating between `versions`, each salted when `cold`; when
/// `tiered`, each round also waits for the Cranelift code to take over.
async fn directory_rounds(
    host: &mut Host,
    file: &str,
    versions: &[Vec<u8>],
    rounds: usize,
    cold: bool,
    first: bool,
    tiered: bool,
) -> Rounds {
    let dir = host.plugin_dir().to_owned();
    let (mut live, mut firsts, mut tiers) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let base = &versions[(round + 1) % versions.len()];
        let bytes = if cold {
            salted(base, fastrand::u64(..))
        } else {
            base.clone()
        };
        let digest = Digest::of(&bytes).short();
        let t0 = write_plugin(&dir, file, &bytes).await;
        let (l, f) = measure(host, t0, &digest, first).await;
        live.push(l);
        firsts.extend(f);
        if tiered {
            tiers.push(tiered_up(host, t0, &digest).await);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    (live, firsts, tiers)
}

async fn put_configmap(env: &TestEnv, bytes: &[u8]) -> f64 {
    let api: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(PLUGINS.into());
    cm.binary_data = Some(BTreeMap::from([(
        "reload-probe.wasm".to_owned(),
        ByteString(bytes.to_vec()),
    )]));
    let t0 = now_of_day();
    match api.get_opt(PLUGINS).await.unwrap() {
        None => {
            api.create(&PostParams::default(), &cm).await.unwrap();
        }
        Some(old) => {
            cm.metadata.resource_version = old.metadata.resource_version;
            api.replace(PLUGINS, &PostParams::default(), &cm)
                .await
                .unwrap();
        }
    }
    t0
}

/// The benchmark.
///
/// Long on purpose: a benchmark's procedure is one linear script of set-up, measurements and
/// the lines it prints, in the order they are printed; split into pieces it would have to pass
/// its handful of shared locals (runtime, cluster, samples) around and be read out of order.
async fn run() {
    let rounds: usize = std::env::var("WASMOP_BENCH_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(6);
    let env = TestEnv::start().await.unwrap();
    let v1 = guest("reload-v1");
    let v2 = guest("reload-v2");
    let kinds = guest("reload-kinds");
    let mirror = guest("configmap-mirror");
    let sdk = guest("reload-sdk");
    println!("hot reload, {rounds} rounds per scenario (times from the change)");

    // (a) cold compile: no artefact cache, tiered (Winch first).
    let mut host = Host::start(&env, &[], &config(&env, None, true)).await;
    let stop = touch_inputs(&env);
    let dir = host.plugin_dir().to_owned();
    let t0 = write_plugin(&dir, "reload-probe.wasm", &v1).await;
    measure_start(&mut host, t0).await;
    // The start's own background compilation must not overlap the first round.
    tiered_up(&mut host, t0, &Digest::of(&v1).short()).await;
    let (live, first, tier) = directory_rounds(
        &mut host,
        "reload-probe.wasm",
        &[v1.clone(), v2.clone()],
        rounds,
        true,
        true,
        true,
    )
    .await;
    println!("(a) cold compile, directory source, tiered (Winch, then Cranelift)");
    summary(
        &format!("reload-probe ({} KB): live", v1.len() / 1000),
        &live,
    );
    summary("reload-probe: first reconcile", &first);
    summary("reload-probe: Cranelift took over", &tier);
    // The same plugin written with the SDK, as plugin authors write them.
    let (live, first, tier) = directory_rounds(
        &mut host,
        "reload-probe.wasm",
        std::slice::from_ref(&sdk),
        rounds,
        true,
        true,
        true,
    )
    .await;
    summary(
        &format!("reload-sdk ({} KB): live", sdk.len() / 1000),
        &live,
    );
    summary("reload-sdk: first reconcile", &first);
    summary("reload-sdk: Cranelift took over", &tier);
    let t0 = write_plugin(&dir, "configmap-mirror.wasm", &mirror).await;
    host.wait_log("configmap-mirror to load", |l| {
        message(l) == "plugin controller starting" && l["fields"]["plugin"] == "configmap-mirror"
    })
    .await;
    tiered_up(&mut host, t0, &Digest::of(&mirror).short()).await;
    let (live, _, tier) = directory_rounds(
        &mut host,
        "configmap-mirror.wasm",
        std::slice::from_ref(&mirror),
        rounds,
        true,
        false,
        true,
    )
    .await;
    summary(
        &format!("configmap-mirror ({} KB): live", mirror.len() / 1000),
        &live,
    );
    summary("configmap-mirror: Cranelift took over", &tier);
    let _ = stop.send(());
    host.stop().await;

    // (a) again without tiering: Cranelift compiles every version before it runs.
    let mut host = Host::start(&env, &[], &config(&env, None, false)).await;
    let stop = touch_inputs(&env);
    let t0 = write_plugin(&dir_of(&host), "reload-probe.wasm", &v1).await;
    measure_start(&mut host, t0).await;
    let (live, first, _) = directory_rounds(
        &mut host,
        "reload-probe.wasm",
        &[v1.clone(), v2.clone()],
        rounds,
        true,
        true,
        false,
    )
    .await;
    println!("(a) cold compile, directory source, tieredCompilation: false (Cranelift only)");
    summary(
        &format!("reload-probe ({} KB): live", v1.len() / 1000),
        &live,
    );
    summary("reload-probe: first reconcile", &first);
    let (live, first, _) = directory_rounds(
        &mut host,
        "reload-probe.wasm",
        std::slice::from_ref(&sdk),
        rounds,
        true,
        true,
        false,
    )
    .await;
    summary(
        &format!("reload-sdk ({} KB): live", sdk.len() / 1000),
        &live,
    );
    summary("reload-sdk: first reconcile", &first);
    let _ = stop.send(());
    host.stop().await;

    // (b) cached artefacts and (c) a change of kinds.
    let cache = tempfile::tempdir().unwrap();
    let mut host = Host::start(&env, &[], &config(&env, Some(cache.path()), true)).await;
    let stop = touch_inputs(&env);
    let dir = host.plugin_dir().to_owned();
    let t0 = write_plugin(&dir, "reload-probe.wasm", &v1).await;
    measure_start(&mut host, t0).await;
    // Warm the cache with every version once: the background Cranelift compilations of their
    // first (tiered) loads write it.
    tiered_up(&mut host, t0, &Digest::of(&v1).short()).await;
    directory_rounds(
        &mut host,
        "reload-probe.wasm",
        std::slice::from_ref(&v2),
        1,
        false,
        false,
        true,
    )
    .await;
    // And version 1 back in place (from the cache now), as the rounds below expect.
    directory_rounds(
        &mut host,
        "reload-probe.wasm",
        std::slice::from_ref(&v1),
        1,
        false,
        false,
        false,
    )
    .await;
    let (live, first, _) = directory_rounds(
        &mut host,
        "reload-probe.wasm",
        &[v1.clone(), v2.clone()],
        rounds,
        false,
        true,
        false,
    )
    .await;
    println!("(b) cached artefact, directory source");
    summary("reload-probe: live", &live);
    summary("reload-probe: first reconcile", &first);
    let _ = stop.send(());
    let (live, first, _) = directory_rounds(
        &mut host,
        "reload-probe.wasm",
        &[v1.clone(), kinds.clone()],
        rounds,
        false,
        true,
        false,
    )
    .await;
    println!("(c) change of kinds (controller restart), cached, directory source");
    summary("reload-probe: live (restarted)", &live);
    summary("reload-probe: first reconcile (initial list)", &first);
    host.stop().await;

    // End to end through the API: ConfigMap source, cached.
    let source = format!("{{configMap: {{name: {PLUGINS}}}}}");
    let t0 = put_configmap(&env, &v1).await;
    let mut host = Host::start_with_sources(
        &env,
        &[],
        &[&source],
        &config(&env, Some(cache.path()), true),
    )
    .await;
    measure_start(&mut host, t0).await;
    let stop = touch_inputs(&env);
    let outputs: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    let (mut live, mut first, mut end) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let (bytes, version) = if round % 2 == 0 {
            (&v2, "2")
        } else {
            (&v1, "1")
        };
        let digest = Digest::of(bytes).short();
        let t0 = put_configmap(&env, bytes).await;
        loop {
            let out = outputs.get_opt("a-out").await.unwrap();
            let seen = out
                .and_then(|c| c.data)
                .and_then(|d| d.get("version").cloned());
            if seen.as_deref() == Some(version) {
                end.push((now_of_day() - t0) * 1e3);
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let (l, f) = measure(&mut host, t0, &digest, true).await;
        live.push(l);
        first.extend(f);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let _ = stop.send(());
    println!("(b) cached artefact, ConfigMap source through the API");
    summary("reload-probe: live", &live);
    summary("reload-probe: first reconcile", &first);
    summary("reload-probe: end to end (output seen via API)", &end);
    host.stop().await;
}

fn dir_of(host: &Host) -> std::path::PathBuf {
    host.plugin_dir().to_owned()
}

/// Waits for the first version to be loaded (not measured).
async fn measure_start(host: &mut Host, _t0: f64) {
    host.wait_log("the first version to load", |l| {
        message(l) == "plugin loaded" && l["fields"]["plugin"] == "reload-probe"
    })
    .await;
}

fn main() {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(run());
}
