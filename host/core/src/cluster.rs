//! The only way the runtime reaches Kubernetes: the [`Cluster`] trait.
//!
//! Objects cross as JSON text (they are open-ended and version-skewed, and cross the wasm
//! boundary as JSON anyway): what a plugin writes stays the text it sent ([`ObjectText`],
//! [`Json`]), what it reads is the text the cache or the server holds. Kinds are kube's
//! [`GroupVersionKind`]; patches are kube's [`Patch`]. Errors are typed so they map
//! one-to-one onto the WIT `kube-error` variant.
//!
//! `wasmop_offline::MemoryCluster` serves `wasmop test` and the tests; `wasmop-controller`
//! supplies an implementation backed by the API server and its watch caches.

pub mod names;
pub mod selector;
pub mod text;
pub mod trim;

use std::fmt;

use async_trait::async_trait;
pub use kube_core::GroupVersionKind;
pub use kube_core::params::{DeleteParams, Patch, Preconditions, PropagationPolicy};
use serde::Serialize;
use serde_json::Value;

use crate::plugin::PluginName;

pub use self::text::{Json, ObjectText};

/// The identity of one object.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectRef {
    /// The object's kind.
    pub kind: GroupVersionKind,
    /// Its namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

/// Why a JSON object cannot be identified.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// The value is not a JSON object.
    #[error("the object is not a JSON object")]
    NotAnObject,
    /// A required string field is missing or empty.
    #[error("the object has no `{0}`")]
    Missing(&'static str),
    /// `apiVersion` has more than one `/`.
    #[error("the object's apiVersion {0} is not `version` or `group/version`")]
    BadApiVersion(names::Quoted),
    /// A part of the identity breaks its grammar (see [`names`]).
    #[error(transparent)]
    Invalid(#[from] names::NameError),
}

impl ObjectRef {
    /// Builds a reference.
    pub fn new(kind: GroupVersionKind, namespace: Option<String>, name: impl Into<String>) -> Self {
        Self {
            kind,
            namespace,
            name: name.into(),
        }
    }

    /// A reference a plugin gave (a WIT `object-ref`), each part checked by its grammar
    /// ([`names`]); `field` names the record in errors (`target`, `regarding`).
    pub fn checked(
        field: &str,
        kind: GroupVersionKind,
        namespace: Option<String>,
        name: String,
    ) -> Result<Self, names::NameError> {
        names::check_gvk(
            &format!("{field}.kind"),
            &kind.group,
            &kind.version,
            &kind.kind,
        )?;
        if let Some(ns) = &namespace {
            names::check_namespace(&format!("{field}.namespace"), ns)?;
        }
        names::check_name(&format!("{field}.name"), &name)?;
        Ok(Self::new(kind, namespace, name))
    }

    /// Identifies an object by its `apiVersion`, `kind`, `metadata.namespace` and
    /// `metadata.name`, each checked by its grammar ([`names`]); an empty namespace is none.
    pub fn of(object: &Value) -> Result<Self, IdentityError> {
        fn text<'a>(v: Option<&'a Value>, field: &'static str) -> Result<&'a str, IdentityError> {
            v.and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .ok_or(IdentityError::Missing(field))
        }
        let object = object.as_object().ok_or(IdentityError::NotAnObject)?;
        let api_version = text(object.get("apiVersion"), "apiVersion")?;
        let kind = text(object.get("kind"), "kind")?;
        let metadata = object.get("metadata");
        let name = text(metadata.and_then(|m| m.get("name")), "metadata.name")?;
        let namespace = metadata
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str);
        Self::identified(api_version, kind, namespace, name)
    }

    /// The reference an object's identity fields name, each checked by its grammar: the one
    /// rule behind [`ObjectRef::of`] and [`ObjectText::parse`].
    pub(crate) fn identified(
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Self, IdentityError> {
        let kind = gvk_of(api_version, kind)?;
        let namespace = namespace.filter(|s| !s.is_empty());
        if let Some(ns) = namespace {
            names::check_namespace("metadata.namespace", ns)?;
        }
        names::check_name("metadata.name", name)?;
        Ok(Self::new(kind, namespace.map(str::to_owned), name))
    }

    /// `apiVersion` of the referenced kind (`v1`, `apps/v1`).
    pub fn api_version(&self) -> String {
        self.kind.api_version()
    }
}

/// Splits an `apiVersion` into group and version, and checks them and `kind` by their
/// grammars.
pub fn gvk_of(api_version: &str, kind: &str) -> Result<GroupVersionKind, IdentityError> {
    let (group, version) = match api_version.split_once('/') {
        None => ("", api_version),
        Some((group, version)) if !version.contains('/') && !group.is_empty() => (group, version),
        Some(_) => return Err(IdentityError::BadApiVersion(names::quote(api_version))),
    };
    names::check_group("apiVersion's group", group)?;
    names::check_version("apiVersion's version", version)?;
    names::check_kind("kind", kind)?;
    Ok(GroupVersionKind::gvk(group, version, kind))
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind.api_version(), self.kind.kind)?;
        match &self.namespace {
            Some(ns) => write!(f, " {ns}/{}", self.name),
            None => write!(f, " {}", self.name),
        }
    }
}

