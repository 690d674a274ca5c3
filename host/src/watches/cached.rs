//! [`CachedObject`]: how the shared caches hold an object — the trimmed object as JSON text,
//! plus the few metadata fields the host reads, behind one shared pointer.
//!
//! A `DynamicObject` keeps its body as a `serde_json::Value` (a `BTreeMap` node and a
//! `String` per field) and costs several times its JSON text. The text is also what a plugin
//! receives (reconcile requests, cache `get`/`list`), so keeping it ready saves encoding it
//! again per reconcile. The metadata kept as fields is what kube-runtime's store keys and the
//! host read on every reconcile: identity (name, namespace, uid, resourceVersion), the
//! generation filter's fields (generation, deletionTimestamp) and finalizers. Labels,
//! annotations and owner references are read from the text when a selector or a mapping
//! needs them ([`CachedObject::labels`], [`CachedObject::annotations`],
//! [`CachedObject::owner_references`]): a `BTreeMap` costs a ~550-byte node even for one
//! label, more than a small object's whole text, while reading them back from the text costs
//! about a microsecond per event. Everything else stays in the text only.
//!
//! Measured by `cargo bench -p wasmop --bench cache` (see BENCHMARKS.md, measurement 5).
//!
//! Cloning a `CachedObject` clones a pointer, so the reflector store, the change broadcast and
//! every plugin's trigger stream share one copy.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DynamicObject, ObjectMeta, TypeMeta};
use kube::core::{ApiResource, DynamicResourceScope, Resource};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::trim;

/// The kind of a cached object, shared by every cache key of the kind: kube-runtime's
/// `ObjectRef` carries the dynamic type by value, and an `ApiResource` (five `String`s) per
/// key would cost more than a small object's text.
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
/// `apiVersion`/`kind` set, held as JSON text plus the metadata the host reads. Cheap to
/// clone.
#[derive(Clone)]
pub struct CachedObject(Arc<Inner>);

#[derive(Clone)]
struct Inner {
    meta: ObjectMeta,
    text: Box<str>,
}

impl CachedObject {
    /// Trims `obj`, sets its `apiVersion`/`kind` from `types` when it lacks them, and keeps it
    /// as text.
    pub fn new(mut obj: DynamicObject, types: &TypeMeta) -> Result<Self, CachedObjectError> {
        trim(&mut obj, types);
        Self::encode(obj)
    }

    /// Keeps `obj` as it is (no trimming, no types added), as text.
    fn encode(obj: DynamicObject) -> Result<Self, CachedObjectError> {
        // Written into a reused buffer, then copied into an allocation of the exact size: a
        // `String` grown by doubling and then shrunk would leave freed fragments behind each
        // cached object (garbage the allocator keeps, i.e. RSS).
        let text = SCRATCH.with_borrow_mut(|buf| {
            buf.clear();
            let written = serde_json::to_writer(&mut *buf, &obj)
                .map_err(|source| CachedObjectError::Encode {
                    name: display_name(&obj.metadata),
                    source,
                })
                .and_then(|()| {
                    std::str::from_utf8(buf).map(Box::<str>::from).map_err(|e| {
                        CachedObjectError::Encode {
                            name: display_name(&obj.metadata),
                            source: serde::ser::Error::custom(e),
                        }
                    })
                });
            if buf.capacity() > SCRATCH_KEEP {
                *buf = Vec::new();
            }
            written
        })?;
        let m = obj.metadata;
        let meta = ObjectMeta {
            name: m.name,
            namespace: m.namespace,
            uid: m.uid,
            resource_version: m.resource_version,
            generation: m.generation,
            finalizers: m.finalizers,
            deletion_timestamp: m.deletion_timestamp,
            ..ObjectMeta::default()
        };
        Ok(Self(Arc::new(Inner { meta, text })))
    }

    /// The trimmed object as JSON text: what a plugin receives.
    pub fn text(&self) -> &str {
        &self.0.text
    }

    /// The trimmed object as a JSON value.
    pub fn to_value(&self) -> Result<Value, CachedObjectError> {
        serde_json::from_str(&self.0.text).map_err(|source| CachedObjectError::Decode {
            name: display_name(&self.0.meta),
            source,
        })
    }

