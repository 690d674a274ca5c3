//! [`Watched`]: what a shared watch decodes each object into — the fields a cached object
//! keeps, with `managedFields` and the last-applied annotation skipped while decoding.
//!
//! kube-runtime's watcher decodes every object of a list or a watch event into its `K`. A
//! `DynamicObject` decodes the whole metadata into a typed `ObjectMeta` — every
//! `managedFields` entry with its field set, timestamps parsed into dates — only for the
//! cache to drop `managedFields` and write the rest back as text (formatting the dates
//! again). `Watched` passes over `managedFields` and the last-applied annotation without
//! building anything for them and keeps every other field as the JSON value it is, to be
//! written once as the cached text ([`super::CachedObject::from_watched`]). It keeps its
//! `resourceVersion` (and name and namespace) in an `ObjectMeta`: the watcher resumes from
//! the last one it saw.
//!
//! It works with any serde deserializer (no raw JSON slices): kube decodes a list's items
//! through serde's buffered content, because `ObjectList` flattens its type fields.

use std::borrow::Cow;
use std::fmt;

use kube::api::ObjectMeta;
use kube::core::{ApiResource, DynamicResourceScope, Resource};
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::LAST_APPLIED;

/// One object as a shared watch decodes it: trimmed, not yet written as text.
#[derive(Clone, Debug)]
pub struct Watched {
    /// The object's name, namespace and resourceVersion (nothing else).
    meta: ObjectMeta,
    /// Every top-level field, `metadata` trimmed.
    pub(super) fields: Map<String, Value>,
}

impl Resource for Watched {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

impl Watched {
    /// The object's namespace and name, for messages.
    pub fn display_name(&self) -> String {
        match (&self.meta.namespace, &self.meta.name) {
            (Some(ns), Some(name)) => format!("{ns}/{name}"),
            (None, Some(name)) => name.clone(),
            _ => "<unnamed>".into(),
        }
    }
}

impl<'de> Deserialize<'de> for Watched {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ObjectVisitor)
    }
}

struct ObjectVisitor;

impl<'de> Visitor<'de> for ObjectVisitor {
    type Value = Watched;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Watched, A::Error> {
        let mut fields = Map::new();
        let mut meta = ObjectMeta::default();
        while let Some(key) = map.next_key::<String>()? {
            if key == "metadata" {
                let Metadata {
                    fields: m,
                    identity,
                } = map.next_value()?;
                meta = identity;
                fields.insert(key, Value::Object(m));
            } else {
                let value: Value = map.next_value()?;
                fields.insert(key, value);
            }
        }
        Ok(Watched { meta, fields })
    }
}

/// An object's metadata without `managedFields` and the last-applied annotation (and without
/// `annotations` when that was all it held), plus its identity for the watcher.
struct Metadata {
    fields: Map<String, Value>,
    identity: ObjectMeta,
}

impl<'de> Deserialize<'de> for Metadata {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(MetadataVisitor)
    }
}

struct MetadataVisitor;