/// Why a cluster call failed. The cases are those of the WIT `kube-error`, which the guest
/// receives; each carries the message the API server (or the host) gave.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    /// The object does not exist (HTTP 404).
    #[error("not found: {0}")]
    NotFound(String),
    /// A write lost a race or a precondition failed (HTTP 409 Conflict).
    #[error("conflict: {0}")]
    Conflict(String),
    /// A create found an object of that name (HTTP 409 AlreadyExists).
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// The host's Kubernetes identity may not do this (HTTP 403).
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// The operator's wasmop policy does not grant this call to the plugin.
    #[error("denied: {0}")]
    Denied(String),
    /// The request or object is malformed (HTTP 400/422).
    #[error("invalid: {0}")]
    Invalid(String),
    /// The API server is unavailable or throttling, and the host's retries ran out.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

/// Whether an Event reports something normal or something wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum EventType {
    /// Routine progress.
    Normal,
    /// Something an operator should look at.
    Warning,
}

/// A Kubernetes Event a plugin asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The object the Event is about.
    pub regarding: ObjectRef,
    /// Normal or warning.
    pub event_type: EventType,
    /// A short CamelCase reason.
    pub reason: String,
    /// What was done or failed.
    pub action: String,
    /// A human-readable note.
    pub note: String,
}

/// Room reserved for an object's JSON text: a typical object fits without the buffer
/// growing (and being copied) several times on the way.
const JSON_TEXT_CAPACITY: usize = 4 << 10;

/// `value` as the JSON text objects cross the boundary in. Written straight into a buffer:
/// `Value`'s `Display` goes through `fmt` adapters that cost about twice as much.
pub fn json_text(value: &Value) -> String {
    let mut text = Vec::with_capacity(JSON_TEXT_CAPACITY);
    match serde_json::to_writer(&mut text, value).map(|()| String::from_utf8(text)) {
        Ok(Ok(text)) => text,
        // Neither happens: a `Value` always serializes, and serde_json writes UTF-8.
        _ => value.to_string(),
    }
}

/// Whether the object `text` has an owner reference to `uid`: only `metadata.ownerReferences[].uid`
/// is decoded (serde skips the rest without allocating). Text that is not an object has none.
pub fn owned_by(text: &str, uid: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Object<'a> {
        #[serde(borrow, default)]
        metadata: Metadata<'a>,
    }
    #[derive(serde::Deserialize, Default)]
    #[serde(rename_all = "camelCase")]
    struct Metadata<'a> {
        #[serde(borrow, default)]
        owner_references: Vec<Owner<'a>>,
    }
    #[derive(serde::Deserialize)]
    struct Owner<'a> {
        #[serde(borrow, default)]
        uid: std::borrow::Cow<'a, str>,
    }
    serde_json::from_str::<Object<'_>>(text)
        .is_ok_and(|o| o.metadata.owner_references.iter().any(|r| r.uid == uid))
}