    /// The object's labels (empty when it has none), read from the text.
    pub fn labels(&self) -> Result<BTreeMap<String, String>, CachedObjectError> {
        Ok(self.metadata::<Labels>()?.labels.unwrap_or_default())
    }

    /// The object's annotations (empty when it has none), read from the text.
    pub fn annotations(&self) -> Result<BTreeMap<String, String>, CachedObjectError> {
        Ok(self
            .metadata::<Annotations>()?
            .annotations
            .unwrap_or_default())
    }

    /// The object's owner references (empty when it has none), read from the text.
    pub fn owner_references(&self) -> Result<Vec<OwnerReference>, CachedObjectError> {
        Ok(self
            .metadata::<Owners>()?
            .owner_references
            .unwrap_or_default())
    }

    /// Decodes the fields `M` names from `metadata`; serde skips the rest of the text
    /// without allocating.
    fn metadata<M: DeserializeOwned + Default>(&self) -> Result<M, CachedObjectError> {
        #[derive(Deserialize)]
        #[serde(bound = "M: DeserializeOwned + Default")]
        struct Object<M> {
            #[serde(default)]
            metadata: M,
        }
        serde_json::from_str::<Object<M>>(&self.0.text)
            .map(|o| o.metadata)
            .map_err(|source| CachedObjectError::Decode {
                name: display_name(&self.0.meta),
                source,
            })
    }
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

impl fmt::Debug for CachedObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedObject")
            .field("name", &self.0.meta.name)
            .field("namespace", &self.0.meta.namespace)
            .field("resource_version", &self.0.meta.resource_version)
            .field("bytes", &self.0.text.len())
            .finish()
    }
}

impl PartialEq for CachedObject {
    fn eq(&self, other: &Self) -> bool {
        self.0.text == other.0.text
    }
}

/// Decodes an object as the API server sends it, trimmed but without `apiVersion`/`kind`
/// added when it lacks them (a decoder does not know the kind; the shared watches build
/// cached objects with [`CachedObject::new`] instead).
impl<'de> Deserialize<'de> for CachedObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut obj = DynamicObject::deserialize(deserializer)?;
        super::trim_metadata(&mut obj.metadata);
        Self::encode(obj).map_err(serde::de::Error::custom)
    }
}

impl Resource for CachedObject {
    type DynamicType = Kind;
    type Scope = DynamicResourceScope;

    fn kind(dt: &Kind) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn group(dt: &Kind) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &Kind) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn api_version(dt: &Kind) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &Kind) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    /// The identity and lifecycle metadata: name, namespace, uid, resourceVersion,
    /// generation, deletionTimestamp, finalizers. Labels, annotations and owner references
    /// are NOT here: read them with [`CachedObject::labels`], [`CachedObject::annotations`]
    /// and [`CachedObject::owner_references`]; the rest is in [`CachedObject::text`].
    fn meta(&self) -> &ObjectMeta {
        &self.0.meta
    }

    /// Changes the kept metadata only, not the text (copying the object first if it is
    /// shared). The host never changes a cached object; this exists for the trait.
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut Arc::make_mut(&mut self.0).meta
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watches::LAST_APPLIED;
    use kube::core::GroupVersionKind;
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
    fn store_keys_name_the_kind_and_object() {
        let kind: Kind = Arc::new(ApiResource::from_gvk(&GroupVersionKind::gvk(
            "",
            "v1",
            "ConfigMap",
        )));
        let cached = CachedObject::new(server_object(), &types()).expect("cached");
        let key = kube::runtime::reflector::Lookup::to_object_ref(&cached, kind.clone());
        assert_eq!(
            key,
            kube::runtime::reflector::ObjectRef::new_with("a", kind).within("ns")
        );
        assert_eq!(
            CachedObject::url_path(&key.dyntype, Some("ns")),
            "/api/v1/namespaces/ns/configmaps"
        );
    }

    #[test]
    fn decoding_trims_like_the_watches() {
        let text = serde_json::to_string(&server_object()).expect("json");
        let decoded: CachedObject = serde_json::from_str(&text).expect("decoded");
        assert!(!decoded.text().contains("managedFields"));
        assert!(!decoded.text().contains(LAST_APPLIED));
        assert_eq!(decoded.meta().uid.as_deref(), Some("u-1"));
    }
}
