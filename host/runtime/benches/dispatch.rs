//! Dispatch benchmark (prints figures; not a test):
//!
//! ```text
//! cargo bench -p wasmop-runtime --bench dispatch
//! ```
//!
//! Per-reconcile cost of the `database-config` plugin on a ~2 KB `Database` with two host
//! calls (apply, patch-status) and an Event, on the async path the host uses (multi-threaded tokio,
//! epoch interruption on, a fresh instance per call), against the same logic as a native
//! Rust function talking to the same cluster. Also compile time and cached-load time.
//!
//! The plugin gets the object as JSON text written before the call, as the controller passes
//! it (the native twin gets a `Value` made before the call). A do-nothing guest
//! (`tests/hostile/noop`) on the same path shows the fixed cost of a call (store, instance,
//! call, teardown) apart from the guest's own work; it is also called, interleaved, with the
//! object as a `Value` (the offline harness's path), which the call trims, writes and drops.
//!
//! The same plugin compiled by Winch, wasmtime's baseline compiler, is called interleaved with
//! the Cranelift one: what running on baseline code costs a reconcile.
//!
//! Then the Python and the Go `database-config` (`dispatch/guest.rs`), each interleaved with the
//! Rust plugin and the native twin, when `target/python-plugins/database-config.wasm` and
//! `target/go-plugins/database-config.wasm` are built (skipped with a message saying how
//! otherwise); `WASMOP_BENCH_PYTHON` and `WASMOP_BENCH_GO` name other builds (a relative path
//! from the workspace root).
//!
//! Then the owner-indexed list (`kube.list-owned`) against listing every Job of a namespace
//! and filtering in the guest: 1,000 Jobs, 5 owned by the target (`dispatch/owned.rs`).
//!
//! Set `WASMOP_BENCH_CALLS` to change the number of measured calls (default 20 000), and
//! `WASMOP_BENCH_ONLY=wasm|noop|native|go|python` to run only that path in a loop (for `perf
//! record`; with `WASMOP_PERF_MAP=1` the engine writes `/tmp/perf-<pid>.map`, so that `perf
//! report` names the plugin's own functions).
//!
//! The figures measured on the 2-core development machine, and what the remaining cost is
//! made of (from `perf` profiles of this benchmark), are in the README, section
//! "Performance". The goal of ≤ 5 µs overhead is not met.

#[path = "dispatch/guest.rs"]
mod guest;
#[path = "dispatch/owned.rs"]
mod owned;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, OwnerReference, Time};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use wasmop_core::cluster::{
    Cluster, ClusterError, DeleteParams, Event, EventType, GroupVersionKind, Json, ObjectRef,
    ObjectText, Patch,
};
use wasmop_core::plugin::PluginName;
use wasmop_runtime::{
    Call, Compiler, LoadOptions, Outcome, Request, RequestObject, Runtime, RuntimeConfig,
};

/// A cluster that answers like an API server without doing the work: apply returns the
/// applied object, patch-status returns the stored Database, each as JSON text (an API
/// server's reply is text). Both paths use it, so the difference between them is the cost
/// of the sandbox.
struct EchoCluster {
    /// The stored Database as JSON text.
    database: String,
}

#[async_trait]
impl Cluster for EchoCluster {
    async fn get(&self, _: &ObjectRef) -> Result<String, ClusterError> {
        Ok(self.database.clone())
    }
    async fn list(
        &self,
        _: &GroupVersionKind,
        _: Option<&str>,
        _: Option<&str>,
    ) -> Result<Vec<String>, ClusterError> {
        Ok(Vec::new())
    }
    async fn create(&self, object: ObjectText, _: &PluginName) -> Result<String, ClusterError> {
        Ok(object.json().get().to_owned())
    }
    async fn apply(&self, object: ObjectText, _: &PluginName) -> Result<String, ClusterError> {
        Ok(object.json().get().to_owned())
    }
    async fn patch(
        &self,
        _: &ObjectRef,
        _: Patch<Json>,
        _: &PluginName,
    ) -> Result<String, ClusterError> {
        Ok(self.database.clone())
    }
    async fn patch_status(
        &self,
        _: &ObjectRef,
        _: Patch<Json>,
        _: &PluginName,
    ) -> Result<String, ClusterError> {
        Ok(self.database.clone())
    }
    async fn delete(
        &self,
        _: &ObjectRef,
        _: &DeleteParams,
        _: &PluginName,
    ) -> Result<(), ClusterError> {
        Ok(())
    }
    async fn emit_event(&self, _: Event, _: &PluginName) -> Result<(), ClusterError> {
        Ok(())
    }
}

