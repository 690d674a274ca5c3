//! Tiered loading: a version serves on Winch code until its Cranelift code takes over, late
//! Cranelift code of a replaced version is discarded, and hostile guests keep their outcomes
//! on Winch code.

use std::sync::Arc;

use async_trait::async_trait;
use wasmop_core::cluster::{
    Cluster, ClusterError, DeleteParams, Event, GroupVersionKind, Json, ObjectRef, ObjectText,
    Patch,
};
use wasmop_core::plugin::PluginName;
use wasmop_offline::memory::MemoryCluster;
use wasmop_runtime::{
    Budget, Call, Compiler, Limits, LoadOptions, Outcome, Runtime, RuntimeConfig, TieringStats,
};

use crate::hostile::{expect_hostile, start_hostile};
use crate::support::{
    database_config_call, healthy_call, load, request, seeded, target, test_limits, tiered_runtime,
};

/// A cluster that holds every call at a gate until it opens, telling when the first one
/// arrives: a call held there is in flight.
struct Gated {
    inner: Arc<MemoryCluster>,
    open: tokio::sync::watch::Receiver<bool>,
    entered: Arc<tokio::sync::Notify>,
}

impl Gated {
    async fn pass(&self) {
        self.entered.notify_one();
        let mut open = self.open.clone();
        open.wait_for(|o| *o)
            .await
            .expect("the gate's sender lives");
    }
}