impl<'de> Visitor<'de> for MetadataVisitor {
    type Value = Metadata;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object's metadata")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Metadata, A::Error> {
        let mut fields = Map::new();
        let mut identity = ObjectMeta::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "managedFields" => {
                    map.next_value::<IgnoredAny>()?;
                }
                "annotations" => {
                    let mut annotations: Option<Map<String, Value>> = map.next_value()?;
                    if let Some(a) = annotations.as_mut() {
                        a.remove(LAST_APPLIED);
                    }
                    if let Some(a) = annotations.filter(|a| !a.is_empty()) {
                        fields.insert(key, Value::Object(a));
                    }
                }
                _ => {
                    let value: Value = map.next_value()?;
                    let text = value.as_str().map(str::to_owned);
                    match key.as_str() {
                        "name" => identity.name = text,
                        "namespace" => identity.namespace = text,
                        "resourceVersion" => identity.resource_version = text,
                        _ => {}
                    }
                    fields.insert(key, value);
                }
            }
        }
        Ok(Metadata { fields, identity })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn server_object() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "a",
                "namespace": "ns",
                "resourceVersion": "42",
                "creationTimestamp": "2026-11-30T07:00:00Z",
                "labels": {"app": "x"},
                "annotations": {LAST_APPLIED: "{}", "keep": "me"},
                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:data": {"f:k": {}}}}]
            },
            "data": {"k": "v"}
        })
    }

    #[test]
    fn decoding_drops_managed_fields_and_last_applied_and_keeps_the_rest_as_sent() {
        let text = server_object().to_string();
        let watched: Watched = serde_json::from_str(&text).expect("decodes");
        let mut expected = server_object();
        let meta = expected["metadata"].as_object_mut().expect("metadata");
        meta.remove("managedFields");
        meta["annotations"]
            .as_object_mut()
            .expect("annotations")
            .remove(LAST_APPLIED);
        assert_eq!(Value::Object(watched.fields.clone()), expected);
        assert_eq!(watched.meta().resource_version.as_deref(), Some("42"));
        assert_eq!(watched.display_name(), "ns/a");
    }

    #[test]
    fn annotations_that_held_only_last_applied_are_dropped() {
        let mut object = server_object();
        object["metadata"]["annotations"] = json!({LAST_APPLIED: "{}"});
        let watched: Watched = serde_json::from_value(object).expect("decodes");
        assert!(watched.fields["metadata"].get("annotations").is_none());
    }

    #[test]
    fn list_items_decode_through_buffered_content_too() {
        // kube's ObjectList flattens its type fields, so serde buffers the items first.
        #[derive(Deserialize)]
        struct List {
            #[serde(flatten)]
            _rest: Map<String, Value>,
            items: Vec<Watched>,
        }
        let list = json!({"kind": "ConfigMapList", "apiVersion": "v1", "items": [server_object()]});
        let list: List = serde_json::from_value(list).expect("decodes");
        assert_eq!(list.items[0].fields["data"], json!({"k": "v"}));
        assert!(
            list.items[0].fields["metadata"]
                .get("managedFields")
                .is_none()
        );
    }

    #[test]
    fn trimming_a_value_drops_the_same_fields_as_decoding() {
        let mut only_last_applied = server_object();
        only_last_applied["metadata"]["annotations"] = json!({LAST_APPLIED: "{}"});
        let mut no_annotations = server_object();
        no_annotations["metadata"]
            .as_object_mut()
            .expect("metadata")
            .remove("annotations");
        for object in [server_object(), only_last_applied, no_annotations] {
            let decoded: Watched = serde_json::from_value(object.clone()).expect("decodes");
            let mut trimmed = object;
            crate::watches::trim_value(&mut trimmed);
            assert_eq!(Value::Object(decoded.fields), trimmed);
        }
    }

    #[test]
    fn trimming_a_value_keeps_other_annotations_and_drops_an_emptied_map() {
        let mut object = json!({"metadata": {
            "name": "a",
            "managedFields": [{"manager": "kubectl"}],
            "annotations": {LAST_APPLIED: "{}", "keep": "me"}
        }});
        crate::watches::trim_value(&mut object);
        assert_eq!(
            object,
            json!({"metadata": {"name": "a", "annotations": {"keep": "me"}}})
        );
        let mut only_last_applied = json!({"metadata": {"annotations": {LAST_APPLIED: "{}"}}});
        crate::watches::trim_value(&mut only_last_applied);
        assert_eq!(only_last_applied, json!({"metadata": {}}));
        let mut not_an_object = json!([1, 2]);
        crate::watches::trim_value(&mut not_an_object);
        assert_eq!(not_an_object, json!([1, 2]));
    }

    #[test]
    fn something_that_is_not_an_object_is_refused() {
        let error = serde_json::from_str::<Watched>("[1, 2]").expect_err("refused");
        assert!(error.to_string().contains("a Kubernetes object"), "{error}");
    }
}
