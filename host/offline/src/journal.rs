//! The journal of writes a plugin made, in the order it made them: what the in-memory
//! cluster records and what `wasmop test` reports.

use serde::Serialize;
use serde_json::Value;

use wasmop_core::cluster::{EventType, ObjectRef};

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
