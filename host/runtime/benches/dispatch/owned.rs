//! The owner-indexed list (`kube.list-owned`) against listing and filtering in the guest: a
//! namespace of 1,000 Jobs (each a realistic ~1.5 KB object with its PodSpec), 5 of them owned
//! by the reconciled object. `tests/sdk/job-owner` finds them both ways and checks it found 5.
//!
//! The cluster here answers `list` with every Job's text and `list-owned` from a prebuilt
//! owner index, as `wasmop run`'s cache does (`Store::owned_by`: the owned objects' pointers,
//! nothing else read); so the figures are the host-to-guest transfer plus the guest's decoding
//! and filtering, which is what the owner index saves.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Value, json};
use wasmop_core::cluster::{
    Cluster, ClusterError, DeleteParams, Event, GroupVersionKind, Json, ObjectRef, ObjectText,
    Patch,
};
use wasmop_core::plugin::PluginName;
use wasmop_runtime::{Call, LoadOptions, Outcome, Request, Runtime, RuntimeConfig};

use super::{stats, us};

const JOBS: usize = 1000;
const OWNED: usize = 5;
const OWNER_UID: &str = "0b6c1a57-3f2e-4c1d-9a8b-7e6f5d4c3b2a";

/// Jobs by text, and the owner index over them.
struct Jobs {
    all: Vec<String>,
    owned: HashMap<String, Vec<String>>,
}

fn job(i: usize) -> Value {
    let owner = if i.is_multiple_of(JOBS / OWNED) {
        OWNER_UID.to_owned()
    } else {
        format!("1c2d3e4f-0000-4000-8000-{i:012}")
    };
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {
            "name": format!("nightly-{i:04}"), "namespace": "batch",
            "uid": format!("9a8b7c6d-0000-4000-8000-{i:012}"), "resourceVersion": format!("{}", 10_000 + i),
            "labels": {"app": "nightly", "controller-uid": owner},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly",
                                 "uid": owner, "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": {
            "backoffLimit": 6, "completions": 1, "parallelism": 1,
            "template": {
                "metadata": {"labels": {"app": "nightly", "job-name": format!("nightly-{i:04}")}},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "containers": [{
                        "name": "report", "image": "registry.example.com/reports/nightly:1.42.0",
                        "args": ["--since", "24h", "--format", "parquet", "--out", "/data/out"],
                        "env": [{"name": "TZ", "value": "UTC"}, {"name": "LOG_LEVEL", "value": "info"},
                                {"name": "BUCKET", "value": "reports-archive"}],
                        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"},
                                      "limits": {"cpu": "1", "memory": "1Gi"}},
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}]
                    }],
                    "volumes": [{"name": "data", "emptyDir": {}}]
                }
            }
        },
        "status": {"succeeded": 1, "startTime": "2026-11-30T02:00:00Z",
                   "completionTime": "2026-11-30T02:03:12Z"}
    })
}

fn jobs() -> Jobs {
    let mut owned: HashMap<String, Vec<String>> = HashMap::new();
    let all = (0..JOBS)
        .map(|i| {
            let job = job(i);
            let text = wasmop_core::cluster::json_text(&job);
            let owner = job["metadata"]["ownerReferences"][0]["uid"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            owned.entry(owner).or_default().push(text.clone());
            text
        })
        .collect();
    Jobs { all, owned }
}

fn unused<T>() -> Result<T, ClusterError> {
    Err(ClusterError::Other("not part of this benchmark".into()))
}

#[async_trait]
impl Cluster for Jobs {
    async fn get(&self, _: &ObjectRef) -> Result<String, ClusterError> {
        unused()
    }
    async fn list(
        &self,
        _: &GroupVersionKind,
        _: Option<&str>,
        _: Option<&str>,
    ) -> Result<Vec<String>, ClusterError> {
        Ok(self.all.clone())
    }
    async fn list_owned(
        &self,
        _: &GroupVersionKind,
        _: Option<&str>,
        owner_uid: &str,
    ) -> Result<Vec<String>, ClusterError> {
        Ok(self.owned.get(owner_uid).cloned().unwrap_or_default())
    }
    async fn create(&self, _: ObjectText, _: &PluginName) -> Result<String, ClusterError> {
        unused()
    }
    async fn apply(&self, _: ObjectText, _: &PluginName) -> Result<String, ClusterError> {
        unused()
    }
    async fn patch(
        &self,
        _: &ObjectRef,
        _: Patch<Json>,
        _: &PluginName,
    ) -> Result<String, ClusterError> {
        unused()
    }
    async fn patch_status(
        &self,
        _: &ObjectRef,
        _: Patch<Json>,
        _: &PluginName,
    ) -> Result<String, ClusterError> {
        unused()
    }
    async fn delete(
        &self,
        _: &ObjectRef,
        _: &DeleteParams,
        _: &PluginName,
    ) -> Result<(), ClusterError> {
        unused()
    }
    async fn emit_event(&self, _: Event, _: &PluginName) -> Result<(), ClusterError> {
        unused()
    }
}

/// Measures both ways, interleaved, `calls` times each, and prints the figures.
pub(crate) async fn run(calls: usize) -> anyhow::Result<()> {
    let path = wasmop_test_guests::component("job-owner");
    let runtime = Runtime::new(RuntimeConfig::default().concurrency(4))?;
    let load = |mode: &str| {
        let options = LoadOptions {
            config: json!({"mode": mode, "expect": OWNED}),
            ..LoadOptions::default()
        };
        runtime.load_file(path, options)
    };
    let listing = load("list").await?;
    let owned = load("owned").await?;
    let cluster: Arc<dyn Cluster> = Arc::new(jobs());
    let owner = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "nightly", "namespace": "batch", "uid": OWNER_UID, "resourceVersion": "7"}
    });
    let request = Request::for_object(owner)?;
    let mut samples = [Vec::with_capacity(calls), Vec::with_capacity(calls)];
    let warmup = (calls / 10).max(1);
    for i in 0..warmup + calls {
        for (k, plugin) in [&listing, &owned].into_iter().enumerate() {
            let started = Instant::now();
            let outcome = plugin
                .call(cluster.clone(), Call::reconcile(request.clone()))
                .await
                .outcome;
            let took = started.elapsed();
            anyhow::ensure!(
                outcome == Outcome::Action(wasmop_runtime::Action::Done),
                "job-owner ({}) failed: {outcome}",
                ["list", "owned"][k]
            );
            if i >= warmup {
                samples[k].push(took);
            }
        }
    }
    let [listed, indexed] = samples.map(stats);
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    println!();
    println!(
        "owner-indexed list: {JOBS} Jobs in the namespace, {OWNED} owned by the target; {calls} calls each, interleaved"
    );
    println!(
        "  list + filter in the guest:  median {:>9.1} µs   p99 {:>9.1} µs",
        us(listed.median),
        us(listed.p99)
    );
    println!(
        "  list-owned (owner index):    median {:>9.1} µs   p99 {:>9.1} µs",
        us(indexed.median),
        us(indexed.p99)
    );
    println!(
        "  list-owned is {:.1}x faster (median), {:.1}x (p99)",
        ratio(listed.median, indexed.median),
        ratio(listed.p99, indexed.p99)
    );
    Ok(())
}