/// A ~2 KB Database: the spec the plugin reads plus the labels and annotations real
/// objects carry.
fn database() -> Value {
    let mut annotations = serde_json::Map::new();
    for i in 0..24 {
        annotations.insert(
            format!("example.com/annotation-{i}"),
            json!(format!("value {i} padding the object to a realistic size")),
        );
    }
    json!({
        "apiVersion": "demo.wasmop.dev/v1",
        "kind": "Database",
        "metadata": {
            "name": "orders",
            "namespace": "shop",
            "uid": "6f1f2c1e-8d9a-4c55-9a63-2f0b7d3c1a10",
            "generation": 3,
            "resourceVersion": "48213",
            "labels": {"app.kubernetes.io/name": "orders", "app.kubernetes.io/part-of": "shop", "tier": "data"},
            "annotations": annotations,
        },
        "spec": {"engine": "postgres", "host": "orders-db.shop.svc.cluster.local", "port": 5432, "replicas": 3}
    })
}

// The native twin of plugins/rust/database-config: same types, same steps, same host calls.
#[derive(Serialize, Deserialize)]
struct Database {
    metadata: ObjectMeta,
    spec: DatabaseSpec,
    status: Option<DatabaseStatus>,
}

#[derive(Serialize, Deserialize)]
struct DatabaseSpec {
    engine: String,
    host: String,
    port: u16,
    replicas: u32,
}

#[derive(Serialize, Deserialize, Default, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
struct DatabaseStatus {
    #[serde(default)]
    conditions: Vec<Condition>,
    observed_generation: Option<i64>,
}

