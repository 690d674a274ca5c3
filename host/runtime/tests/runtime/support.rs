//! What every runtime test shares: the runtime and limits they run under, loading guests,
//! target objects and the in-memory cluster seeded with them, a healthy call checked for its
//! writes, and a cluster that answers slowly.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use wasmop_core::cluster::{
    Cluster, ClusterError, DeleteParams, Event, GroupVersionKind, Json, ObjectRef, ObjectText,
    Patch,
};
use wasmop_core::plugin::PluginName;
use wasmop_offline::memory::{MemoryCluster, Write};
use wasmop_runtime::{
    Action, Call, Limits, LoadOptions, Outcome, Plugin, Request, Runtime, RuntimeConfig,
};

/// A short deadline keeps the infinite-loop test quick; nothing asserts on durations.
pub(crate) fn test_limits() -> Limits {
    Limits {
        deadline: Duration::from_secs(3),
        ..Limits::default()
    }
}

pub(crate) fn runtime() -> Runtime {
    Runtime::new(
        RuntimeConfig::default()
            .concurrency(16)
            .limits(test_limits()),
    )
    .expect("runtime starts")
}

pub(crate) async fn load(rt: &Runtime, guest: &str) -> Plugin {
    rt.load_file(wasmop_test_guests::component(guest), LoadOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{guest} loads: {:#}", anyhow::Error::from(e)))
}

pub(crate) async fn load_err(rt: &Runtime, bytes: Vec<u8>) -> String {
    match rt.load(bytes, LoadOptions::default()).await {
        Ok(p) => panic!("loaded {:?} but expected a refusal", p.name()),
        Err(e) => format!("{:#}", anyhow::Error::from(e)),
    }
}

pub(crate) fn target(name: &str, value: &str) -> Value {
    json!({
        "apiVersion": "wasmop.test/v1", "kind": "Target",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"value": value}
    })
}

pub(crate) fn seeded(objects: Vec<Value>) -> Arc<MemoryCluster> {
    let c = Arc::new(MemoryCluster::new());
    c.seed(objects).expect("seed");
    c
}

pub(crate) fn request(object: Value) -> Request {
    Request::for_object(object).expect("identifiable")
}

pub(crate) fn mirror_ref(name: &str) -> ObjectRef {
    ObjectRef::new(
        GroupVersionKind::gvk("", "v1", "ConfigMap"),
        Some("default".into()),
        format!("{name}-mirror"),
    )
}

/// One healthy call of `well-behaved`, checked for the writes it must make.
pub(crate) async fn healthy_call(plugin: &Plugin, name: &str, value: &str) {
    let object = target(name, value);
    let cluster = seeded(vec![object.clone()]);
    let outcome = plugin
        .call(cluster.clone(), Call::reconcile(request(object)))
        .await
        .outcome;
    assert_eq!(outcome, Outcome::Action(Action::Done), "{outcome}");
    let mirror = cluster.object(&mirror_ref(name)).expect("mirror applied");
    assert_eq!(mirror["data"]["value"], value);
    let writes = cluster.writes();
    assert_eq!(writes.len(), 3, "{writes:?}");
    assert!(matches!(&writes[2], Write::Event { reason, .. } if reason == "Mirrored"));
}

pub(crate) fn database(name: &str, port: u16) -> Value {
    json!({
        "apiVersion": "demo.wasmop.dev/v1", "kind": "Database",
        "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}"), "generation": 1},
        "spec": {"engine": "postgres", "host": "db.shop.svc", "port": port, "replicas": 2}
    })
}

/// One call of the example plugin `database-config`, checked for its ConfigMap and status.
pub(crate) async fn database_config_call(plugin: &Plugin, name: &str, port: u16) {
    let object = database(name, port);
    let cluster = seeded(vec![object.clone()]);
    let outcome = plugin
        .call(cluster.clone(), Call::reconcile(request(object.clone())))
        .await
        .outcome;
    assert_eq!(outcome, Outcome::Action(Action::Done), "{outcome}");
    let config_map = ObjectRef::new(
        GroupVersionKind::gvk("", "v1", "ConfigMap"),
        Some("shop".into()),
        format!("{name}-config"),
    );
    let config_map = cluster.object(&config_map).expect("ConfigMap applied");
    assert_eq!(
        config_map["data"]["url"],
        format!("postgres://db.shop.svc:{port}")
    );
    let stored = cluster
        .object(&ObjectRef::of(&object).expect("ref"))
        .expect("database");
    assert_eq!(stored["status"]["observedGeneration"], 1, "{stored}");
}

pub(crate) fn bytes_of(guest: &str) -> Vec<u8> {
    std::fs::read(wasmop_test_guests::component(guest)).expect("guest built")
}

/// The in-memory cluster, but every read waits this long first, as over a network (and so
/// that instances stay alive across an await and many exist at once).
pub(crate) struct Sluggish(pub(crate) Arc<MemoryCluster>, pub(crate) Duration);

#[async_trait]
impl Cluster for Sluggish {
    async fn get(&self, target: &ObjectRef) -> Result<String, ClusterError> {
        tokio::time::sleep(self.1).await;
        self.0.get(target).await
    }
    async fn list(
        &self,
        kind: &GroupVersionKind,
        ns: Option<&str>,
        sel: Option<&str>,
    ) -> Result<Vec<String>, ClusterError> {
        self.0.list(kind, ns, sel).await
    }
    async fn create(
        &self,
        object: ObjectText,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        self.0.create(object, plugin).await
    }
    async fn apply(&self, object: ObjectText, plugin: &PluginName) -> Result<String, ClusterError> {
        self.0.apply(object, plugin).await
    }
    async fn patch(
        &self,
        target: &ObjectRef,
        patch: Patch<Json>,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        self.0.patch(target, patch, plugin).await
    }
    async fn patch_status(
        &self,
        target: &ObjectRef,
        patch: Patch<Json>,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        self.0.patch_status(target, patch, plugin).await
    }
    async fn delete(
        &self,
        target: &ObjectRef,
        params: &DeleteParams,
        plugin: &PluginName,
    ) -> Result<(), ClusterError> {
        self.0.delete(target, params, plugin).await
    }
    async fn emit_event(&self, event: Event, plugin: &PluginName) -> Result<(), ClusterError> {
        self.0.emit_event(event, plugin).await
    }
}

pub(crate) fn tiered_runtime(limits: Limits) -> Runtime {
    Runtime::new(
        RuntimeConfig::default()
            .concurrency(16)
            .limits(limits)
            .tiered(true),
    )
    .expect("a tiered runtime starts")
}

/// Tests that measure how the low-priority lane behaves (its threads run at `SCHED_IDLE`, so
/// they get CPU only when nothing else in the process wants it) run alone: every other test
/// of this binary holds [`shared`] while it runs, a demotion test holds [`alone`], so no
/// compile or spinning guest of a neighbouring test starves the lane and changes what the
/// test observes. Outcomes are asserted as before; only the neighbours are kept away.
static LANE_TESTS: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// Held by every test that does not measure the lane (see [`LANE_TESTS`]).
pub async fn shared() -> tokio::sync::RwLockReadGuard<'static, ()> {
    LANE_TESTS.read().await
}

/// Held by a test that measures the lane: no other test of this binary runs meanwhile.
pub async fn alone() -> tokio::sync::RwLockWriteGuard<'static, ()> {
    LANE_TESTS.write().await
}
