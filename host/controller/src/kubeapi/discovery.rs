//! Resolves a [`GroupVersionKind`] to the [`ApiResource`] the API serves it as, and whether it
//! is namespaced. Answers are cached; failures are not, so a kind whose CRD is installed later
//! resolves on the next try.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use kube::Client;
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::Scope;

use super::errors::retrying;
use wasmop_core::cluster::ClusterError;

/// A kind as the API server serves it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Resolved {
    /// Group, version, kind and plural.
    pub resource: ApiResource,
    /// Whether objects of the kind live in namespaces.
    pub namespaced: bool,
}

/// A caching GVK resolver. Cheap to clone.
#[derive(Clone)]
pub struct Resolver {
    client: Client,
    cache: Arc<RwLock<HashMap<GroupVersionKind, Resolved>>>,
}

impl Resolver {
    /// A resolver asking `client`'s API server.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            cache: Arc::default(),
        }
    }

    /// Resolves `gvk`.
    ///
    /// # Errors
    /// `NotFound` when the API server does not serve the kind (for a custom resource: its CRD
    /// is not installed or not established yet); `Unavailable` when discovery itself failed.
    pub async fn resolve(&self, gvk: &GroupVersionKind) -> Result<Resolved, ClusterError> {
        if let Some(hit) = self.cached(gvk) {
            return Ok(hit);
        }
        let client = self.client.clone();
        let (resource, caps) = retrying("discovery", || kube::discovery::pinned_kind(&client, gvk))
            .await
            .map_err(|e| match e {
                ClusterError::NotFound(_) | ClusterError::Other(_) => {
                    ClusterError::NotFound(format!(
                        "the API server does not serve {}/{} {} (is its CRD installed?)",
                        gvk.group, gvk.version, gvk.kind
                    ))
                }
                other => other,
            })?;
        // Discovery matches the kind exactly within the group and version it was asked for;
        // checked again here, because the grant check was made on the kind as asked, and a
        // resource that answered to another name would pass a check made for a different one.
        if resource.group != gvk.group
            || resource.version != gvk.version
            || resource.kind != gvk.kind
        {
            return Err(ClusterError::NotFound(format!(
                "the API server serves {}/{} {} as {} {}, not as asked",
                gvk.group, gvk.version, gvk.kind, resource.api_version, resource.kind
            )));
        }
        let resolved = Resolved {
            resource,
            namespaced: caps.scope == Scope::Namespaced,
        };
        if let Ok(mut cache) = self.cache.write() {
            cache.insert(gvk.clone(), resolved.clone());
        }
        Ok(resolved)
    }

    fn cached(&self, gvk: &GroupVersionKind) -> Option<Resolved> {
        self.cache.read().ok()?.get(gvk).cloned()
    }
}
