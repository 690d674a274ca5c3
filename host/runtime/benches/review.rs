//! Admission review benchmark (prints figures; not a test):
//!
//! ```text
//! cargo bench -p wasmop-runtime --bench review
//! ```
//!
//! What the sandbox costs one admission review: `database-config`'s validating webhook on a
//! Database create, from the AdmissionReview's bytes to the answer's, against the same rules
//! as native Rust over kube's admission types (`bench/native/src/review.rs`, the contender of
//! `bench/run` section 11). Both parse the review with kube-core and write the answer with
//! it; the plugin's path adds what the host does for a review (the request's essentials into
//! the WIT record, the object as JSON text, a fresh instance under the plugin's limits, the
//! verdict checked) and the plugin's own decoding. An admitted and a refused Database are
//! measured, interleaved with the native path, on the tokio runtime the host uses.
//!
//! Then throughput: two tasks (the machine's two cores) reviewing back to back, wasm then
//! native. The last line is the figures as JSON (`json: {...}`), which `bench/run` reads.
//!
//! `WASMOP_BENCH_CALLS` sets the number of measured reviews per case (default 20 000).

#[path = "../../../bench/native/src/review.rs"]
mod native;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use kube_core::DynamicObject;
use kube_core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use serde_json::{Value, json};
use wasmop_core::cluster::{
    Cluster, ClusterError, DeleteParams, Event, GroupVersionKind, Json, ObjectRef, ObjectText,
    Patch,
};
use wasmop_core::plugin::PluginName;
use wasmop_runtime::admission::{Review, ReviewCall, ReviewKind, Verdict};
use wasmop_runtime::{LoadOptions, Plugin, Runtime, RuntimeConfig};

/// A validator makes no host calls; every call here is refused as a bug.
struct NoCluster;

#[async_trait]
impl Cluster for NoCluster {
    async fn get(&self, _: &ObjectRef) -> Result<String, ClusterError> {
        Err(ClusterError::Other("no cluster in this benchmark".into()))
    }
    async fn list(
        &self,
        _: &GroupVersionKind,
        _: Option<&str>,
        _: Option<&str>,
    ) -> Result<Vec<String>, ClusterError> {
        Err(ClusterError::Other("no cluster in this benchmark".into()))
    }
    async fn create(&self, _: ObjectText, _: &PluginName) -> Result<String, ClusterError> {
        Err(ClusterError::Other("no cluster in this benchmark".into()))
    }
    async fn apply(&self, _: ObjectText, _: &PluginName) -> Result<String, ClusterError> {
        Err(ClusterError::Other("no cluster in this benchmark".into()))
    }
    async fn patch(
        &self,
        _: &ObjectRef,
        _: Patch<Json>,
        _: &PluginName,
    ) -> Result<String, ClusterError> {
        Err(ClusterError::Other("no cluster in this benchmark".into()))
    }
    async fn patch_status(
        &self,
        _: &ObjectRef,
        _: Patch<Json>,
        _: &PluginName,
    ) -> Result<String, ClusterError> {
        Err(ClusterError::Other("no cluster in this benchmark".into()))
    }
    async fn delete(
        &self,
        _: &ObjectRef,
        _: &DeleteParams,
        _: &PluginName,
    ) -> Result<(), ClusterError> {
        Err(ClusterError::Other("no cluster in this benchmark".into()))
    }
    async fn emit_event(&self, _: Event, _: &PluginName) -> Result<(), ClusterError> {
        Err(ClusterError::Other("no cluster in this benchmark".into()))
    }
}

/// An AdmissionReview of a Database create, as the API server sends it (about 1.3 KB).
fn review_bytes(host: &str) -> Vec<u8> {
    let object = json!({
        "apiVersion": "demo.wasmop.dev/v1",
        "kind": "Database",
        "metadata": {
            "name": "orders",
            "namespace": "shop",
            "uid": "5e0b3f4c-8a4b-4c0e-9d3e-6f1f3b7c2a10",
            "creationTimestamp": "2026-12-03T10:00:00Z",
            "labels": {"app.kubernetes.io/name": "orders", "app.kubernetes.io/part-of": "shop"},
            "annotations": {"example.com/owner": "team-a"}
        },
        "spec": {"engine": "postgres", "host": host, "port": 5432, "replicas": 2}
    });
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "demo.wasmop.dev", "version": "v1", "kind": "Database"},
            "resource": {"group": "demo.wasmop.dev", "version": "v1", "resource": "databases"},
            "requestKind": {"group": "demo.wasmop.dev", "version": "v1", "kind": "Database"},
            "requestResource": {"group": "demo.wasmop.dev", "version": "v1", "resource": "databases"},
            "name": "orders",
            "namespace": "shop",
            "operation": "CREATE",
            "userInfo": {"username": "admin", "uid": "014fbff9a07c", "groups": ["system:masters", "system:authenticated"]},
            "object": object,
            "oldObject": null,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    }))
    .expect("json")
}