/// Kubernetes as the runtime sees it. Every method is one API operation on behalf of one
/// plugin; the runtime has already checked the plugin's grants before calling.
///
/// Implementations must not block the async runtime. Returned objects are as stored by the
/// server (with `metadata.resourceVersion` and friends), trimmed of `managedFields` and the
/// last-applied annotation, each as its JSON text: the form a plugin receives it in, so a
/// read served from a cache that already holds the text hands it over as it is, and a
/// write's reply goes from the server's text to the plugin without a typed object between.
#[async_trait]
pub trait Cluster: Send + Sync + 'static {
    /// Reads one object, as JSON text.
    async fn get(&self, target: &ObjectRef) -> Result<String, ClusterError>;

    /// Lists objects of a kind in one namespace (or all with `None`), optionally filtered by a
    /// label selector in Kubernetes syntax; each object as JSON text.
    async fn list(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<String>, ClusterError>;

    /// Lists the objects of a kind with an owner reference to `owner_uid` (a checked
    /// identifier), in one namespace (or all with `None`); each object as JSON text.
    ///
    /// By default, [`list`](Self::list) filtered by each object's owner references (read
    /// without decoding the rest of the object). An implementation with a cache of the kind
    /// answers from an owner index instead of reading every object.
    async fn list_owned(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        owner_uid: &str,
    ) -> Result<Vec<String>, ClusterError> {
        let mut objects = self.list(kind, namespace, None).await?;
        objects.retain(|text| owned_by(text, owner_uid));
        Ok(objects)
    }

    /// Creates an object; `AlreadyExists` if one of that name exists.
    async fn create(&self, object: ObjectText, plugin: &PluginName)
    -> Result<String, ClusterError>;

    /// Server-side applies `object` (which names its target) with the field manager
    /// `wasmop/<plugin>` and force.
    async fn apply(&self, object: ObjectText, plugin: &PluginName) -> Result<String, ClusterError>;

    /// Patches an object (an apply patch uses the plugin's field manager and force).
    async fn patch(
        &self,
        target: &ObjectRef,
        patch: Patch<Json>,
        plugin: &PluginName,
    ) -> Result<String, ClusterError>;

    /// Patches an object's status subresource.
    async fn patch_status(
        &self,
        target: &ObjectRef,
        patch: Patch<Json>,
        plugin: &PluginName,
    ) -> Result<String, ClusterError>;

    /// Deletes an object as `params` say (propagation, preconditions, grace period; never a
    /// dry run); a missing object is not an error. A failed precondition is `Conflict`.
    async fn delete(
        &self,
        target: &ObjectRef,
        params: &DeleteParams,
        plugin: &PluginName,
    ) -> Result<(), ClusterError>;

    /// Records an Event reported by `wasmop/<plugin>`.
    async fn emit_event(&self, event: Event, plugin: &PluginName) -> Result<(), ClusterError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn identifies_namespaced_and_core_objects() {
        let r = ObjectRef::of(&json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "prod"}
        }))
        .expect("identifiable");
        assert_eq!(r.to_string(), "apps/v1 Deployment prod/web");
        let r = ObjectRef::of(
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod"}}),
        )
        .expect("identifiable");
        assert_eq!(r.kind.group, "");
        assert_eq!(r.namespace, None);
    }

    #[test]
    fn ownership_is_read_from_the_owner_references_alone() {
        let text = r#"{"metadata":{"name":"j","ownerReferences":[{"uid":"a"},{"uid":"b"}]},"spec":{"deep":[[[]]]}}"#;
        assert!(owned_by(text, "b"));
        assert!(!owned_by(text, "c"));
        assert!(!owned_by(r#"{"metadata":{"name":"free"}}"#, "a"));
        assert!(!owned_by("[]", "a"));
    }

    #[test]
    fn names_the_missing_identity_field() {
        let err = ObjectRef::of(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}))
            .expect_err("no name");
        assert_eq!(err, IdentityError::Missing("metadata.name"));
        let err =
            ObjectRef::of(&json!({"apiVersion": "a/b/c", "kind": "X", "metadata": {"name": "n"}}))
                .expect_err("bad apiVersion");
        assert!(matches!(err, IdentityError::BadApiVersion(_)));
    }
}
