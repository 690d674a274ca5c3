//! The journal of writes a plugin made, in the order it made them: what the in-memory
//! cluster records and what `wasmop test` reports.

use serde::Serialize;
use serde_json::Value;

use wasmop_core::cluster::{DeleteParams, EventType, ObjectRef, PropagationPolicy};

/// How a written object is named in the journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    /// `apiVersion` of the target.
    pub api_version: String,
    /// Its kind.
    pub kind: String,
    /// Its namespace, if namespaced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

impl From<&ObjectRef> for Target {
    fn from(r: &ObjectRef) -> Self {
        Self {
            api_version: r.api_version(),
            kind: r.kind.kind.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
        }
    }
}

/// How a delete was asked for, as the journal shows it: what is not set is left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteOptions {
    /// `Background`, `Foreground` or `Orphan`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub propagation_policy: Option<String>,
    /// The uid precondition.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// The resourceVersion precondition.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// The grace period.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grace_period_seconds: Option<u32>,
}

impl DeleteOptions {
    /// The journal's view of `params`.
    pub fn of(params: &DeleteParams) -> Self {
        let preconditions = params.preconditions.clone().unwrap_or_default();
        Self {
            propagation_policy: params.propagation_policy.as_ref().map(|p| {
                match p {
                    PropagationPolicy::Background => "Background",
                    PropagationPolicy::Foreground => "Foreground",
                    PropagationPolicy::Orphan => "Orphan",
                }
                .to_owned()
            }),
            uid: preconditions.uid,
            resource_version: preconditions.resource_version,
            grace_period_seconds: params.grace_period_seconds,
        }
    }
}

/// The patch types of the WIT `patch` variant, as named in the journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PatchType {
    /// JSON merge patch.
    Merge,
    /// JSON patch.
    Json,
    /// Strategic merge patch.
    Strategic,
    /// Server-side apply patch.
    Apply,
}

/// One write a plugin asked for, in the order it asked. A failed write carries the error.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Write {
    /// `kube.create`.
    Create {
        /// The object as the plugin sent it.
        object: Value,
        /// Why it failed, if it did.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// `kube.apply` (server-side apply).
    Apply {
        /// The field manager it was applied with.
        #[serde(rename = "fieldManager")]
        field_manager: String,
        /// The object as the plugin sent it.
        object: Value,
        /// Why it failed, if it did.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// `kube.patch`.
    Patch {
        /// The patched object.
        target: Target,
        /// The patch type.
        #[serde(rename = "patchType")]
        patch_type: PatchType,
        /// The patch body as the plugin sent it.
        patch: Value,
        /// Why it failed, if it did.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// `kube.patch-status`.
    PatchStatus {
        /// The patched object.
        target: Target,
        /// The patch type.
        #[serde(rename = "patchType")]
        patch_type: PatchType,
        /// The patch body as the plugin sent it.
        patch: Value,
        /// Why it failed, if it did.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// `kube.delete`.
    Delete {
        /// The deleted object.
        target: Target,
        /// How it was deleted.
        options: DeleteOptions,
        /// Why it failed, if it did.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// `events.emit`.
    Event {
        /// The object the Event is about.
        regarding: Target,
        /// Normal or Warning.
        #[serde(rename = "type")]
        event_type: EventType,
        /// The reason.
        reason: String,
        /// The action.
        action: String,
        /// The note.
        note: String,
    },
}
