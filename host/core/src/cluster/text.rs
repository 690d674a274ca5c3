//! What a plugin writes, kept as the JSON text it sent.
//!
//! A write's body goes from the guest to the API server as it is: the host reads only what
//! it must check (the object's kind, namespace and name, against the plugin's grants) and
//! that the text is well-formed JSON, instead of building a `serde_json::Value` of the whole
//! object and writing it out again for the request. Implementations that do need a tree
//! (the in-memory cluster) parse the text themselves.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use super::{IdentityError, ObjectRef, Patch};

/// Well-formed JSON text, sent on as it is (its `Serialize` writes the text verbatim).
pub type Json = Box<RawValue>;

/// Why a plugin's object or patch is refused before it reaches the cluster.
#[derive(Debug, thiserror::Error)]
pub enum TextError {
    /// The object is not well-formed JSON.
    #[error("the object is not valid JSON: {0}")]
    Object(#[source] serde_json::Error),
    /// The object does not say what it is.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// A merge, strategic-merge or apply patch is not well-formed JSON.
    #[error("the patch is not valid JSON: {0}")]
    Patch(#[source] serde_json::Error),
    /// A JSON patch is not a list of JSON-patch operations.
    #[error("the patch is not a valid JSON patch: {0}")]
    JsonPatch(#[source] serde_json::Error),
    /// A guarded merge, strategic-merge or apply patch is not a JSON object, so it has no
    /// `metadata` to carry the resourceVersion.
    #[error(
        "a patch with a resourceVersion precondition must be a JSON object whose `metadata`, \
         if it has one, is an object"
    )]
    GuardNotAnObject,
}

/// An object to create or apply: its JSON text, checked to be a JSON object naming its
/// kind and name, and the reference it names.
#[derive(Debug, Clone)]
pub struct ObjectText {
    target: ObjectRef,
    json: Json,
}

impl ObjectText {
    /// Checks `text` and reads its identity, in one pass that builds nothing but the
    /// identity's strings.
    pub fn parse(text: String) -> Result<Self, TextError> {
        let identity: Identity<'_> = serde_json::from_str(&text).map_err(TextError::Object)?;
        let target = identity.target()?;
        // Already known to be well-formed; this pass only checks it again, without allocating.
        let json = RawValue::from_string(text).map_err(TextError::Object)?;
        Ok(Self { target, json })
    }

    /// The text of `value` (for callers that hold a tree: tests, the native twin of a plugin).
    pub fn from_value(value: &Value) -> Result<Self, TextError> {
        let target = ObjectRef::of(value)?;
        let json = serde_json::value::to_raw_value(value).map_err(TextError::Object)?;
        Ok(Self { target, json })
    }

    /// An object built in process by code that knows what it names: a native controller
    /// (the dispatch benchmark's twin of a plugin). Nothing is checked; a plugin's text
    /// always goes through [`parse`](Self::parse), whose identity the grant check uses.
    pub fn with_target(target: ObjectRef, json: Json) -> Self {
        Self { target, json }
    }

    /// The object it names.
    pub fn target(&self) -> &ObjectRef {
        &self.target
    }

    /// The text as the plugin sent it.
    pub fn json(&self) -> &RawValue {
        &self.json
    }

    /// The text, to send as a request body.
    pub fn into_json(self) -> Json {
        self.json
    }

