//! [`CachedObject`]: how the shared caches hold an object — the trimmed object as JSON text,
//! and nothing else, behind one shared pointer.
//!
//! A `DynamicObject` keeps its body as a `serde_json::Value` (a `BTreeMap` node and a
//! `String` per field) and costs several times its JSON text. The text is also what a plugin
//! receives (reconcile requests, cache `get`/`list`), so keeping it ready saves encoding it
//! again per reconcile. Every metadata field the host reads is read back from the text when
//! it is needed: the cache key (namespace and name, [`CachedObject::namespace`],
//! [`CachedObject::name`]: borrowed from the text, no allocation unless a string holds JSON
//! escapes), the lifecycle fields of [`CachedObject::meta`] (uid, resourceVersion,
//! generation, deletionTimestamp, finalizers), labels, annotations and owner references.
//! Each read parses the text (serde skips the fields it does not name without allocating):
//! about a microsecond for a 400-byte object, against ~1,300 bytes per object that kept
//! copies of these fields cost (an `ObjectMeta` is 360 bytes even when mostly empty, a
//! `BTreeMap` of one label a ~550-byte node). The text is checked to decode at construction,
//! so these reads cannot fail later.
//!
//! What one object costs now, and what dominates: the text itself (384 bytes for the
//! ConfigMaps of BENCHMARKS.md's measurement 5), one allocation of it with a 16-byte header
//! (its length and one reference count: an [`ArcStr`] has no weak count) and glibc's chunk
//! overhead (8 bytes and rounding to 16), and an 8-byte slot in the
//! [`Store`](super::store::Store)'s table at its load factor: 432 bytes per object as malloc
//! chunks (1.12x the text) by `cargo bench -p wasmop-controller --bench cache`, against 446 with an
//! `Arc<str>` (a 16-byte fat pointer per table slot) and 1,306 with a copy of the metadata in
//! an `ObjectMeta` under kube-runtime's reflector store.
//!
//! Cloning a `CachedObject` clones a thin pointer, so the store, the change broadcast and
//! every plugin's trigger stream share one copy.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use arcstr::ArcStr;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::api::{DynamicObject, ObjectMeta, TypeMeta};
use kube::core::ApiResource;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::decoded::{self, DecodeError, Field, Watched};
use super::trim;

/// The kind of a shared watch's objects, shared by everything that names it.
pub type Kind = Arc<ApiResource>;

/// The largest encoding buffer kept for the next object, per thread: objects are mostly a
/// few KiB; a buffer grown by a rare huge one (a big ConfigMap) is let go rather than kept.
const SCRATCH_KEEP: usize = 64 << 10;

