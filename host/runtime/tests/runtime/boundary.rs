//! The trust boundary, with real hostile components and the in-memory cluster behind a
//! recorder of every call that reaches it: identifiers built to change a request are refused
//! by the host before any call leaves it, and implied grants never cover a sensitive kind or a
//! write to a cluster-scoped object. (The same guests run against the real API server, with
//! the deploy RBAC and with a broad one, in `host/tests/e2e/boundary.rs`.)

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{Value, json};
use wasmop_core::cluster::{
    Cluster, ClusterError, DeleteParams, Event, GroupVersionKind, Json, ObjectRef, ObjectText,
    Patch,
};
use wasmop_core::plugin::{Permission, PluginName, Verb};
use wasmop_core::policy::Policy;
use wasmop_offline::memory::MemoryCluster;
use wasmop_runtime::{Action, Call, LoadOptions, Outcome, Plugin, Request, Runtime, RuntimeConfig};

/// Every call that reached the cluster, as `verb kind namespace/name`, then the in-memory
/// cluster's answer.
struct Recorder {
    inner: MemoryCluster,
    calls: Mutex<Vec<String>>,
}

impl Recorder {
    fn seeded(objects: Vec<Value>) -> Arc<Self> {
        let inner = MemoryCluster::new();
        inner.seed(objects).expect("seed");
        Arc::new(Self {
            inner,
            calls: Mutex::default(),
        })
    }

    fn note(&self, verb: &str, what: impl std::fmt::Display) {
        self.calls
            .lock()
            .expect("recorder")
            .push(format!("{verb} {what}"));
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().expect("recorder").clone()
    }
}

#[async_trait]
impl Cluster for Recorder {
    async fn get(&self, target: &ObjectRef) -> Result<String, ClusterError> {
        self.note("get", target);
        self.inner.get(target).await
    }
    async fn list(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        selector: Option<&str>,
    ) -> Result<Vec<String>, ClusterError> {
        self.note(
            "list",
            format!("{}/{} in {namespace:?}", kind.group, kind.kind),
        );
        self.inner.list(kind, namespace, selector).await
    }
    async fn create(
        &self,
        object: ObjectText,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        self.note("create", object.target());
        self.inner.create(object, plugin).await
    }
    async fn apply(&self, object: ObjectText, plugin: &PluginName) -> Result<String, ClusterError> {
        self.note("apply", object.target());
        self.inner.apply(object, plugin).await
    }
    async fn patch(
        &self,
        target: &ObjectRef,
        patch: Patch<Json>,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        self.note("patch", target);
        self.inner.patch(target, patch, plugin).await
    }
    async fn patch_status(
        &self,
        target: &ObjectRef,
        patch: Patch<Json>,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        self.note("patch-status", target);
        self.inner.patch_status(target, patch, plugin).await
    }
    async fn delete(
        &self,
        target: &ObjectRef,
        params: &DeleteParams,
        plugin: &PluginName,
    ) -> Result<(), ClusterError> {
        self.note("delete", target);
        self.inner.delete(target, params, plugin).await
    }
    async fn emit_event(&self, event: Event, plugin: &PluginName) -> Result<(), ClusterError> {
        self.note("emit-event", &event.regarding);
        self.inner.emit_event(event, plugin).await
    }
}

fn runtime() -> Runtime {
    Runtime::new(RuntimeConfig::default().concurrency(4)).expect("runtime starts")
}

async fn load(rt: &Runtime, guest: &str, policy: Policy) -> Plugin {
    let options = LoadOptions {
        policy,
        ..LoadOptions::default()
    };
    rt.load_file(wasmop_test_guests::component(guest), options)
        .await
        .unwrap_or_else(|e| panic!("{guest} loads: {:#}", anyhow::Error::from(e)))
}

fn target(name: &str) -> Value {
    json!({
        "apiVersion": "wasmop.test/v1", "kind": "Target",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"value": "1"}
    })
}