    /// The object as a tree.
    pub fn to_value(&self) -> Value {
        // Checked to be a JSON object when it was made, so it parses.
        serde_json::from_str(self.json.get()).unwrap_or(Value::Null)
    }
}

/// A patch body of `kind` (the WIT `patch-body` case) as sent: checked to be JSON, and for a
/// JSON patch, to be a list of operations (kube's request type holds them decoded).
pub fn parse_patch(kind: PatchKind, text: String) -> Result<Patch<Json>, TextError> {
    if kind == PatchKind::Json {
        let ops: json_patch::Patch = serde_json::from_str(&text).map_err(TextError::JsonPatch)?;
        return Ok(Patch::Json(ops));
    }
    let json = RawValue::from_string(text).map_err(TextError::Patch)?;
    Ok(match kind {
        PatchKind::Merge => Patch::Merge(json),
        PatchKind::Strategic => Patch::Strategic(json),
        PatchKind::Apply | PatchKind::Json => Patch::Apply(json),
    })
}

/// `patch`, applying only while the object is at `resource_version` (a checked token): the
/// API server refuses a patch whose result names another resourceVersion than the stored one
/// with 409 Conflict. A merge, strategic-merge or apply patch gets `metadata.resourceVersion`
/// set (replacing one the plugin set); a JSON patch gets a last `replace` of
/// `/metadata/resourceVersion` (a `test` would fail with 422, which reads as a bad request).
pub fn guarded(patch: Patch<Json>, resource_version: &str) -> Result<Patch<Json>, TextError> {
    if let Patch::Json(mut ops) = patch {
        let op = serde_json::json!({
            "op": "replace", "path": "/metadata/resourceVersion", "value": resource_version,
        });
        ops.0
            .push(serde_json::from_value(op).map_err(TextError::JsonPatch)?);
        return Ok(Patch::Json(ops));
    }
    let mut tree = patch_value(&patch)?;
    let (Patch::Merge(body) | Patch::Strategic(body) | Patch::Apply(body)) = &mut tree else {
        unreachable!("JSON patches returned above, and patch_value makes no other kind");
    };
    let Value::Object(body) = body else {
        return Err(TextError::GuardNotAnObject);
    };
    let metadata = body
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()));
    if !metadata.is_object() {
        return Err(TextError::GuardNotAnObject);
    }
    metadata["resourceVersion"] = Value::String(resource_version.to_owned());
    patch_json(tree)
}

/// The kinds of patch body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// JSON merge patch (RFC 7386).
    Merge,
    /// Kubernetes strategic merge patch.
    Strategic,
    /// Server-side apply.
    Apply,
    /// JSON patch (RFC 6902).
    Json,
}

/// `patch` with its body as a tree (for implementations that apply patches themselves).
pub fn patch_value(patch: &Patch<Json>) -> Result<Patch<Value>, TextError> {
    let tree = |json: &Json| serde_json::from_str::<Value>(json.get()).map_err(TextError::Patch);
    Ok(match patch {
        Patch::Apply(json) => Patch::Apply(tree(json)?),
        Patch::Merge(json) => Patch::Merge(tree(json)?),
        Patch::Strategic(json) => Patch::Strategic(tree(json)?),
        Patch::Json(ops) => Patch::Json(ops.clone()),
        #[allow(unreachable_patterns)]
        _ => {
            return Err(TextError::Patch(de::Error::custom(
                "unsupported patch type",
            )));
        }
    })
}

/// `value` as a patch body.
pub fn patch_json(patch: Patch<Value>) -> Result<Patch<Json>, TextError> {
    let text = |value: &Value| serde_json::value::to_raw_value(value).map_err(TextError::Patch);
    Ok(match patch {
        Patch::Apply(v) => Patch::Apply(text(&v)?),
        Patch::Merge(v) => Patch::Merge(text(&v)?),
        Patch::Strategic(v) => Patch::Strategic(text(&v)?),
        Patch::Json(ops) => Patch::Json(ops),
        #[allow(unreachable_patterns)]
        _ => {
            return Err(TextError::Patch(de::Error::custom(
                "unsupported patch type",
            )));
        }
    })
}

/// The fields [`ObjectRef::of`] reads, borrowed from the text where it has no escapes.
/// Anything but a JSON object reads as "not an object"; fields of another type than a string
/// read as missing, and a repeated key's last value wins, as with a `Value`.
enum Identity<'a> {
    NotAnObject,
    Object {
        api_version: Option<Cow<'a, str>>,
        kind: Option<Cow<'a, str>>,
        name: Option<Cow<'a, str>>,
        namespace: Option<Cow<'a, str>>,
    },
}