thread_local! {
    /// The buffer objects are encoded into before their text is copied out at its exact size.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Why an object cannot be cached.
#[derive(Debug, thiserror::Error)]
pub enum CachedObjectError {
    /// The object could not be written as JSON text.
    #[error("cannot encode object `{name}` as JSON")]
    Encode {
        /// The object's namespace and name.
        name: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The cached text is not JSON (a host bug: the text was written by serde_json).
    #[error("the cached text of `{name}` is not valid JSON")]
    Decode {
        /// The object's namespace and name.
        name: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

/// One object of a shared cache: trimmed (no `managedFields`, no last-applied annotation),
/// `apiVersion`/`kind` set, held as its JSON text only. Cheap to clone: one thin pointer
/// (8 bytes) to the shared text.
#[derive(Clone)]
pub struct CachedObject(ArcStr);

/// The cache key as it is in the text: borrowed unless the text escapes a character.
#[derive(Deserialize, Default)]
struct Key<'a> {
    #[serde(borrow, default)]
    namespace: Cow<'a, str>,
    #[serde(borrow, default)]
    name: Cow<'a, str>,
}

/// The metadata fields of [`CachedObject::meta`].
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Lifecycle {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    generation: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
}

impl CachedObject {
    /// Trims `obj`, sets its `apiVersion`/`kind` from `types` when it lacks them, and keeps it
    /// as text.
    pub fn new(mut obj: DynamicObject, types: &TypeMeta) -> Result<Self, CachedObjectError> {
        trim(&mut obj, types);
        Self::encode(&obj, || display_name(&obj.metadata))
    }

    /// Keeps an object as a shared watch decoded it (trimmed already), with `apiVersion` and
    /// `kind` set from `types` when it lacks them (list items do), as text.
    pub(crate) fn from_watched(
        mut obj: Watched,
        types: &TypeMeta,
    ) -> Result<Self, CachedObjectError> {
        let fields = &mut obj.fields;
        if !fields.contains_key("apiVersion") {
            fields.insert(
                "apiVersion".into(),
                Field::Value(types.api_version.clone().into()),
            );
        }
        if !fields.contains_key("kind") {
            fields.insert("kind".into(), Field::Value(types.kind.clone().into()));
        }
        Self::encode(&obj.fields, || obj.display_name())
    }

    /// Decodes the object `text` as the API server sends it (a list item, a watch event's
    /// object, a reply), whatever its depth ([`decoded::decode`]), and keeps it as
    /// [`CachedObject::from_watched`] does. The error says what is wrong without quoting the
    /// object.
    pub(crate) fn decode(text: &str, types: &TypeMeta) -> Result<Self, DecodeError> {
        Self::from_decoded(decoded::decode(text)?, types)
    }

    /// [`CachedObject::from_watched`] with the error told as [`CachedObject::decode`] tells it.
    pub(crate) fn from_decoded(watched: Watched, types: &TypeMeta) -> Result<Self, DecodeError> {
        Self::from_watched(watched, types).map_err(|e| match &e {
            CachedObjectError::Encode { source, .. } | CachedObjectError::Decode { source, .. } => {
                DecodeError::describe(source)
            }
        })
    }

    /// Keeps `obj` as it is (no trimming, no types added), as text.
    fn encode<T: Serialize>(
        obj: &T,
        display_name: impl Fn() -> String,
    ) -> Result<Self, CachedObjectError> {
        // Written into a reused buffer, then copied into an allocation of the exact size: a
        // `String` grown by doubling and then shrunk would leave freed fragments behind each
        // cached object (garbage the allocator keeps, i.e. RSS).
        let text = SCRATCH.with_borrow_mut(|buf| {
            buf.clear();
            let written = serde_json::to_writer(&mut *buf, obj)
                .map_err(|source| CachedObjectError::Encode {
                    name: display_name(),
                    source,
                })
                .and_then(|()| {
                    std::str::from_utf8(buf).map(ArcStr::from).map_err(|e| {
                        CachedObjectError::Encode {
                            name: display_name(),
                            source: serde::ser::Error::custom(e),
                        }
                    })
                });
            if buf.capacity() > SCRATCH_KEEP {
                *buf = Vec::new();
            }
            written
        })?;
        let cached = Self(text);
        // The accessors below read these back from the text and rely on this check: the text
        // never changes and decoding is deterministic, so what decodes now decodes later.
        let decode = |source| CachedObjectError::Decode {
            name: display_name(),
            source,
        };
        cached.try_key().map_err(decode)?;
        cached.try_metadata::<Lifecycle>().map_err(decode)?;
        Ok(cached)
    }

    /// The trimmed object as JSON text: what a plugin receives.
    pub fn text(&self) -> &str {
        &self.0
    }

    /// The object's name (empty if it has none).
    pub(crate) fn name(&self) -> Cow<'_, str> {
        self.key().name
    }

    /// The object's namespace; `None` for a cluster-scoped object.
    pub(crate) fn namespace(&self) -> Option<Cow<'_, str>> {
        Some(self.key().namespace).filter(|ns| !ns.is_empty())
    }

    /// The object's namespace (empty for a cluster-scoped object) and name, as the cache keys
    /// objects.
    pub(crate) fn key_parts(&self) -> (Cow<'_, str>, Cow<'_, str>) {
        let key = self.key();
        (key.namespace, key.name)
    }

    fn key(&self) -> Key<'_> {
        self.try_key().unwrap_or_else(|e| checked(&e))
    }

    fn try_key(&self) -> Result<Key<'_>, serde_json::Error> {
        #[derive(Deserialize)]
        struct Object<'a> {
            #[serde(borrow, default)]
            metadata: Key<'a>,
        }
        serde_json::from_str::<Object<'_>>(&self.0).map(|o| o.metadata)
    }

    /// The identity and lifecycle metadata, read from the text: name, namespace, uid,
    /// resourceVersion, generation, deletionTimestamp, finalizers. Labels, annotations and
    /// owner references are NOT here: read them with [`CachedObject::labels`],
    /// [`CachedObject::annotations`] and [`CachedObject::owner_references`]; the rest is in
    /// [`CachedObject::text`].
    pub fn meta(&self) -> ObjectMeta {
        let m = self
            .try_metadata::<Lifecycle>()
            .unwrap_or_else(|e| checked(&e));
        ObjectMeta {
            name: m.name,
            namespace: m.namespace,
            uid: m.uid,
            resource_version: m.resource_version,
            generation: m.generation,
            deletion_timestamp: m.deletion_timestamp,
            finalizers: m.finalizers,
            ..ObjectMeta::default()
        }
    }

    /// The trimmed object as a JSON value.
    pub fn to_value(&self) -> Result<Value, CachedObjectError> {
        serde_json::from_str(&self.0).map_err(|source| self.decode_error(source))
    }

    /// The object's labels (empty when it has none), read from the text.
    pub(crate) fn labels(&self) -> Result<BTreeMap<String, String>, CachedObjectError> {
        Ok(self.metadata::<Labels>()?.labels.unwrap_or_default())
    }

    /// The object's annotations (empty when it has none), read from the text.
    pub(crate) fn annotations(&self) -> Result<BTreeMap<String, String>, CachedObjectError> {
        Ok(self
            .metadata::<Annotations>()?
            .annotations
            .unwrap_or_default())
    }

    /// The object's owner references (empty when it has none), read from the text.
    pub(crate) fn owner_references(&self) -> Result<Vec<OwnerReference>, CachedObjectError> {
        Ok(self
            .metadata::<Owners>()?
            .owner_references
            .unwrap_or_default())
    }

    /// The uids of the object's owners (empty when it has none), read from the text without
    /// decoding the rest of each owner reference: what the cache's owner index is keyed by.
    pub(crate) fn owner_uids(&self) -> Vec<Box<str>> {
        #[derive(Deserialize, Default)]
        #[serde(rename_all = "camelCase")]
        struct OwnerUids {
            #[serde(default)]
            owner_references: Vec<Uid>,
        }
        #[derive(Deserialize)]
        struct Uid {
            #[serde(default)]
            uid: Box<str>,
        }
        let owners = self
            .try_metadata::<OwnerUids>()
            .unwrap_or_else(|e| checked(&e));
        let mut uids: Vec<Box<str>> = owners
            .owner_references
            .into_iter()
            .map(|r| r.uid)
            .filter(|uid| !uid.is_empty())
            .collect();
        uids.sort_unstable();
        uids.dedup();
        uids
    }

    fn metadata<M: DeserializeOwned + Default>(&self) -> Result<M, CachedObjectError> {
        self.try_metadata()
            .map_err(|source| self.decode_error(source))
    }

    /// Decodes the fields `M` names from `metadata`; serde skips the rest of the text
    /// without allocating.
    fn try_metadata<M: DeserializeOwned + Default>(&self) -> Result<M, serde_json::Error> {
        #[derive(Deserialize)]
        #[serde(bound = "M: DeserializeOwned + Default")]
        struct Object<M> {
            #[serde(default)]
            metadata: M,
        }
        serde_json::from_str::<Object<M>>(&self.0).map(|o| o.metadata)
    }

    fn decode_error(&self, source: serde_json::Error) -> CachedObjectError {
        CachedObjectError::Decode {
            name: self.to_string(),
            source,
        }
    }
}

