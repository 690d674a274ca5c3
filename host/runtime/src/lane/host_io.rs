//! The cluster of a demoted call: every operation runs as a task on the host's runtime and
//! the guest (on the lane) waits for its result. kube's hyper client spawns a connection's
//! task on whichever runtime polls the request that opens it; were that a nice-19 lane
//! thread, a pooled connection every healthy plugin shares would be driven at the lowest
//! priority.

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use tokio::runtime::Handle;

use super::Abort;
use wasmop_core::cluster::{
    Cluster, ClusterError, DeleteParams, Event, GroupVersionKind, Json, ObjectRef, ObjectText,
    Patch,
};
use wasmop_core::plugin::PluginName;

/// A [`Cluster`] whose operations run on the host's runtime.
pub(crate) struct OnHost {
    inner: Arc<dyn Cluster>,
    host: Handle,
}

impl OnHost {
    /// `inner`, its operations run on `host`.
    pub(crate) fn wrap(inner: Arc<dyn Cluster>, host: Handle) -> Arc<dyn Cluster> {
        Arc::new(Self { inner, host })
    }

    /// Runs `op` on the host's runtime; dropping the wait (the call ended) aborts it, as
    /// dropping the operation in place would. Once the host's runtime is shutting down, the
    /// operation is `unavailable` to the guest.
    async fn on_host<T, F>(&self, op: impl FnOnce(Arc<dyn Cluster>) -> F) -> Result<T, ClusterError>
    where
        F: Future<Output = Result<T, ClusterError>> + Send + 'static,
        T: Send + 'static,
    {
        let task = Abort::spawn(&self.host, op(Arc::clone(&self.inner)));
        task.join().await.unwrap_or_else(|| {
            Err(ClusterError::Unavailable(
                "the host is shutting down".to_owned(),
            ))
        })
    }
}

#[async_trait]
impl Cluster for OnHost {
    async fn get(&self, target: &ObjectRef) -> Result<String, ClusterError> {
        let target = target.clone();
        self.on_host(|c| async move { c.get(&target).await }).await
    }

    async fn list(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<String>, ClusterError> {
        let kind = kind.clone();
        let namespace = namespace.map(str::to_owned);
        let selector = label_selector.map(str::to_owned);
        self.on_host(|c| async move {
            c.list(&kind, namespace.as_deref(), selector.as_deref())
                .await
        })
        .await
    }

    async fn list_owned(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        owner_uid: &str,
    ) -> Result<Vec<String>, ClusterError> {
        let kind = kind.clone();
        let namespace = namespace.map(str::to_owned);
        let owner_uid = owner_uid.to_owned();
        self.on_host(|c| async move { c.list_owned(&kind, namespace.as_deref(), &owner_uid).await })
            .await
    }

    async fn create(
        &self,
        object: ObjectText,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        let plugin = plugin.clone();
        self.on_host(|c| async move { c.create(object, &plugin).await })
            .await
    }

    async fn apply(&self, object: ObjectText, plugin: &PluginName) -> Result<String, ClusterError> {
        let plugin = plugin.clone();
        self.on_host(|c| async move { c.apply(object, &plugin).await })
            .await
    }

    async fn patch(
        &self,
        target: &ObjectRef,
        patch: Patch<Json>,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        let (target, plugin) = (target.clone(), plugin.clone());
        self.on_host(|c| async move { c.patch(&target, patch, &plugin).await })
            .await
    }

    async fn patch_status(
        &self,
        target: &ObjectRef,
        patch: Patch<Json>,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        let (target, plugin) = (target.clone(), plugin.clone());
        self.on_host(|c| async move { c.patch_status(&target, patch, &plugin).await })
            .await
    }

    async fn delete(
        &self,
        target: &ObjectRef,
        params: &DeleteParams,
        plugin: &PluginName,
    ) -> Result<(), ClusterError> {
        let (target, params, plugin) = (target.clone(), params.clone(), plugin.clone());
        self.on_host(|c| async move { c.delete(&target, &params, &plugin).await })
            .await
    }

    async fn emit_event(&self, event: Event, plugin: &PluginName) -> Result<(), ClusterError> {
        let plugin = plugin.clone();
        self.on_host(|c| async move { c.emit_event(event, &plugin).await })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_run_on_the_host_runtime() {
        let host = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("host-worker")
            .build()
            .expect("host runtime");
        let lane = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("lane runtime");

        /// Records the thread each read ran on; holds no objects (this test needs none, and
        /// the in-memory cluster lives in `wasmop-offline`, which depends on this crate).
        struct Where(std::sync::Mutex<Vec<String>>);
        fn unused<T>() -> Result<T, ClusterError> {
            Err(ClusterError::Other("not used by this test".into()))
        }
        #[async_trait]
        impl Cluster for Where {
            async fn get(&self, target: &ObjectRef) -> Result<String, ClusterError> {
                let name = std::thread::current().name().unwrap_or("").to_owned();
                self.0.lock().expect("lock").push(name);
                Err(ClusterError::NotFound(target.to_string()))
            }
            async fn list(
                &self,
                _: &GroupVersionKind,
                _: Option<&str>,
                _: Option<&str>,
            ) -> Result<Vec<String>, ClusterError> {
                unused()
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
            async fn list_owned(
                &self,
                _: &GroupVersionKind,
                _: Option<&str>,
                _: &str,
            ) -> Result<Vec<String>, ClusterError> {
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

        let seen = Arc::new(Where(std::sync::Mutex::default()));
        let wrapped = OnHost::wrap(seen.clone(), host.handle().clone());
        let missing = ObjectRef::new(
            GroupVersionKind::gvk("", "v1", "ConfigMap"),
            Some("default".into()),
            "absent",
        );
        let result = lane.block_on(wrapped.get(&missing));
        assert!(
            matches!(result, Err(ClusterError::NotFound(_))),
            "{result:?}"
        );
        assert_eq!(*seen.0.lock().expect("lock"), ["host-worker"]);
    }
}