impl Identity<'_> {
    fn target(self) -> Result<ObjectRef, IdentityError> {
        fn given<'s>(
            v: &'s Option<Cow<'_, str>>,
            field: &'static str,
        ) -> Result<&'s str, IdentityError> {
            v.as_deref()
                .filter(|s| !s.is_empty())
                .ok_or(IdentityError::Missing(field))
        }
        let Identity::Object {
            api_version,
            kind,
            name,
            namespace,
        } = self
        else {
            return Err(IdentityError::NotAnObject);
        };
        let api_version = given(&api_version, "apiVersion")?;
        let kind = given(&kind, "kind")?;
        let name = given(&name, "metadata.name")?;
        ObjectRef::identified(api_version, kind, namespace.as_deref(), name)
    }
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for Identity<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(IdentityVisitor { metadata: false })
    }
}

/// Reads the top level (`metadata: false`) or the `metadata` object (`true`: only `name`
/// and `namespace`, returned in the same shape).
struct IdentityVisitor {
    metadata: bool,
}

impl<'de> Visitor<'de> for IdentityVisitor {
    type Value = Identity<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut api_version, mut kind, mut name, mut namespace) = (None, None, None, None);
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match (self.metadata, key.as_ref()) {
                (false, "apiVersion") => api_version = map.next_value::<Text<'de>>()?.0,
                (false, "kind") => kind = map.next_value::<Text<'de>>()?.0,
                (false, "metadata") => {
                    let meta = map.next_value_seed(MetadataSeed)?;
                    if let Identity::Object {
                        name: n,
                        namespace: ns,
                        ..
                    } = meta
                    {
                        (name, namespace) = (n, ns);
                    } else {
                        (name, namespace) = (None, None);
                    }
                }
                (true, "name") => name = map.next_value::<Text<'de>>()?.0,
                (true, "namespace") => namespace = map.next_value::<Text<'de>>()?.0,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Identity::Object {
            api_version,
            kind,
            name,
            namespace,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Identity::NotAnObject)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Identity::NotAnObject)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Identity::NotAnObject)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Identity::NotAnObject)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Identity::NotAnObject)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Identity::NotAnObject)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Identity::NotAnObject)
    }
}

/// Reads a `metadata` value with [`IdentityVisitor`] in its metadata mode.
struct MetadataSeed;

impl<'de> de::DeserializeSeed<'de> for MetadataSeed {
    type Value = Identity<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(IdentityVisitor { metadata: true })
    }
}