/// A read that [`CachedObject::encode`] checked once already failed: the text changed under
/// an `ArcStr`, which cannot happen.
#[cold]
fn checked(error: &serde_json::Error) -> ! {
    unreachable!("a cached object's text was checked to decode when it was cached: {error}")
}

#[derive(Deserialize, Default)]
struct Labels {
    labels: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize, Default)]
struct Annotations {
    annotations: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Owners {
    owner_references: Option<Vec<OwnerReference>>,
}

fn display_name(meta: &ObjectMeta) -> String {
    let name = meta.name.as_deref().unwrap_or("<unnamed>");
    match &meta.namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_owned(),
    }
}

/// `namespace/name`, or `name` for a cluster-scoped object.
impl fmt::Display for CachedObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.try_key() {
            Ok(Key { namespace, name }) if namespace.is_empty() => f.write_str(&name),
            Ok(Key { namespace, name }) => write!(f, "{namespace}/{name}"),
            Err(_) => f.write_str("<unreadable>"),
        }
    }
}

impl fmt::Debug for CachedObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedObject")
            .field("object", &self.to_string())
            .field("bytes", &self.0.len())
            .finish()
    }
}

impl PartialEq for CachedObject {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watches::LAST_APPLIED;
    use serde_json::json;

    fn types() -> TypeMeta {
        TypeMeta {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        }
    }

