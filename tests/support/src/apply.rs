//! Applying YAML manifests (CRDs, RBAC, any kind) with server-side apply, resolving each
//! document's kind through discovery, as `kubectl apply --server-side -f` does.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::core::{DynamicObject, GroupVersionKind};
use kube::discovery::{ApiCapabilities, ApiResource, Scope, pinned_kind};
use kube::{Api, Client};
use serde::Deserialize;

use crate::wait::{WaitError, wait_for};

/// The field manager of everything the test environment applies.
pub const FIELD_MANAGER: &str = "wasmop-testenv";

/// How long a just-applied CRD may take to become Established, and its kind to appear in
/// discovery: normally well under a second, but a busy 2-core machine can stall for a while.
const CRD_READY_TIMEOUT: Duration = Duration::from_secs(60);

/// How often discovery is retried while a just-established CRD's kind is not listed yet.
const DISCOVERY_RETRY: Duration = Duration::from_millis(200);

/// Errors of applying YAML.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// A document is not valid YAML or not a Kubernetes object.
    #[error("document {index} is not a Kubernetes object")]
    Parse {
        /// The document's position in the stream, from 0.
        index: usize,
        /// Why.
        #[source]
        source: serde_yaml::Error,
    },
    /// A document has no `apiVersion`/`kind`.
    #[error("document {index} has no apiVersion and kind")]
    NoKind {
        /// The document's position in the stream, from 0.
        index: usize,
    },
    /// A document has no `metadata.name`.
    #[error("document {index} ({kind}) has no metadata.name")]
    NoName {
        /// The document's position in the stream, from 0.
        index: usize,
        /// Its kind.
        kind: String,
    },
    /// Discovery does not know the document's kind.
    #[error("the apiserver does not serve {gvk:?} (document {index})")]
    Discovery {
        /// The document's position in the stream, from 0.
        index: usize,
        /// The kind asked for.
        gvk: GroupVersionKind,
        /// The last discovery error.
        #[source]
        source: kube::Error,
    },
    /// The apiserver rejected the apply.
    #[error("applying {kind} {name} (document {index})")]
    Apply {
        /// The document's position in the stream, from 0.
        index: usize,
        /// Its kind.
        kind: String,
        /// Its name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// An applied CRD did not become Established.
    #[error("CRD {name} (document {index}) did not become Established")]
    CrdNotEstablished {
        /// The document's position in the stream, from 0.
        index: usize,
        /// The CRD's name.
        name: String,
        /// The wait's failure, with the CRD's last observed state.
        #[source]
        source: WaitError,
    },
}

/// Applies every document of a multi-document YAML stream in order with server-side apply
/// (field manager [`FIELD_MANAGER`], forcing conflicts) and returns the objects as the
/// apiserver stored them.
///
/// Namespaced objects without `metadata.namespace` go into `default_namespace`. After a
/// CustomResourceDefinition, it waits until the CRD is Established and its kind is served, so a
/// later document of the same stream may be an instance of it.
///
/// # Errors
/// The first document that fails, naming its position, kind and name.
pub async fn apply_yaml(
    client: &Client,
    default_namespace: &str,
    yaml: &str,
) -> Result<Vec<DynamicObject>, ApplyError> {
    let mut applied = Vec::new();
    for (index, document) in serde_yaml::Deserializer::from_str(yaml).enumerate() {
        let value = serde_yaml::Value::deserialize(document)
            .map_err(|source| ApplyError::Parse { index, source })?;
        if value.is_null() {
            continue; // an empty document, e.g. after a trailing `---`
        }
        let mut object: DynamicObject =
            serde_yaml::from_value(value).map_err(|source| ApplyError::Parse { index, source })?;
        let gvk = object
            .types
            .as_ref()
            .and_then(|t| GroupVersionKind::try_from(t).ok())
            .ok_or(ApplyError::NoKind { index })?;
        let name = object
            .metadata
            .name
            .clone()
            .ok_or_else(|| ApplyError::NoName {
                index,
                kind: gvk.kind.clone(),
            })?;
        let (resource, capabilities) = discover(client, &gvk, index, None).await?;
        let api: Api<DynamicObject> = match capabilities.scope {
            Scope::Namespaced => {
                let namespace = object
                    .metadata
                    .namespace
                    .get_or_insert_with(|| default_namespace.to_owned())
                    .clone();
                Api::namespaced_with(client.clone(), &namespace, &resource)
            }
            Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        let stored = api
            .patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&object),
            )
            .await
            .map_err(|source| ApplyError::Apply {
                index,
                kind: gvk.kind.clone(),
                name: name.clone(),
                source,
            })?;
        if gvk.group == "apiextensions.k8s.io" && gvk.kind == "CustomResourceDefinition" {
            wait_established(client, &name, index).await?;
        }
        applied.push(stored);
    }
    Ok(applied)
}

/// Resolves a kind through discovery; with `retry_until`, failures are retried until then (a
/// CRD that was just established can take a moment to be listed).
async fn discover(
    client: &Client,
    gvk: &GroupVersionKind,
    index: usize,
    retry_until: Option<tokio::time::Instant>,
) -> Result<(ApiResource, ApiCapabilities), ApplyError> {
    loop {
        match pinned_kind(client, gvk).await {
            Ok(found) => return Ok(found),
            Err(source) if retry_until.is_none_or(|t| tokio::time::Instant::now() >= t) => {
                return Err(ApplyError::Discovery {
                    index,
                    gvk: gvk.clone(),
                    source,
                });
            }
            Err(_) => tokio::time::sleep(DISCOVERY_RETRY).await,
        }
    }
}

/// Waits until the CRD is Established and each of its served versions is listed by discovery,
/// so that instances can be applied right away.
async fn wait_established(client: &Client, name: &str, index: usize) -> Result<(), ApplyError> {
    let deadline = tokio::time::Instant::now() + CRD_READY_TIMEOUT;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = wait_for(
        &api,
        name,
        "to become Established",
        CRD_READY_TIMEOUT,
        is_established,
    )
    .await
    .map_err(|source| ApplyError::CrdNotEstablished {
        index,
        name: name.to_owned(),
        source,
    })?;
    let Some(crd) = crd else {
        return Ok(()); // unreachable: is_established holds only for a present CRD
    };
    for version in crd.spec.versions.iter().filter(|v| v.served) {
        let gvk = GroupVersionKind::gvk(&crd.spec.group, &version.name, &crd.spec.names.kind);
        discover(client, &gvk, index, Some(deadline)).await?;
    }
    Ok(())
}

/// Whether a CRD has the condition `Established=True`.
pub fn is_established(crd: Option<&CustomResourceDefinition>) -> bool {
    crd.and_then(|c| c.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}
