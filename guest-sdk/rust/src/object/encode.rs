//! Writing a typed object as the JSON text the host expects: `apiVersion` and `kind` from the
//! type, first, then the object's own fields, straight from `T` into text.
//!
//! Going through a `serde_json::Value` first (serialize into a tree of `BTreeMap`s, insert
//! `apiVersion` and `kind`, write the tree, drop it) was a large share of a guest's time in
//! the dispatch benchmark: every key allocated and inserted into a map, every node freed
//! again. [`TypeMetaFirst`] instead wraps the JSON serializer: for a struct or map it opens
//! the object, writes `T`'s `apiVersion` and `kind`, then forwards the fields, leaving out
//! any `apiVersion` or `kind` the type writes itself (k8s-openapi types do, CRD types usually
//! do not), so the text never has a key twice.

use std::cell::Cell;
use std::fmt;

use serde::Serialize;
use serde::ser::{self, Impossible, SerializeMap, SerializeStruct, Serializer};

use crate::error::Error;
use crate::object::{self, Object};

/// Encodes `object` as the JSON the host expects, with `apiVersion` and `kind` set from `T`
/// (CRD types usually do not carry those fields themselves) and written first.
pub(crate) fn encode<T: Object>(object: &T) -> Result<String, Error> {
    let other_shape = Cell::new(false);
    let typed = WithTypeMeta {
        object,
        api_version: object::api_version::<T>(),
        kind: object::kind::<T>(),
        other_shape: &other_shape,
    };
    match serde_json::to_string(&typed) {
        Ok(json) => Ok(json),
        // Not a struct or a map: nothing was written yet. serde_json makes an object of
        // an enum variant too (`{"Variant": ...}`), and of nothing else; the general path
        // gives the same answer as always for every such shape.
        Err(_) if other_shape.get() => encode_value(object),
        Err(source) => Err(Error::Encode {
            kind: object::kind::<T>(),
            source,
        }),
    }
}

/// The general path: `object` as a `Value`, with `apiVersion` and `kind` inserted. Taken
/// only for types that serialize as neither a struct nor a map.
fn encode_value<T: Object>(object: &T) -> Result<String, Error> {
    // Through text, with the serializer `encode` uses: `serde_json::to_value` would compile
    // every `Serialize` impl under `T` a second time, for a path that is almost never taken.
    let encode_error = |source| Error::Encode {
        kind: object::kind::<T>(),
        source,
    };
    let text = serde_json::to_string(object).map_err(encode_error)?;
    let mut value: serde_json::Value = serde_json::from_str(&text).map_err(encode_error)?;
    match value.as_object_mut() {
        Some(map) => {
            map.insert("apiVersion".into(), object::api_version::<T>().into());
            map.insert("kind".into(), object::kind::<T>().into());
        }
        None => {
            return Err(Error::NotAnObject {
                kind: object::kind::<T>(),
            });
        }
    }
    Ok(json_text(&value))
}

/// `value` as JSON text. `Value`'s `Display` goes through `fmt` adapters that cost about
/// twice as much as writing into a buffer, which is what this does.
pub(crate) fn json_text(value: &serde_json::Value) -> String {
    // A `Value` always serializes (its map keys are strings); the fallback is never taken.
    serde_json::to_string(value).unwrap_or_else(|_| value.to_string())
}

/// The keys [`TypeMetaFirst`] writes itself.
fn is_type_meta(key: &str) -> bool {
    key == "apiVersion" || key == "kind"
}

/// `object`, serialized through [`TypeMetaFirst`].
struct WithTypeMeta<'a, T> {
    object: &'a T,
    api_version: &'static str,
    kind: &'static str,
    other_shape: &'a Cell<bool>,
}

impl<T: Serialize> Serialize for WithTypeMeta<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.object.serialize(TypeMetaFirst {
            inner: serializer,
            api_version: self.api_version,
            kind: self.kind,
            other_shape: self.other_shape,
        })
    }
}

/// A serializer for a top-level object: a struct or map becomes a JSON object that starts
/// with `apiVersion` and `kind`; a newtype or `Some` passes through to what it wraps. Any
/// other shape fails at once, before anything is written, and sets `other_shape`.
struct TypeMetaFirst<'a, S> {
    inner: S,
    api_version: &'static str,
    kind: &'static str,
    other_shape: &'a Cell<bool>,
}

impl<S: Serializer> TypeMetaFirst<'_, S> {
    fn other_shape<R>(self) -> Result<R, S::Error> {
        self.other_shape.set(true);
        Err(ser::Error::custom("not a struct or a map"))
    }
}