    fn server_object() -> DynamicObject {
        serde_json::from_value(json!({
            "metadata": {
                "name": "a", "namespace": "ns", "uid": "u-1", "resourceVersion": "7",
                "generation": 3, "creationTimestamp": "2026-11-29T23:00:00Z",
                "labels": {"app": "web"},
                "annotations": {LAST_APPLIED: "{\"big\":true}", "keep": "me"},
                "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "Database",
                                     "name": "db", "uid": "u-0"}],
                "finalizers": ["example.com/f"],
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}]
            },
            "data": {"k": "v", "url": "postgres://x:5432"}
        }))
        .expect("object")
    }

    #[test]
    fn text_is_byte_for_byte_the_trimmed_object_json() {
        let mut expected = server_object();
        trim(&mut expected, &types());
        let expected = serde_json::to_string(&expected).expect("json");
        let cached = CachedObject::new(server_object(), &types()).expect("cached");
        assert_eq!(cached.text(), expected);
        let value = cached.to_value().expect("value");
        assert_eq!(value["apiVersion"], "v1");
        assert_eq!(value["kind"], "ConfigMap");
        assert!(value["metadata"].get("managedFields").is_none());
        assert_eq!(value["metadata"]["annotations"], json!({"keep": "me"}));
        assert_eq!(
            value["metadata"]["creationTimestamp"],
            "2026-11-29T23:00:00Z"
        );
        assert_eq!(value["data"]["url"], "postgres://x:5432");
    }

    #[test]
    fn metadata_accessors_keep_what_the_host_reads() {
        let cached = CachedObject::new(server_object(), &types()).expect("cached");
        let meta = cached.meta();
        assert_eq!(meta.name.as_deref(), Some("a"));
        assert_eq!(meta.namespace.as_deref(), Some("ns"));
        assert_eq!(meta.uid.as_deref(), Some("u-1"));
        assert_eq!(meta.resource_version.as_deref(), Some("7"));
        assert_eq!(meta.generation, Some(3));
        assert_eq!(meta.finalizers, Some(vec!["example.com/f".to_owned()]));
        assert!(meta.managed_fields.is_none());
        assert!(meta.creation_timestamp.is_none(), "left in the text only");
        assert!(meta.labels.is_none(), "read from the text");
        assert_eq!(
            cached.labels().expect("labels"),
            BTreeMap::from([("app".to_owned(), "web".to_owned())])
        );
        assert_eq!(
            cached.annotations().expect("annotations"),
            BTreeMap::from([("keep".to_owned(), "me".to_owned())])
        );
        let owners = cached.owner_references().expect("owners");
        assert_eq!(owners.len(), 1);
        assert_eq!(
            (owners[0].kind.as_str(), owners[0].name.as_str()),
            ("Database", "db")
        );
    }

    #[test]
    fn an_object_without_labels_annotations_or_owners_has_empty_ones() {
        let obj: DynamicObject =
            serde_json::from_value(json!({"metadata": {"name": "bare"}})).expect("object");
        let cached = CachedObject::new(obj, &types()).expect("cached");
        assert!(cached.labels().expect("labels").is_empty());
        assert!(cached.annotations().expect("annotations").is_empty());
        assert!(cached.owner_references().expect("owners").is_empty());
        assert_eq!(
            cached.text(),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bare"}}"#
        );
    }

    #[test]
    fn clones_share_one_copy() {
        let cached = CachedObject::new(server_object(), &types()).expect("cached");
        let copy = cached.clone();
        assert!(std::ptr::eq(cached.text(), copy.text()));
    }

    #[test]
    fn name_and_namespace_are_read_from_the_text() {
        let cached = CachedObject::new(server_object(), &types()).expect("cached");
        assert_eq!(cached.name(), "a");
        assert_eq!(cached.namespace().as_deref(), Some("ns"));
        assert!(
            matches!(cached.name(), Cow::Borrowed(_)),
            "no copy without escapes"
        );
        assert_eq!(cached.to_string(), "ns/a");
        let cluster: DynamicObject =
            serde_json::from_value(json!({"metadata": {"name": "node-1"}})).expect("object");
        let cluster = CachedObject::new(cluster, &types()).expect("cached");
        assert_eq!(cluster.namespace(), None);
        assert_eq!(cluster.to_string(), "node-1");
    }

    #[test]
    fn an_escaped_name_reads_back_unescaped() {
        let obj: DynamicObject =
            serde_json::from_value(json!({"metadata": {"name": "a\"b", "namespace": "n"}}))
                .expect("object");
        let cached = CachedObject::new(obj, &types()).expect("cached");
        assert_eq!(cached.name(), "a\"b");
        assert_eq!(cached.meta().name.as_deref(), Some("a\"b"));
    }

    #[test]
    fn a_cached_object_is_one_thin_pointer() {
        assert_eq!(std::mem::size_of::<CachedObject>(), 8);
        assert_eq!(std::mem::size_of::<Option<CachedObject>>(), 8);
    }

    #[test]
    fn a_watched_object_caches_as_the_trimmed_object_with_its_types() {
        // A list item: no apiVersion/kind, which the cache adds.
        let text = serde_json::to_string(&server_object()).expect("json");
        let watched = decoded::decode(&text).expect("decoded");
        let cached = CachedObject::from_watched(watched, &types()).expect("cached");
        let mut expected = server_object();
        trim(&mut expected, &types());
        let expected = serde_json::to_value(&expected).expect("value");
        assert_eq!(cached.to_value().expect("value"), expected);
        assert_eq!(cached.meta().resource_version.as_deref(), Some("7"));
        // A watch event's object names its kind itself; that is kept.
        let mut sent = serde_json::to_value(server_object()).expect("value");
        sent["apiVersion"] = json!("example.com/v2");
        sent["kind"] = json!("Other");
        let watched = decoded::decode(&sent.to_string()).expect("decoded");
        let cached = CachedObject::from_watched(watched, &types()).expect("cached");
        assert_eq!(cached.to_value().expect("value")["kind"], "Other");
    }

    #[test]
    fn decoding_trims_like_the_watches() {
        let text = serde_json::to_string(&server_object()).expect("json");
        let decoded = CachedObject::decode(&text, &types()).expect("decoded");
        assert!(!decoded.text().contains("managedFields"));
        assert!(!decoded.text().contains(LAST_APPLIED));
        assert_eq!(decoded.meta().uid.as_deref(), Some("u-1"));
    }
}