/// A string field's text, or `None` for a value of any other type (which is consumed).
struct Text<'a>(Option<Cow<'a, str>>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Text(Some(Cow::Owned(v.to_owned()))))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Text(Some(Cow::Owned(v))))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Text(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Text(None))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Text(None))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Text(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Text(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Text(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Text(None))
            }
        }
        deserializer.deserialize_any(TextVisitor)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_guarded_patch_names_the_resource_version_the_server_checks() {
        use super::{PatchKind, guarded, parse_patch, patch_value};
        let merge =
            parse_patch(PatchKind::Merge, r#"{"status":{"ready":true}}"#.into()).expect("patch");
        let Ok(super::Patch::Merge(body)) = patch_value(&guarded(merge, "42").expect("guard"))
        else {
            panic!("a merge patch stays one");
        };
        assert_eq!(
            body,
            serde_json::json!({"status": {"ready": true}, "metadata": {"resourceVersion": "42"}})
        );
        let json = parse_patch(
            PatchKind::Json,
            r#"[{"op":"add","path":"/spec/x","value":1}]"#.into(),
        )
        .expect("patch");
        let Ok(super::Patch::Json(ops)) = guarded(json, "42") else {
            panic!("a JSON patch stays one");
        };
        assert_eq!(
            serde_json::to_value(&ops).expect("ops")[1],
            serde_json::json!({"op": "replace", "path": "/metadata/resourceVersion", "value": "42"})
        );
        let list = parse_patch(PatchKind::Merge, "[1]".into()).expect("JSON");
        assert!(guarded(list, "42").is_err(), "a list has no metadata");
        let odd = parse_patch(PatchKind::Apply, r#"{"metadata":"x"}"#.into()).expect("JSON");
        assert!(
            guarded(odd, "42").is_err(),
            "a metadata that is not an object"
        );
    }

    use super::*;
    use serde_json::json;

    /// `ObjectText::parse` must name exactly what `ObjectRef::of` names, and refuse exactly
    /// what it refuses, with the same message.
    #[test]
    fn parsing_text_identifies_objects_as_the_value_path_does() {
        let cases = [
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "web", "namespace": "prod", "labels": {"a": "b"}},
                   "spec": {"replicas": 2, "template": {"metadata": {"name": "inner"}}}}),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "a", "namespace": ""}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "n"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": "nope"}),
            json!({"apiVersion": "v1", "kind": 7, "metadata": {"name": "a"}}),
            json!({"apiVersion": "", "kind": "ConfigMap", "metadata": {"name": "a"}}),
            json!({"apiVersion": "a/b/c", "kind": "ConfigMap", "metadata": {"name": "a"}}),
            json!({"kind": "ConfigMap", "metadata": {"name": "a"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": ["a"]}}),
            json!([1, 2]),
            json!("text"),
            json!(null),
        ];
        for value in cases {
            let expected = ObjectRef::of(&value).map_err(|e| e.to_string());
            let parsed = ObjectText::parse(value.to_string())
                .map(|o| o.target().clone())
                .map_err(|e| e.to_string());
            assert_eq!(parsed, expected, "{value}");
        }
    }

    #[test]
    fn the_text_is_kept_as_sent_and_escaped_names_are_decoded() {
        let text = r#"{ "kind":"ConfigMap","apiVersion":"v1",
            "metadata":{"name":"a\u0062","namespace":"n"}, "data":{"k":"v"} }"#;
        let object = ObjectText::parse(text.to_owned()).expect("parses");
        assert_eq!(object.json().get(), text);
        assert_eq!(object.target().to_string(), "v1 ConfigMap n/ab");
        assert_eq!(object.to_value()["data"], json!({"k": "v"}));
    }

    #[test]
    fn a_repeated_key_counts_with_its_last_value_as_in_a_value() {
        let text =
            r#"{"apiVersion":"v1","kind":"Secret","kind":"ConfigMap","metadata":{"name":"a"}}"#;
        let object = ObjectText::parse(text.to_owned()).expect("parses");
        let value: Value = serde_json::from_str(text).expect("json");
        assert_eq!(object.target(), &ObjectRef::of(&value).expect("identified"));
    }

    #[test]
    fn malformed_text_is_refused_as_invalid_json() {
        for text in [
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}"#,
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}} trailing"#,
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"x":"\q"}"#,
            "",
        ] {
            let error = ObjectText::parse(text.to_owned()).expect_err(text);
            assert!(
                error
                    .to_string()
                    .starts_with("the object is not valid JSON: "),
                "{text}: {error}"
            );
        }
    }

    #[test]
    fn patches_are_checked_and_kept_as_sent() {
        let merge =
            parse_patch(PatchKind::Merge, r#"{"data": {"k": null}}"#.to_owned()).expect("merge");
        let Patch::Merge(json) = &merge else {
            panic!("a merge patch");
        };
        assert_eq!(json.get(), r#"{"data": {"k": null}}"#);
        let request = kube_core::Request::new("/api/v1/namespaces/n/configmaps")
            .patch("a", &kube_core::params::PatchParams::default(), &merge)
            .expect("request");
        assert_eq!(request.body().as_slice(), br#"{"data": {"k": null}}"#);
        let error = parse_patch(PatchKind::Strategic, "{".to_owned()).expect_err("bad");
        assert!(
            error.to_string().starts_with("the patch is not valid JSON"),
            "{error}"
        );
        let error = parse_patch(PatchKind::Json, r#"{"op": "add"}"#.to_owned()).expect_err("bad");
        assert!(
            error
                .to_string()
                .starts_with("the patch is not a valid JSON patch"),
            "{error}"
        );
        let ops = parse_patch(
            PatchKind::Json,
            r#"[{"op": "remove", "path": "/data/k"}]"#.to_owned(),
        )
        .expect("json patch");
        assert!(matches!(ops, Patch::Json(_)));
        let tree = patch_value(&merge).expect("tree");
        assert!(matches!(tree, Patch::Merge(v) if v == json!({"data": {"k": null}})));
    }
}
