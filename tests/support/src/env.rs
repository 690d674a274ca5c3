//! `TestEnv`: what one test gets: the shared control plane, an admin client, and a fresh
//! namespace of its own that is deleted when the test ends.

use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, PostParams};
use kube::core::{DynamicObject, ObjectMeta};
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::apply::{ApplyError, apply_yaml};
use crate::control_plane::{ControlPlane, ControlPlaneError, ControlPlaneState, KEEP_ENV};
use crate::identity::{Identity, IdentityError, client_from_kubeconfig, kubeconfig_for};
use crate::wait::{WaitError, wait_for};

/// Label put on every test namespace, so leftovers are easy to find.
pub const NAMESPACE_LABEL: &str = "wasmop.dev/testenv";

/// Numbers the namespaces of this test binary; the control plane is fresh per test binary, so
/// the names are unique within it.
static NEXT_NAMESPACE: AtomicU32 = AtomicU32::new(1);

/// Errors of setting up a test environment.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    /// The control plane is not available.
    #[error("starting the control plane")]
    ControlPlane(#[from] ControlPlaneError),
    /// The admin client could not be made.
    #[error("connecting as admin")]
    Admin(#[source] IdentityError),
    /// The test's namespace could not be created.
    #[error("creating test namespace {name}")]
    CreateNamespace {
        /// Its name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// One test's view of the shared control plane.
///
/// # Guarantees
/// The namespace exists when [`TestEnv::start`] returns and is deleted (in the background) when
/// the `TestEnv` is dropped, unless `WASMOP_TESTENV_KEEP` is set.
///
/// # Assumptions
/// Clients it hands out belong to the tokio runtime of the test that made them.
pub struct TestEnv {
    plane: Arc<ControlPlane>,
    client: Client,
    namespace: String,
}

impl TestEnv {
    /// Connects to the shared control plane (starting it on first use) and creates a fresh
    /// namespace for this test.
    ///
    /// # Errors
    /// When the control plane cannot be started or the namespace cannot be created.
    pub async fn start() -> Result<Self, EnvError> {
        let plane = ControlPlane::shared().await?;
        let client = client_from_kubeconfig(&plane.state().kubeconfig)
            .await
            .map_err(EnvError::Admin)?;
        let namespace = format!("test-{}", NEXT_NAMESPACE.fetch_add(1, Ordering::Relaxed));
        let object = Namespace {
            metadata: ObjectMeta {
                name: Some(namespace.clone()),
                labels: Some([(NAMESPACE_LABEL.to_owned(), "true".to_owned())].into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &object)
            .await
            .map_err(|source| EnvError::CreateNamespace {
                name: namespace.clone(),
                source,
            })?;
        Ok(TestEnv {
            plane,
            client,
            namespace,
        })
    }

    /// This test's namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// A client authenticated as cluster admin.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The admin kubeconfig, e.g. to run wasmop as a child process with `KUBECONFIG`.
    pub fn kubeconfig(&self) -> &Path {
        &self.plane.state().kubeconfig
    }

    /// Where the control plane is: ports, URLs, log files, process ids.
    pub fn control_plane(&self) -> &ControlPlaneState {
        self.plane.state()
    }

    /// Every request the API server has audited so far that `username` made: each an
    /// `audit.k8s.io/v1` Event as JSON (`verb`, `requestURI`, `objectRef`,
    /// `responseStatus.code`, ...). The log is shared by every test of this binary; filter by
    /// a user only this test acts as.
    pub fn audited(&self, username: &str) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.plane.audit_log())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["user"]["username"] == username)
            .collect()
    }

    /// A kubeconfig for `identity`, minting credentials (a client certificate, or a
    /// ServiceAccount token) as needed.
    ///
    /// # Errors
    /// When credentials cannot be minted (e.g. the ServiceAccount does not exist).
    pub async fn kubeconfig_for(&self, identity: &Identity) -> Result<PathBuf, IdentityError> {
        kubeconfig_for(&self.plane, &self.client, identity).await
    }

    /// A client authenticated as `identity`.
    ///
    /// # Errors
    /// As [`kubeconfig_for`](Self::kubeconfig_for), or when the client cannot be built.
    pub async fn client_for(&self, identity: &Identity) -> Result<Client, IdentityError> {
        let path = self.kubeconfig_for(identity).await?;
        client_from_kubeconfig(&path).await
    }

    /// Applies a multi-document YAML stream as admin; namespaced objects without a namespace go
    /// into this test's namespace. See [`apply_yaml`].
    ///
    /// # Errors
    /// The first document that fails.
    pub async fn apply_yaml(&self, yaml: &str) -> Result<Vec<DynamicObject>, ApplyError> {
        apply_yaml(&self.client, &self.namespace, yaml).await
    }

    /// Waits until `condition` holds for object `name` of `api`. See [`wait_for`].
    ///
    /// # Errors
    /// On timeout, with the last observed state of the object.
    pub async fn wait_for<K>(
        &self,
        api: &Api<K>,
        name: &str,
        what: &str,
        timeout: Duration,
        condition: impl Fn(Option<&K>) -> bool,
    ) -> Result<Option<K>, WaitError>
    where
        K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Serialize,
    {
        wait_for(api, name, what, timeout, condition).await
    }

    /// Stops kube-apiserver (etcd keeps its data). This affects every test of the test binary:
    /// tests that call it belong in a test binary of their own.
    ///
    /// # Errors
    /// When the launcher fails.
    pub async fn stop_apiserver(&self) -> Result<(), ControlPlaneError> {
        self.plane.stop_apiserver().await
    }

    /// Starts kube-apiserver again on the same address and waits until it is ready.
    ///
    /// # Errors
    /// When it does not become ready; the message holds its log tail.
    pub async fn start_apiserver(&self) -> Result<(), ControlPlaneError> {
        self.plane.start_apiserver().await
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        if std::env::var_os(KEEP_ENV).is_some() {
            return;
        }
        // Drop cannot await, and the test's runtime is shutting down: a thread of its own with
        // a small runtime sends the delete. It is not waited for; if the process exits first,
        // the whole control plane goes anyway.
        let kubeconfig = self.plane.state().kubeconfig.clone();
        let namespace = std::mem::take(&mut self.namespace);
        std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async move {
                if let Ok(client) = client_from_kubeconfig(&kubeconfig).await {
                    // Best effort: a stopped apiserver or a namespace the test already deleted
                    // leaves nothing to clean up that outlives the control plane.
                    let _ = Api::<Namespace>::all(client)
                        .delete(&namespace, &DeleteParams::background())
                        .await;
                }
            });
        });
    }
}