/// Serializer methods for the shapes [`TypeMetaFirst`] does not write.
macro_rules! other_shapes {
    ($($method:ident($($arg:ty),*) -> $ok:ty;)*) => {$(
        fn $method(self, $(_: $arg),*) -> Result<$ok, Self::Error> {
            self.other_shape()
        }
    )*};
}

impl<S: Serializer> Serializer for TypeMetaFirst<'_, S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = Impossible<S::Ok, S::Error>;
    type SerializeTuple = Impossible<S::Ok, S::Error>;
    type SerializeTupleStruct = Impossible<S::Ok, S::Error>;
    type SerializeTupleVariant = Impossible<S::Ok, S::Error>;
    type SerializeMap = TypeMetaMap<S::SerializeMap>;
    type SerializeStruct = TypeMetaStruct<S::SerializeStruct>;
    type SerializeStructVariant = Impossible<S::Ok, S::Error>;

    other_shapes! {
        serialize_bool(bool) -> S::Ok;
        serialize_i8(i8) -> S::Ok;
        serialize_i16(i16) -> S::Ok;
        serialize_i32(i32) -> S::Ok;
        serialize_i64(i64) -> S::Ok;
        serialize_i128(i128) -> S::Ok;
        serialize_u8(u8) -> S::Ok;
        serialize_u16(u16) -> S::Ok;
        serialize_u32(u32) -> S::Ok;
        serialize_u64(u64) -> S::Ok;
        serialize_u128(u128) -> S::Ok;
        serialize_f32(f32) -> S::Ok;
        serialize_f64(f64) -> S::Ok;
        serialize_char(char) -> S::Ok;
        serialize_str(&str) -> S::Ok;
        serialize_bytes(&[u8]) -> S::Ok;
        serialize_none() -> S::Ok;
        serialize_unit() -> S::Ok;
        serialize_unit_struct(&'static str) -> S::Ok;
        serialize_unit_variant(&'static str, u32, &'static str) -> S::Ok;
        serialize_seq(Option<usize>) -> Self::SerializeSeq;
        serialize_tuple(usize) -> Self::SerializeTuple;
        serialize_tuple_struct(&'static str, usize) -> Self::SerializeTupleStruct;
        serialize_tuple_variant(&'static str, u32, &'static str, usize)
            -> Self::SerializeTupleVariant;
        serialize_struct_variant(&'static str, u32, &'static str, usize)
            -> Self::SerializeStructVariant;
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<S::Ok, S::Error> {
        self.other_shape()
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<S::Ok, S::Error> {
        value.serialize(self)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<S::Ok, S::Error> {
        value.serialize(self)
    }

    fn serialize_map(self, len: Option<usize>) -> Result<Self::SerializeMap, S::Error> {
        // Never a length of 0: serde_json closes an object announced as empty at once.
        let mut map = self.inner.serialize_map(len.map(|n| n.saturating_add(2)))?;
        map.serialize_entry("apiVersion", self.api_version)?;
        map.serialize_entry("kind", self.kind)?;
        Ok(TypeMetaMap {
            inner: map,
            skip_value: false,
        })
    }

    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStruct, S::Error> {
        let mut object = self.inner.serialize_struct(name, len.saturating_add(2))?;
        object.serialize_field("apiVersion", self.api_version)?;
        object.serialize_field("kind", self.kind)?;
        Ok(TypeMetaStruct { inner: object })
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// A struct's fields after `apiVersion` and `kind`, without the type's own copies of them.
struct TypeMetaStruct<S> {
    inner: S,
}

impl<S: SerializeStruct> SerializeStruct for TypeMetaStruct<S> {
    type Ok = S::Ok;
    type Error = S::Error;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), S::Error> {
        if is_type_meta(key) {
            return Ok(());
        }
        self.inner.serialize_field(key, value)
    }

    fn skip_field(&mut self, key: &'static str) -> Result<(), S::Error> {
        self.inner.skip_field(key)
    }

    fn end(self) -> Result<S::Ok, S::Error> {
        self.inner.end()
    }
}

/// A map's entries after `apiVersion` and `kind`, without the type's own copies of them
/// (a struct with a `#[serde(flatten)]` field serializes as a map).
struct TypeMetaMap<M> {
    inner: M,
    /// The last key was left out, so its value is too.
    skip_value: bool,
}

impl<M: SerializeMap> SerializeMap for TypeMetaMap<M> {
    type Ok = M::Ok;
    type Error = M::Error;

    fn serialize_key<K: Serialize + ?Sized>(&mut self, key: &K) -> Result<(), M::Error> {
        self.skip_value = names_type_meta(key);
        if self.skip_value {
            return Ok(());
        }
        self.inner.serialize_key(key)
    }

    fn serialize_value<V: Serialize + ?Sized>(&mut self, value: &V) -> Result<(), M::Error> {
        if std::mem::take(&mut self.skip_value) {
            return Ok(());
        }
        self.inner.serialize_value(value)
    }

    fn serialize_entry<K: Serialize + ?Sized, V: Serialize + ?Sized>(
        &mut self,
        key: &K,
        value: &V,
    ) -> Result<(), M::Error> {
        if names_type_meta(key) {
            return Ok(());
        }
        self.inner.serialize_entry(key, value)
    }

    fn end(self) -> Result<M::Ok, M::Error> {
        self.inner.end()
    }
}

/// True when the map key `key` is the string `apiVersion` or `kind`. Any other key, string or
/// not, goes to the JSON serializer, which writes it or reports why it cannot be a key.
fn names_type_meta<K: Serialize + ?Sized>(key: &K) -> bool {
    key.serialize(TypeMetaKey).unwrap_or(false)
}

/// Answers whether a key is `apiVersion` or `kind`; fails for anything but a string (or a
/// newtype around one), which is then not one of them.
struct TypeMetaKey;

/// A key that is not a string.
#[derive(Debug)]
struct NotAString;

impl fmt::Display for NotAString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a string")
    }
}

impl std::error::Error for NotAString {}

impl ser::Error for NotAString {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Self
    }
}

/// Serializer methods of [`TypeMetaKey`] for keys that are not strings.
macro_rules! not_a_string {
    ($($method:ident($($arg:ty),*) -> $ok:ty;)*) => {$(
        fn $method(self, $(_: $arg),*) -> Result<$ok, NotAString> {
            Err(NotAString)
        }
    )*};
}

impl Serializer for TypeMetaKey {
    type Ok = bool;
    type Error = NotAString;
    type SerializeSeq = Impossible<bool, NotAString>;
    type SerializeTuple = Impossible<bool, NotAString>;
    type SerializeTupleStruct = Impossible<bool, NotAString>;
    type SerializeTupleVariant = Impossible<bool, NotAString>;
    type SerializeMap = Impossible<bool, NotAString>;
    type SerializeStruct = Impossible<bool, NotAString>;
    type SerializeStructVariant = Impossible<bool, NotAString>;

    fn serialize_str(self, key: &str) -> Result<bool, NotAString> {
        Ok(is_type_meta(key))
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<bool, NotAString> {
        value.serialize(self)
    }

    not_a_string! {
        serialize_bool(bool) -> bool;
        serialize_i8(i8) -> bool;
        serialize_i16(i16) -> bool;
        serialize_i32(i32) -> bool;
        serialize_i64(i64) -> bool;
        serialize_u8(u8) -> bool;
        serialize_u16(u16) -> bool;
        serialize_u32(u32) -> bool;
        serialize_u64(u64) -> bool;
        serialize_f32(f32) -> bool;
        serialize_f64(f64) -> bool;
        serialize_char(char) -> bool;
        serialize_bytes(&[u8]) -> bool;
        serialize_none() -> bool;
        serialize_unit() -> bool;
        serialize_unit_struct(&'static str) -> bool;
        serialize_unit_variant(&'static str, u32, &'static str) -> bool;
        serialize_seq(Option<usize>) -> Self::SerializeSeq;
        serialize_tuple(usize) -> Self::SerializeTuple;
        serialize_tuple_struct(&'static str, usize) -> Self::SerializeTupleStruct;
        serialize_tuple_variant(&'static str, u32, &'static str, usize)
            -> Self::SerializeTupleVariant;
        serialize_map(Option<usize>) -> Self::SerializeMap;
        serialize_struct(&'static str, usize) -> Self::SerializeStruct;
        serialize_struct_variant(&'static str, u32, &'static str, usize)
            -> Self::SerializeStructVariant;
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<bool, NotAString> {
        Err(NotAString)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<bool, NotAString> {
        Err(NotAString)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde::{Deserialize, Serializer};
    use serde_json::{Value, json};

    use super::*;

    fn meta(name: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            labels: Some(BTreeMap::from([("app".into(), "web".into())])),
            ..ObjectMeta::default()
        }
    }

    /// `object` by the new path and by the `Value` path, each parsed back.
    fn both_paths<T: Object>(object: &T) -> (String, Value, Value) {
        let text = encode(object).expect("encodes");
        let new: Value = serde_json::from_str(&text).expect("valid JSON");
        let old: Value =
            serde_json::from_str(&encode_value(object).expect("encodes")).expect("valid JSON");
        (text, new, old)
    }

    fn count(text: &str, needle: &str) -> usize {
        text.matches(needle).count()
    }

    #[test]
    fn a_config_map_encodes_as_k8s_openapi_writes_it_with_one_api_version_and_kind() {
        let cm = ConfigMap {
            metadata: meta("settings"),
            data: Some(BTreeMap::from([("a".into(), "1".into())])),
            ..ConfigMap::default()
        };
        let (text, new, old) = both_paths(&cm);
        // k8s-openapi writes apiVersion and kind first itself: byte for byte the same.
        assert_eq!(text, serde_json::to_string(&cm).expect("serializes"));
        assert!(
            text.starts_with(r#"{"apiVersion":"v1","kind":"ConfigMap","#),
            "{text}"
        );
        assert_eq!(count(&text, "\"apiVersion\""), 1, "{text}");
        assert_eq!(count(&text, "\"kind\""), 1, "{text}");
        assert_eq!(new, old);
    }

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Gadget {
        metadata: ObjectMeta,
        spec: GadgetSpec,
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<GadgetStatus>,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct GadgetSpec {
        size: u32,
        #[serde(skip_serializing_if = "Vec::is_empty", default)]
        tags: Vec<String>,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct GadgetStatus {
        ready: bool,
    }

    crate::custom_resource!(
        Gadget,
        group = "example.com",
        version = "v1",
        kind = "Gadget",
        plural = "gadgets",
        namespaced
    );

    #[test]
    fn a_custom_type_gets_api_version_and_kind_first() {
        let gadget = Gadget {
            metadata: meta("g"),
            spec: GadgetSpec {
                size: 3,
                tags: Vec::new(),
            },
            status: None,
        };
        let (text, new, old) = both_paths(&gadget);
        assert_eq!(
            text,
            r#"{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"labels":{"app":"web"},"name":"g","namespace":"ns"},"spec":{"size":3}}"#
        );
        assert_eq!(new, old);
        // skip_serializing_if left out `status` and `tags`, as before.
        assert!(new.get("status").is_none() && new["spec"].get("tags").is_none());
    }

    /// A CRD type that carries its own (wrong) `apiVersion` and `kind`.
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Impostor {
        api_version: String,
        metadata: ObjectMeta,
        kind: String,
        size: u32,
    }

    crate::custom_resource!(
        Impostor,
        group = "example.com",
        version = "v2",
        kind = "Impostor",
        plural = "impostors",
        cluster
    );

    #[test]
    fn a_type_with_its_own_api_version_and_kind_fields_gets_the_types_once() {
        let impostor = Impostor {
            api_version: "wrong/v9".into(),
            metadata: meta("i"),
            kind: "Wrong".into(),
            size: 7,
        };
        let (text, new, old) = both_paths(&impostor);
        assert!(
            text.starts_with(r#"{"apiVersion":"example.com/v2","kind":"Impostor","#),
            "{text}"
        );
        assert_eq!(count(&text, "\"apiVersion\""), 1, "{text}");
        assert_eq!(count(&text, "\"kind\""), 1, "{text}");
        assert!(
            !text.contains("Wrong") && !text.contains("wrong/v9"),
            "{text}"
        );
        assert_eq!(new, old);
    }

    /// A CRD type that keeps unknown fields with `#[serde(flatten)]`, which makes serde write
    /// it as a map; the flattened fields may hold `apiVersion` and `kind`.
    #[derive(Serialize, Deserialize)]
    struct Loose {
        metadata: ObjectMeta,
        #[serde(skip_serializing_if = "Option::is_none")]
        spec: Option<Value>,
        #[serde(flatten)]
        rest: BTreeMap<String, Value>,
    }

    crate::custom_resource!(
        Loose,
        group = "example.com",
        version = "v1",
        kind = "Loose",
        plural = "looses",
        namespaced
    );

    #[test]
    fn flattened_fields_are_written_without_their_own_api_version_and_kind() {
        let loose = Loose {
            metadata: meta("l"),
            spec: None,
            rest: BTreeMap::from([
                ("apiVersion".into(), json!("other/v1")),
                ("data".into(), json!({"x": [1, 2]})),
                ("kind".into(), json!("Other")),
                ("zeta".into(), Value::Null),
            ]),
        };
        let (text, new, old) = both_paths(&loose);
        assert!(
            text.starts_with(r#"{"apiVersion":"example.com/v1","kind":"Loose","#),
            "{text}"
        );
        assert_eq!(count(&text, "\"apiVersion\""), 1, "{text}");
        assert_eq!(count(&text, "\"kind\""), 1, "{text}");
        assert_eq!(new, old);
        assert_eq!(new["data"], json!({"x": [1, 2]}));
        assert_eq!(new["zeta"], Value::Null);
        assert!(new.get("spec").is_none(), "{text}");
    }

    /// How [`Shaped`] serializes.
    #[derive(Default, Clone, Copy)]
    enum Shape {
        /// A map with its own `kind`, written entry by entry.
        #[default]
        Map,
        /// A map with no entries at all.
        EmptyMap,
        /// A newtype struct around a map.
        Newtype,
        /// `Some` around a map.
        Some,
        /// A string.
        Str,
        /// A list.
        Seq,
        /// An externally tagged enum variant, which serde_json writes as `{"Variant": ...}`.
        Variant,
        /// A map key that is neither a string nor a number.
        ListKey,
    }

    #[derive(Deserialize)]
    struct Shaped {
        metadata: ObjectMeta,
        #[serde(skip)]
        shape: Shape,
    }

    crate::custom_resource!(
        Shaped,
        group = "example.com",
        version = "v1",
        kind = "Shaped",
        plural = "shapeds",
        cluster
    );

    impl Serialize for Shaped {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            let entries = BTreeMap::from([("kind", json!("Wrong")), ("size", json!(1))]);
            match self.shape {
                Shape::Map => serializer.collect_map(&entries),
                Shape::EmptyMap => serializer.collect_map(BTreeMap::<String, u8>::new()),
                Shape::Newtype => serializer.serialize_newtype_struct("Shaped", &entries),
                Shape::Some => serializer.serialize_some(&entries),
                Shape::Str => serializer.serialize_str("shaped"),
                Shape::Seq => serializer.collect_seq([1, 2]),
                Shape::Variant => {
                    serializer.serialize_newtype_variant("Shaped", 0, "Inner", &entries)
                }
                Shape::ListKey => serializer.collect_map([(vec![1], 1)]),
            }
        }
    }

    fn shaped(shape: Shape) -> Shaped {
        Shaped {
            metadata: ObjectMeta::default(),
            shape,
        }
    }

    #[test]
    fn a_map_typed_object_gets_the_types_api_version_and_kind() {
        for shape in [Shape::Map, Shape::Newtype, Shape::Some] {
            let (text, new, old) = both_paths(&shaped(shape));
            assert_eq!(
                text,
                r#"{"apiVersion":"example.com/v1","kind":"Shaped","size":1}"#
            );
            assert_eq!(new, old);
        }
        let (text, new, old) = both_paths(&shaped(Shape::EmptyMap));
        assert_eq!(text, r#"{"apiVersion":"example.com/v1","kind":"Shaped"}"#);
        assert_eq!(new, old);
    }

    #[test]
    fn a_type_that_is_not_an_object_is_refused_by_kind() {
        for shape in [Shape::Str, Shape::Seq] {
            let err = encode(&shaped(shape)).expect_err("not an object");
            assert!(
                matches!(err, Error::NotAnObject { kind: "Shaped" }),
                "{err:?}"
            );
            assert_eq!(err.to_string(), "a Shaped must serialize to a JSON object");
        }
    }

    #[test]
    fn an_enum_variant_is_an_object_as_serde_json_makes_it() {
        let (text, new, old) = both_paths(&shaped(Shape::Variant));
        assert_eq!(new, old);
        assert_eq!(
            new,
            json!({"apiVersion": "example.com/v1", "kind": "Shaped",
                "Inner": {"kind": "Wrong", "size": 1}}),
            "{text}"
        );
    }

    #[test]
    fn a_key_json_cannot_write_is_an_encode_error_naming_the_kind() {
        let err = encode(&shaped(Shape::ListKey)).expect_err("a list is no key");
        assert!(
            matches!(err, Error::Encode { kind: "Shaped", .. }),
            "{err:?}"
        );
        let cause = std::error::Error::source(&err).expect("the serializer's error");
        assert!(
            cause.to_string().contains("key must be a string"),
            "{cause}"
        );
    }
}