/// The native twin of `database-config`'s reconcile.
///
/// Long on purpose: it mirrors the plugin's steps one for one (decode, build the ConfigMap,
/// apply, compute the status, patch it, emit the Event), so that the two can be compared line
/// by line; helpers the plugin does not have would make the comparison less direct.
async fn native_reconcile(
    cluster: &dyn Cluster,
    plugin: &PluginName,
    request: &Request,
) -> Result<(), ClusterError> {
    let invalid = |e: serde_json::Error| ClusterError::Invalid(e.to_string());
    let RequestObject::Value(object) = &request.object else {
        return Err(ClusterError::Invalid(
            "the native twin takes a value".into(),
        ));
    };
    let db: Database = serde_json::from_value(object.clone()).map_err(invalid)?;
    let spec = &db.spec;
    let db_name = db.metadata.name.clone().unwrap_or_default();
    let name = format!("{db_name}-config");
    let data = BTreeMap::from([
        ("engine".to_owned(), spec.engine.clone()),
        ("host".to_owned(), spec.host.clone()),
        ("port".to_owned(), spec.port.to_string()),
        ("replicas".to_owned(), spec.replicas.to_string()),
        (
            "url".to_owned(),
            format!("{}://{}:{}", spec.engine, spec.host, spec.port),
        ),
    ]);
    let config_map = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: db.metadata.namespace.clone(),
            owner_references: Some(vec![OwnerReference {
                api_version: "demo.wasmop.dev/v1".into(),
                kind: "Database".into(),
                name: db_name,
                uid: db.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..ConfigMap::default()
    };
    // Written straight to text, as the SDK does (k8s-openapi types write their own apiVersion
    // and kind): a write's body is text on its way to any API server. The twin knows what it
    // built, so it names the target itself; the host reads a plugin's from its text. Like the
    // SDK, which hands back what a write stored undecoded, it never reads the reply.
    let json = serde_json::value::to_raw_value(&config_map).map_err(invalid)?;
    let target = ObjectRef::new(
        GroupVersionKind::gvk("", "v1", "ConfigMap"),
        db.metadata.namespace.clone(),
        name.clone(),
    );
    cluster
        .apply(ObjectText::with_target(target, json), plugin)
        .await?;

    let old = db.status.clone().unwrap_or_default();
    let mut status = DatabaseStatus {
        observed_generation: db.metadata.generation,
        ..old.clone()
    };
    status.conditions = vec![Condition {
        type_: "Ready".into(),
        status: "True".into(),
        reason: "ConfigApplied".into(),
        message: format!("ConfigMap {name} is up to date"),
        observed_generation: db.metadata.generation,
        last_transition_time: Time(k8s_openapi::jiff::Timestamp::now()),
    }];
    if status != old {
        // `{"status": ...}` written straight to text, as the SDK's `update_status` does.
        #[derive(Serialize)]
        struct StatusPatch<'a> {
            status: &'a DatabaseStatus,
        }
        let body = serde_json::value::to_raw_value(&StatusPatch { status: &status });
        let patch = Patch::Merge(body.map_err(invalid)?);
        cluster.patch_status(&request.target, patch, plugin).await?;
        let event = Event {
            regarding: request.target.clone(),
            event_type: EventType::Normal,
            reason: "ConfigApplied".into(),
            action: "Apply".into(),
            note: format!("ConfigMap {name} is up to date"),
        };
        cluster.emit_event(event, plugin).await?;
    }
    Ok(())
}

struct Stats {
    median: Duration,
    p99: Duration,
}

fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q) as usize];
    Stats {
        median: at(0.5),
        p99: at(0.99),
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The benchmark.
///
/// Long on purpose: a benchmark's procedure is one linear script of set-up, measurements and
/// the lines it prints, in the order they are printed; split into pieces it would have to pass
/// its handful of shared locals (runtime, cluster, samples) around and be read out of order.
fn main() -> anyhow::Result<()> {
    let calls: usize = std::env::var("WASMOP_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let warmup = calls / 10;
    let path = wasmop_test_guests::component("database-config");
    let bytes = std::fs::read(path)?;
    let cache = tempfile::tempdir()?;
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;

    tokio.block_on(async {
        // WASMOP_PERF_MAP=1: /tmp/perf-<pid>.map names the plugins' functions for `perf`.
        let perf_map = std::env::var("WASMOP_PERF_MAP").is_ok_and(|v| v == "1" || v == "true");
        let config = || {
            RuntimeConfig::default()
                .concurrency(16)
                .cache_dir(cache.path())
                .perf_map(perf_map)
        };
        let runtime = Runtime::new(config())?;
        let started = Instant::now();
        let compiled = runtime.load(bytes.clone(), LoadOptions::default()).await?;
        let compile_load = started.elapsed();
        let runtime = Runtime::new(config())?;
        let started = Instant::now();
        let plugin = runtime.load(bytes.clone(), LoadOptions::default()).await?;
        let cached_load = started.elapsed();
        assert!(
            plugin.load_stats().from_cache,
            "second load comes from the cache"
        );
        // The same plugin compiled by Winch, the baseline compiler, with the same settings.
        let winch_runtime = Runtime::new(config().compiler(Compiler::Winch))?;
        let winch = winch_runtime
            .load(bytes.clone(), LoadOptions::default())
            .await?;
        anyhow::ensure!(
            !winch.load_stats().from_cache,
            "the Winch engine takes no Cranelift artefact"
        );

        let object = database();
        let object_bytes = object.to_string().len();
        let cluster: Arc<dyn Cluster> = Arc::new(EchoCluster {
            database: wasmop_core::cluster::json_text(&object),
        });
        let request = Request::for_object(object)?;
        // The plugin gets the object as the controller passes it: JSON text of the cached
        // (already trimmed) object, written before the call, as the native twin's `Value` is.
        let RequestObject::Value(value) = &request.object else {
            anyhow::bail!("for_object makes a value");
        };
        let text_request = Request {
            target: request.target.clone(),
            object: RequestObject::Text(serde_json::to_string(value)?),
        };
        let name = plugin.name().clone();

        let first = plugin.call(cluster.clone(), Call::reconcile(text_request.clone())).await.outcome;
        anyhow::ensure!(
            first == Outcome::Action(wasmop_runtime::Action::Done),
            "database-config failed: {first}"
        );
        native_reconcile(cluster.as_ref(), &name, &request).await?;
        let first = winch.call(cluster.clone(), Call::reconcile(text_request.clone())).await.outcome;
        anyhow::ensure!(
            first == Outcome::Action(wasmop_runtime::Action::Done),
            "database-config on Winch failed: {first}"
        );

        // One path alone in a loop, for a profiler (`perf record`) to see only it.
        if let Ok(only) = std::env::var("WASMOP_BENCH_ONLY") {
            let noop = runtime
                .load(
                    std::fs::read(wasmop_test_guests::component("noop"))?,
                    LoadOptions::default(),
                )
                .await?;
            // The Go or the Python plugin, when that is the path asked for.
            let foreign = match only.as_str() {
                "go" | "python" => {
                    let lang = if only == "go" { guest::GO } else { guest::PYTHON };
                    let bytes = std::fs::read(guest::component(lang))?;
                    Some(runtime.load(bytes, LoadOptions::default()).await?)
                }
                _ => None,
            };
            let started = Instant::now();
            for _ in 0..calls {
                let r = text_request.clone();
                match only.as_str() {
                    "go" | "python" => {
                        let plugin = foreign.as_ref().expect("loaded above");
                        let outcome = plugin.call(cluster.clone(), Call::reconcile(r)).await.outcome;
                        anyhow::ensure!(outcome.is_success(), "{only}: {outcome}");
                    }
                    "wasm" => anyhow::ensure!(plugin.call(cluster.clone(), Call::reconcile(r)).await.outcome.is_success()),
                    "noop" => anyhow::ensure!(noop.call(cluster.clone(), Call::reconcile(r)).await.outcome.is_success()),
                    "native" => native_reconcile(cluster.as_ref(), &name, &request).await?,
                    other => anyhow::bail!(
                        "WASMOP_BENCH_ONLY is `{other}`; it takes `wasm`, `noop`, `native`, `go` or `python`"
                    ),
                }
            }
            println!(
                "{only}: {:.2} µs per call (mean of {calls})",
                us(started.elapsed()) / calls as f64
            );
            return Ok(());
        }
        let mut wasm = Vec::with_capacity(calls);
        let mut wasm_winch = Vec::with_capacity(calls);
        let mut native = Vec::with_capacity(calls);
        // Interleave the three so machine noise hits them alike.
        for i in 0..(warmup + calls) {
            let r = text_request.clone();
            let t = Instant::now();
            let outcome = plugin.call(cluster.clone(), Call::reconcile(r)).await.outcome;
            let w = t.elapsed();
            anyhow::ensure!(outcome.is_success(), "{outcome}");
            let r = text_request.clone();
            let t = Instant::now();
            let outcome = winch.call(cluster.clone(), Call::reconcile(r)).await.outcome;
            let ww = t.elapsed();
            anyhow::ensure!(outcome.is_success(), "{outcome}");
            let t = Instant::now();
            native_reconcile(cluster.as_ref(), &name, &request).await?;
            let n = t.elapsed();
            if i >= warmup {
                wasm.push(w);
                wasm_winch.push(ww);
                native.push(n);
            }
        }
        let noop = runtime
            .load(
                std::fs::read(wasmop_test_guests::component("noop"))?,
                LoadOptions::default(),
            )
            .await?;
        // The fixed cost, with the object as text (the controller's path) and interleaved with
        // it as a `Value` (the offline harness's path, and the controller's before it passed
        // text), which the call must trim, write out and drop.
        let mut fixed = Vec::with_capacity(calls);
        let mut fixed_value = Vec::with_capacity(calls);
        for i in 0..(warmup + calls) {
            let r = text_request.clone();
            let t = Instant::now();
            let outcome = noop.call(cluster.clone(), Call::reconcile(r)).await.outcome;
            let d = t.elapsed();
            anyhow::ensure!(outcome.is_success(), "{outcome}");
            let r = request.clone();
            let t = Instant::now();
            let outcome = noop.call(cluster.clone(), Call::reconcile(r)).await.outcome;
            let dv = t.elapsed();
            anyhow::ensure!(outcome.is_success(), "{outcome}");
            if i >= warmup {
                fixed.push(d);
                fixed_value.push(dv);
            }
        }
        let (w, n, f) = (stats(wasm), stats(native), stats(fixed));
        let ww = stats(wasm_winch);
        let fv = stats(fixed_value);
        println!(
            "database-config dispatch benchmark: {calls} calls each after {warmup} warm-up calls"
        );
        println!("  engine:            {}", runtime.allocator());
        println!(
            "  object:            {object_bytes} bytes of JSON, 3 host calls (apply, patch-status, event)"
        );
        println!("  component:         {} bytes", bytes.len());
        println!(
            "  compile:           {:.1} ms (load incl. describe: {:.1} ms)",
            compiled.load_stats().compile_time.as_secs_f64() * 1e3,
            compile_load.as_secs_f64() * 1e3
        );
        println!(
            "  cached load:       {:.2} ms (load incl. describe: {:.2} ms)",
            plugin.load_stats().compile_time.as_secs_f64() * 1e3,
            cached_load.as_secs_f64() * 1e3
        );
        println!(
            "  native reconcile:  median {:7.2} µs   p99 {:7.2} µs",
            us(n.median),
            us(n.p99)
        );
        println!(
            "  wasm reconcile:    median {:7.2} µs   p99 {:7.2} µs",
            us(w.median),
            us(w.p99)
        );
        println!(
            "  winch compile:     {:.1} ms",
            winch.load_stats().compile_time.as_secs_f64() * 1e3
        );
        println!(
            "  wasm on winch:     median {:7.2} µs   p99 {:7.2} µs   ratio winch/cranelift {:.2}x",
            us(ww.median),
            us(ww.p99),
            us(ww.median) / us(w.median)
        );
        println!(
            "  noop guest call:   median {:7.2} µs   p99 {:7.2} µs  (fixed cost of a call)",
            us(f.median),
            us(f.p99)
        );
        println!(
            "  noop, as a Value:  median {:7.2} µs   p99 {:7.2} µs  (object passed as a Value)",
            us(fv.median),
            us(fv.p99)
        );
        println!(
            "  overhead (median): {:7.2} µs   ratio wasm/native {:.2}x",
            us(w.median) - us(n.median),
            us(w.median) / us(n.median)
        );
        let rust = guest::Rust {
            plugin: &plugin,
            cluster: cluster.clone(),
            text_request: &text_request,
            value_request: &request,
        };
        // A Python call costs milliseconds, not microseconds: a twentieth as many calls; a
        // Go call tens to hundreds of microseconds: a fifth.
        for (lang, share) in [(guest::PYTHON, 20), (guest::GO, 5)] {
            let cache = tempfile::tempdir()?;
            guest::run(
                lang,
                RuntimeConfig::default()
                    .concurrency(16)
                    .cache_dir(cache.path()),
                &rust,
                (calls / share).max(50),
            )
            .await?;
        }
        // Each call of the listing way decodes 1,000 Jobs: a twentieth as many calls.
        owned::run((calls / 20).max(100)).await
    })
}