/// The sandboxed path: what the host's webhook server does with a review's bytes.
async fn wasm_answer(plugin: &Plugin, cluster: &Arc<dyn Cluster>, body: &[u8]) -> Vec<u8> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body).expect("review");
    let request: AdmissionRequest<DynamicObject> = review.try_into().expect("request");
    let response = AdmissionResponse::from(&request);
    let review = Review::from_request(request).expect("essentials");
    let report = plugin
        .review(
            cluster.clone(),
            ReviewCall::new(ReviewKind::Validate, review),
        )
        .await;
    let answer = match report.result.expect("the plugin answers") {
        Verdict::Allowed { .. } => response,
        Verdict::Denied {
            message,
            reason,
            code,
            ..
        } => {
            let mut denied = response.deny(message.as_str());
            denied.result.reason = reason;
            denied.result.code = code;
            denied
        }
    };
    serde_json::to_vec(&answer.into_review()).expect("answer")
}

fn allowed(answer: &[u8]) -> bool {
    let v: Value = serde_json::from_slice(answer).expect("answer json");
    v["response"]["allowed"] == true
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
    (d.as_secs_f64() * 1e7).round() / 10.0
}

/// The benchmark: set-up, the two cases interleaved with native, then throughput.
fn main() -> anyhow::Result<()> {
    let calls: usize = std::env::var("WASMOP_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let bytes = std::fs::read(wasmop_test_guests::component("database-config"))?;
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    tokio.block_on(async {
        let runtime = Runtime::new(RuntimeConfig::default().concurrency(16))?;
        let plugin = runtime.load(bytes, LoadOptions::default()).await?;
        let cluster: Arc<dyn Cluster> = Arc::new(NoCluster);
        let mut figures = BTreeMap::new();
        for (case, host, admits) in [
            ("admitted", "orders-db.shop.svc", true),
            ("refused", "Orders DB!", false),
        ] {
            let body = review_bytes(host);
            assert_eq!(allowed(&wasm_answer(&plugin, &cluster, &body).await), admits);
            assert_eq!(allowed(&native::answer(&body).expect("native")), admits);
            for _ in 0..calls / 10 {
                std::hint::black_box(wasm_answer(&plugin, &cluster, &body).await);
                std::hint::black_box(native::answer(&body).expect("native"));
            }
            let (mut wasm, mut native) = (Vec::with_capacity(calls), Vec::with_capacity(calls));
            for _ in 0..calls {
                let t = Instant::now();
                std::hint::black_box(wasm_answer(&plugin, &cluster, &body).await);
                wasm.push(t.elapsed());
                let t = Instant::now();
                std::hint::black_box(native::answer(&body).expect("native"));
                native.push(t.elapsed());
            }
            let (w, n) = (stats(wasm), stats(native));
            let overhead = w.median.saturating_sub(n.median);
            println!(
                "review {case:8} ({} bytes): wasm p50 {:>6.1} µs p99 {:>6.1} µs | native p50 {:>5.1} µs p99 {:>5.1} µs | sandbox overhead p50 {:>6.1} µs",
                body.len(),
                us(w.median),
                us(w.p99),
                us(n.median),
                us(n.p99),
                us(overhead),
            );
            figures.insert(
                case,
                json!({
                    "review_bytes": body.len(),
                    "wasm_p50_us": us(w.median), "wasm_p99_us": us(w.p99),
                    "native_p50_us": us(n.median), "native_p99_us": us(n.p99),
                    "overhead_p50_us": us(overhead),
                }),
            );
        }
        // Throughput: two tasks back to back for a fixed count each.
        let body = Arc::new(review_bytes("orders-db.shop.svc"));
        let per_task = calls;
        let mut throughput = BTreeMap::new();
        for path in ["wasm", "native"] {
            let started = Instant::now();
            let tasks: Vec<_> = (0..2)
                .map(|_| {
                    let (plugin, cluster, body) = (plugin.clone(), cluster.clone(), body.clone());
                    tokio::spawn(async move {
                        for _ in 0..per_task {
                            if path == "wasm" {
                                std::hint::black_box(wasm_answer(&plugin, &cluster, &body).await);
                            } else {
                                std::hint::black_box(native::answer(&body).expect("native"));
                            }
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await?;
            }
            let per_s = (2 * per_task) as f64 / started.elapsed().as_secs_f64();
            println!("throughput, 2 tasks: {path:6} {per_s:>9.0} reviews/s");
            throughput.insert(path, per_s.round());
        }
        println!(
            "json: {}",
            json!({"calls": calls, "cases": figures, "reviews_per_s_2_tasks": throughput})
        );
        anyhow::Ok(())
    })
}
