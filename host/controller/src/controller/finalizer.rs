//! Adding and removing a plugin's finalizer on a primary object.
//!
//! Both are JSON patches that first `test` the current finalizer list (or the entry being
//! removed), so a concurrent change by someone else fails the patch (HTTP 422) instead of being
//! overwritten; the reconcile is then retried with backoff against the fresh object. An add
//! whose `test` fails because the finalizer is on the object already (the cache had not yet
//! seen an earlier add) is not a failure: the object as stored is read and used.
//!
//! # Objects whose plugin was removed
//! A finalizer is only ever removed by the plugin that added it, after `cleanup` succeeded —
//! with one exception that keeps a namespace from being stuck forever: when a plugin is no
//! longer loaded, [`crate::orphans`] releases its finalizer from objects that are being deleted
//! (see there for the rule).

use kube::api::{Api, DynamicObject, GetParams, ObjectMeta, Patch, PatchParams, TypeMeta};
use serde_json::json;

use crate::watches::{CachedObject, DecodeError};
use wasmop_core::plugin::PluginName;

/// Why a finalizer could not be added or removed.
#[derive(Debug, thiserror::Error)]
pub enum FinalizerError {
    /// The patch could not be built (a host bug).
    #[error("cannot build the finalizer patch")]
    Build(#[source] serde_json::Error),
    /// The API server refused the patch (a concurrent change, RBAC, or unavailability).
    #[error("cannot {verb} finalizer `{finalizer}`")]
    Patch {
        /// `add` or `remove`.
        verb: &'static str,
        /// The finalizer.
        finalizer: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The API server's reply is not an object the host can decode.
    #[error("cannot {verb} finalizer `{finalizer}`: the reply")]
    Reply {
        /// `add`.
        verb: &'static str,
        /// The finalizer.
        finalizer: String,
        /// Why, without the object's content.
        #[source]
        source: DecodeError,
    },
}

fn params(plugin: &PluginName) -> PatchParams {
    PatchParams {
        field_manager: Some(plugin.field_manager()),
        ..PatchParams::default()
    }
}

/// Sends `patch` to the object `name` as `api` would, returning the reply's text: what it
/// holds is decoded by the host's own stack-safe decoder, not by kube's (which stops at
/// serde_json's recursion limit and logs the whole reply when it does).
async fn send_patch(
    api: &Api<DynamicObject>,
    name: &str,
    plugin: &PluginName,
    patch: &Patch<()>,
) -> Result<String, kube::Error> {
    let mut req = kube::core::Request::new(api.resource_url())
        .patch(name, &params(plugin), patch)
        .map_err(kube::Error::BuildRequest)?;
    req.extensions_mut().insert("patch");
    api.clone().into_client().request_text(req).await
}

/// Reads the object `name` as `api` would, as text (see [`send_patch`]).
async fn get_text(api: &Api<DynamicObject>, name: &str) -> Result<String, kube::Error> {
    let mut req = kube::core::Request::new(api.resource_url())
        .get(name, &GetParams::default())
        .map_err(kube::Error::BuildRequest)?;
    req.extensions_mut().insert("get");
    api.clone().into_client().request_text(req).await
}

/// Adds `finalizer` to the object with metadata `meta`, returning the object as stored (of
/// kind `types`), decoded at any depth.
pub async fn add(
    api: &Api<DynamicObject>,
    meta: &ObjectMeta,
    finalizer: &str,
    plugin: &PluginName,
    types: &TypeMeta,
) -> Result<CachedObject, FinalizerError> {
    let name = meta.name.clone().unwrap_or_default();
    let ops = match &meta.finalizers {
        None => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]},
        ]),
        Some(current) => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": current},
            {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer},
        ]),
    };
    let patch: json_patch::Patch = serde_json::from_value(ops).map_err(FinalizerError::Build)?;
    let decode = |text: String| {
        CachedObject::decode(&text, types).map_err(|source| FinalizerError::Reply {
            verb: "add",
            finalizer: finalizer.to_owned(),
            source,
        })
    };
    match send_patch(api, &name, plugin, &Patch::<()>::Json(patch)).await {
        Ok(stored) => decode(stored),
        // The `test` failed: the finalizer list is not what the cache showed. If that is
        // because the finalizer is there already (an earlier reconcile added it and the
        // watch has not delivered that yet), the object as stored is what was wanted.
        Err(source @ kube::Error::Api(_)) => match get_text(api, &name).await.map(decode) {
            Ok(Ok(stored))
                if stored
                    .meta()
                    .finalizers
                    .iter()
                    .flatten()
                    .any(|f| f == finalizer) =>
            {
                Ok(stored)
            }
            _ => Err(FinalizerError::Patch {
                verb: "add",
                finalizer: finalizer.to_owned(),
                source,
            }),
        },
        Err(source) => Err(FinalizerError::Patch {
            verb: "add",
            finalizer: finalizer.to_owned(),
            source,
        }),
    }
}

/// Removes `finalizer` from the object with metadata `meta`. Gone already (object or
/// finalizer) is success.
pub(crate) async fn remove(
    api: &Api<DynamicObject>,
    meta: &ObjectMeta,
    finalizer: &str,
    plugin: &PluginName,
) -> Result<(), FinalizerError> {
    let name = meta.name.clone().unwrap_or_default();
    let Some(index) = meta
        .finalizers
        .iter()
        .flatten()
        .position(|f| f == finalizer)
    else {
        return Ok(());
    };
    let path = format!("/metadata/finalizers/{index}");
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": path, "value": finalizer},
        {"op": "remove", "path": path},
    ]))
    .map_err(FinalizerError::Build)?;
    match send_patch(api, &name, plugin, &Patch::<()>::Json(patch)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(source) => Err(FinalizerError::Patch {
            verb: "remove",
            finalizer: finalizer.to_owned(),
            source,
        }),
    }
}
