//! `wasmop_host_calls_total{plugin,verb,outcome}`: the [`Cluster`] a plugin's host calls
//! reach, wrapped to count each call by verb and outcome (`ok`, or the `kube-error` case the
//! plugin receives). Calls the plugin's grants refuse never get here: the runtime refuses them
//! first, and they are counted by `wasmop_host_calls_denied_total`.

use std::sync::Arc;

use async_trait::async_trait;

use crate::metrics::Metrics;
use wasmop_core::cluster::{
    Cluster, ClusterError, DeleteParams, Event, GroupVersionKind, Json, ObjectRef, ObjectText,
    Patch,
};
use wasmop_core::plugin::PluginName;
use wasmop_core::plugin::text::PluginText;

/// A [`Cluster`] that counts the calls of one plugin.
pub(crate) struct Counted {
    inner: Arc<dyn Cluster>,
    metrics: Metrics,
    plugin: String,
}

impl Counted {
    /// Counts the calls `plugin` makes through `inner`.
    pub(crate) fn new(inner: Arc<dyn Cluster>, metrics: Metrics, plugin: &str) -> Self {
        Self {
            inner,
            metrics,
            plugin: plugin.to_owned(),
        }
    }

    fn count<T>(&self, verb: &str, result: Result<T, ClusterError>) -> Result<T, ClusterError> {
        self.metrics
            .host_call(&self.plugin, verb, outcome(result.as_ref().err()));
        result
    }

    /// [`Self::count`] for a write, which is also logged at debug level (target
    /// `wasmop_controller::writes`: what `wasmop dev` shows as it happens).
    fn wrote<T>(
        &self,
        verb: &str,
        target: &ObjectRef,
        result: Result<T, ClusterError>,
    ) -> Result<T, ClusterError> {
        let outcome = outcome(result.as_ref().err());
        let object = PluginText::new(&target.to_string());
        tracing::debug!(
            target: "wasmop_controller::writes",
            plugin = %self.plugin,
            outcome,
            "{verb} {object}"
        );
        self.count(verb, result)
    }
}

/// The bounded outcome label of a call.
fn outcome(error: Option<&ClusterError>) -> &'static str {
    match error {
        None => "ok",
        Some(ClusterError::NotFound(_)) => "not-found",
        Some(ClusterError::Conflict(_)) => "conflict",
        Some(ClusterError::AlreadyExists(_)) => "already-exists",
        Some(ClusterError::Forbidden(_)) => "forbidden",
        Some(ClusterError::Denied(_)) => "denied",
        Some(ClusterError::Invalid(_)) => "invalid",
        Some(ClusterError::Unavailable(_)) => "unavailable",
        Some(ClusterError::Other(_)) => "other",
    }
}

#[async_trait]
impl Cluster for Counted {
    async fn get(&self, target: &ObjectRef) -> Result<String, ClusterError> {
        self.count("get", self.inner.get(target).await)
    }

    async fn list(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<String>, ClusterError> {
        let result = self.inner.list(kind, namespace, label_selector).await;
        self.count("list", result)
    }

    async fn list_owned(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        owner_uid: &str,
    ) -> Result<Vec<String>, ClusterError> {
        let result = self.inner.list_owned(kind, namespace, owner_uid).await;
        self.count("list-owned", result)
    }

    async fn create(
        &self,
        object: ObjectText,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        let target = object.target().clone();
        self.wrote("create", &target, self.inner.create(object, plugin).await)
    }

    async fn apply(&self, object: ObjectText, plugin: &PluginName) -> Result<String, ClusterError> {
        let target = object.target().clone();
        self.wrote("apply", &target, self.inner.apply(object, plugin).await)
    }

    async fn patch(
        &self,
        target: &ObjectRef,
        patch: Patch<Json>,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        self.wrote(
            "patch",
            target,
            self.inner.patch(target, patch, plugin).await,
        )
    }

    async fn patch_status(
        &self,
        target: &ObjectRef,
        patch: Patch<Json>,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        let result = self.inner.patch_status(target, patch, plugin).await;
        self.wrote("patch-status", target, result)
    }

    async fn delete(
        &self,
        target: &ObjectRef,
        params: &DeleteParams,
        plugin: &PluginName,
    ) -> Result<(), ClusterError> {
        self.wrote(
            "delete",
            target,
            self.inner.delete(target, params, plugin).await,
        )
    }

    async fn emit_event(&self, event: Event, plugin: &PluginName) -> Result<(), ClusterError> {
        self.count("event", self.inner.emit_event(event, plugin).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use wasmop_offline::memory::MemoryCluster;

    #[tokio::test]
    async fn calls_are_counted_by_verb_and_outcome() {
        let metrics = Metrics::new();
        let inner: Arc<dyn Cluster> = Arc::new(MemoryCluster::new());
        let cluster = Counted::new(inner, metrics.clone(), "p");
        let plugin = PluginName::new("p").expect("name");
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "a", "namespace": "ns"}});
        cluster
            .create(ObjectText::from_value(&cm).expect("object"), &plugin)
            .await
            .expect("created");
        cluster
            .create(ObjectText::from_value(&cm).expect("object"), &plugin)
            .await
            .expect_err("exists");
        let target = ObjectRef::of(&cm).expect("ref");
        cluster.get(&target).await.expect("found");
        let text = metrics.render();
        for line in [
            r#"wasmop_host_calls_total{plugin="p",verb="create",outcome="ok"} 1"#,
            r#"wasmop_host_calls_total{plugin="p",verb="create",outcome="already-exists"} 1"#,
            r#"wasmop_host_calls_total{plugin="p",verb="get",outcome="ok"} 1"#,
        ] {
            assert!(text.contains(line), "missing {line} in:\n{text}");
        }
    }
}