#[async_trait]
impl Cluster for Gated {
    async fn get(&self, target: &ObjectRef) -> Result<String, ClusterError> {
        self.pass().await;
        self.inner.get(target).await
    }
    async fn list(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        selector: Option<&str>,
    ) -> Result<Vec<String>, ClusterError> {
        self.pass().await;
        self.inner.list(kind, namespace, selector).await
    }
    async fn create(
        &self,
        object: ObjectText,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        self.pass().await;
        self.inner.create(object, plugin).await
    }
    async fn apply(&self, object: ObjectText, plugin: &PluginName) -> Result<String, ClusterError> {
        self.pass().await;
        self.inner.apply(object, plugin).await
    }
    async fn patch(
        &self,
        target: &ObjectRef,
        patch: Patch<Json>,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        self.pass().await;
        self.inner.patch(target, patch, plugin).await
    }
    async fn patch_status(
        &self,
        target: &ObjectRef,
        patch: Patch<Json>,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        self.pass().await;
        self.inner.patch_status(target, patch, plugin).await
    }
    async fn delete(
        &self,
        target: &ObjectRef,
        params: &DeleteParams,
        plugin: &PluginName,
    ) -> Result<(), ClusterError> {
        self.pass().await;
        self.inner.delete(target, params, plugin).await
    }
    async fn emit_event(&self, event: Event, plugin: &PluginName) -> Result<(), ClusterError> {
        self.pass().await;
        self.inner.emit_event(event, plugin).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiered_load_serves_on_winch_code_until_cranelift_code_of_the_same_digest_takes_over() {
    let _shared = crate::support::shared().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = RuntimeConfig::default()
        .concurrency(4)
        .limits(test_limits())
        .cache_dir(dir.path())
        .tiered(true);
    let rt = Runtime::new(config.clone()).expect("runtime");
    let plugin = load(&rt, "well-behaved").await;
    assert_eq!(plugin.load_stats().compiler, Compiler::Winch);
    assert!(!plugin.load_stats().from_cache);
    // The host's copy with the plugin's settings shares the code of the load.
    let configured = plugin
        .with_options(LoadOptions::default())
        .expect("same options");

    // A call in flight on the Winch code, held in its first host call.
    let object = target("in-flight", "1");
    let (open, gate) = tokio::sync::watch::channel(false);
    let entered = Arc::new(tokio::sync::Notify::new());
    let cluster = Arc::new(Gated {
        inner: seeded(vec![object.clone()]),
        open: gate,
        entered: Arc::clone(&entered),
    });
    let running = plugin.clone();
    let in_flight = tokio::spawn(async move {
        running
            .call(cluster, Call::reconcile(request(object)))
            .await
    });
    entered.notified().await;
    assert_eq!(
        rt.tiering().promoted,
        0,
        "the call took its code before Cranelift's was ready"
    );

    rt.tiering_settled().await;
    assert_eq!(
        rt.tiering(),
        TieringStats {
            pending: 0,
            promoted: 1,
            discarded: 0,
            failed: 0
        }
    );
    assert_eq!(plugin.compiler(), Compiler::Cranelift);
    assert_eq!(configured.compiler(), Compiler::Cranelift);
    assert_eq!(plugin.digest(), configured.digest(), "the same version");

    // The call in flight finishes on the code it started with.
    open.send(true).expect("the call waits at the gate");
    let report = in_flight.await.expect("the call's task");
    let (compiler, outcome) = (report.compiler(), report.outcome);
    assert!(outcome.is_success(), "{outcome}");
    assert_eq!(compiler, Compiler::Winch);
    // The next calls run on Cranelift code, and do the same work.
    let object = target("next", "2");
    let cluster = seeded(vec![object.clone()]);
    let report = configured
        .call(cluster, Call::reconcile(request(object)))
        .await;
    let (compiler, outcome) = (report.compiler(), report.outcome);
    assert!(outcome.is_success(), "{outcome}");
    assert_eq!(compiler, Compiler::Cranelift);
    healthy_call(&configured, "after", "3").await;

    // The background compilation wrote the artefact: the next load of these bytes takes it,
    // with no tiering.
    let restarted = Runtime::new(config).expect("runtime");
    let cached = load(&restarted, "well-behaved").await;
    assert!(cached.load_stats().from_cache);
    assert_eq!(cached.load_stats().compiler, Compiler::Cranelift);
    assert_eq!(cached.compiler(), Compiler::Cranelift);
    assert_eq!(restarted.tiering(), TieringStats::default());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_versions_late_cranelift_code_is_discarded() {
    let _shared = crate::support::shared().await;
    let rt = tiered_runtime(test_limits());
    let old = load(&rt, "well-behaved").await;
    assert_eq!(old.compiler(), Compiler::Winch);
    let old_digest = old.digest();
    // Replaced (and not kept) before its Cranelift compilation could end.
    drop(old);
    let new = load(&rt, "noop").await;
    assert_ne!(new.digest(), old_digest);
    rt.tiering_settled().await;
    assert_eq!(
        rt.tiering(),
        TieringStats {
            pending: 0,
            promoted: 1,
            discarded: 1,
            failed: 0
        }
    );
    // The new version got its own Cranelift code, and works.
    assert_eq!(new.compiler(), Compiler::Cranelift);
    let object = target("new", "1");
    let report = new
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object)),
        )
        .await;
    let (compiler, outcome) = (report.compiler(), report.outcome);
    assert!(outcome.is_success(), "{outcome}");
    assert_eq!(compiler, Compiler::Cranelift);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_plugins_end_in_their_typed_outcomes_on_the_winch_code_of_a_tiered_load() {
    let _shared = crate::support::shared().await;
    let rt = tiered_runtime(test_limits());
    // The largest guest first: its background compilation keeps the hostile ones' queued
    // behind it while their calls start on Winch code.
    let example = load(&rt, "database-config").await;
    let hostile = start_hostile(&rt).await;
    expect_hostile(hostile, Some(Compiler::Winch), "tiered load").await;
    rt.tiering_settled().await;
    database_config_call(&example, "tiered", 5432).await;
    assert_eq!(example.compiler(), Compiler::Cranelift);

    // Fuel on Winch code.
    let limits = Limits {
        fuel: Some(50_000_000),
        ..test_limits()
    };
    let metered = tiered_runtime(limits);
    let object = target("spin", "1");
    let report = load(&metered, "infinite-loop")
        .await
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object)),
        )
        .await;
    let (compiler, outcome) = (report.compiler(), report.outcome);
    assert_eq!(compiler, Compiler::Winch);
    assert_eq!(
        outcome,
        Outcome::Timeout(Budget::Fuel(50_000_000)),
        "{outcome}"
    );
}