/// Runs one reconcile of `guest` on a recorder seeded with its Target (and a ConfigMap named
/// `victim` that no plugin made); returns the outcome, the calls that reached the cluster and
/// the Target's status as the plugin reported it.
async fn attack(guest: &str, policy: Policy) -> (Outcome, Vec<String>, Value, Arc<Recorder>) {
    let rt = runtime();
    let plugin = load(&rt, guest, policy).await;
    let victim = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "victim", "namespace": "default"}, "data": {"k": "v"}
    });
    let cluster = Recorder::seeded(vec![target("t"), victim]);
    let request = Request::for_object(target("t")).expect("request");
    let outcome = plugin
        .call(cluster.clone(), Call::reconcile(request))
        .await
        .outcome;
    let status = cluster
        .inner
        .objects()
        .into_iter()
        .find(|o| o["kind"] == "Target")
        .map(|o| o["status"].clone())
        .unwrap_or(Value::Null);
    (outcome, cluster.calls(), status, cluster)
}

#[tokio::test]
async fn identifiers_built_to_change_a_request_are_refused_before_any_call_leaves_the_host() {
    let _shared = crate::support::shared().await;
    let (outcome, calls, status, cluster) = attack("unsafe-names", Policy::default()).await;
    let report = status["attacks"].as_str().unwrap_or_default().to_owned();
    assert_eq!(
        report.split(' ').count(),
        22,
        "every attack reported: {report}"
    );
    for entry in report.split(' ') {
        assert!(
            entry.ends_with("=invalid"),
            "{entry}: refused by the host, naming the field ({report})"
        );
    }
    assert!(
        matches!(outcome, Outcome::Action(Action::Done)),
        "{outcome}"
    );
    // The only call that reached the cluster is the valid status patch the plugin ended with.
    assert_eq!(calls, ["patch-status wasmop.test/v1 Target default/t"]);
    let victim = cluster
        .inner
        .objects()
        .into_iter()
        .find(|o| o["metadata"]["name"] == "victim")
        .expect("the ConfigMap no plugin made is still there");
    assert_eq!(victim["data"], json!({"k": "v"}), "and unchanged");
}

#[tokio::test]
async fn an_owned_sensitive_kind_implies_nothing_and_no_secret_call_leaves_the_host() {
    let _shared = crate::support::shared().await;
    let (outcome, calls, status, _) = attack("owns-secret", Policy::default()).await;
    assert_eq!(
        status["secrets"],
        "list-all=denied list-kube-system=denied get=denied"
    );
    assert!(matches!(outcome, Outcome::Denied(_)), "{outcome}");
    assert!(
        outcome
            .to_string()
            .contains("on core/Secret is not granted"),
        "{outcome}"
    );
    assert_eq!(calls, ["patch-status wasmop.test/v1 Target default/t"]);

    // With an explicit grant of `get` (as the operator's `grants` give it), exactly that.
    let policy = Policy {
        explicit: vec![Permission {
            group: String::new(),
            kind: "Secret".into(),
            verbs: [Verb::Get].into(),
            namespaces: vec![],
        }],
        ..Policy::default()
    };
    let (_, calls, status, _) = attack("owns-secret", policy).await;
    assert_eq!(
        status["secrets"],
        "list-all=denied list-kube-system=denied get=not-found"
    );
    assert_eq!(
        calls,
        [
            "get v1 Secret default/credentials",
            "patch-status wasmop.test/v1 Target default/t"
        ]
    );
}

#[tokio::test]
async fn implied_grants_cover_neither_rbac_nor_writes_to_cluster_scoped_objects() {
    let _shared = crate::support::shared().await;
    // The operator granted `get` on ClusterRoleBinding (so a host would load it), nothing else.
    let policy = Policy {
        explicit: vec![Permission {
            group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRoleBinding".into(),
            verbs: [Verb::Get].into(),
            namespaces: vec![],
        }],
        ..Policy::default()
    };
    let (outcome, calls, status, _) = attack("owns-cluster-kinds", policy).await;
    assert_eq!(
        status["cluster"],
        "binding-create=denied binding-apply=denied priority-apply=denied"
    );
    assert!(matches!(outcome, Outcome::Denied(_)), "{outcome}");
    assert_eq!(calls, ["patch-status wasmop.test/v1 Target default/t"]);
}
