//! [`Watched`]: how the host decodes an object the API server sends — trimmed (no
//! `managedFields`, no last-applied annotation) and without recursion, so that no object,
//! however deeply nested, fails to decode or stops what decodes it.
//!
//! The API server stores JSON nested up to 10,000 levels (its own limit); serde_json stops at
//! 128 levels (its recursion limit, there to protect the stack). [`decode`] reads an object in
//! two ways:
//!
//! - First as it always did: every top-level field as a `serde_json::Value`, with
//!   `managedFields` and the last-applied annotation passed over without building anything.
//!   Ordinary objects take only this path, so their text is what it was (keys in the order a
//!   `Value` writes them, strings escaped as serde_json escapes them).
//! - If that fails (in practice: a field nested deeper than 128 levels), again with every
//!   field but `metadata` read as a [`RawValue`] first: serde_json skips over a raw value
//!   iteratively, with no depth limit, so this reads any valid JSON. Each field is then kept
//!   as a `Value` when it can be, and as its text as sent otherwise. `metadata` itself is
//!   always read as values: the API server bounds its depth (labels and annotations are maps
//!   of strings, `managedFields`' deep `fieldsV1` is skipped), so an object whose metadata
//!   does not decode is one this host cannot use and is refused.
//!
//! An object that still does not decode gets a [`DecodeError`] that describes the problem
//! without quoting the object (serde_json's data errors quote the offending value), and its
//! identity can often still be read with [`Identity::read`], which skips everything but the
//! identity fields without recursing.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::LAST_APPLIED;

/// One object as the host decodes it: trimmed, not yet written as text.
#[derive(Clone, Debug)]
pub struct Watched {
    /// The object's name, namespace and resourceVersion (not its uid: nothing that decodes
    /// objects needs it, and it would cost an allocation per object on the watch path).
    pub(super) identity: Identity,
    /// Every top-level field, `metadata` trimmed, in the order a `Value` writes them.
    pub(super) fields: BTreeMap<String, Field>,
}

/// One top-level field of a [`Watched`] object.
#[derive(Clone, Debug)]
pub(crate) enum Field {
    /// Decoded: written back as serde_json writes a `Value`.
    Value(Value),
    /// Nested too deeply for a `Value`: kept as the text the API server sent.
    Raw(Box<RawValue>),
}

impl Serialize for Field {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Field::Value(v) => v.serialize(serializer),
            Field::Raw(r) => r.serialize(serializer),
        }
    }
}

/// The identity fields of an object's metadata.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Identity {
    /// `metadata.name`.
    #[serde(default)]
    pub(crate) name: Option<String>,
    /// `metadata.namespace`.
    #[serde(default)]
    pub(crate) namespace: Option<String>,
    /// `metadata.uid`.
    #[serde(default)]
    pub(crate) uid: Option<String>,
    /// `metadata.resourceVersion`.
    #[serde(default)]
    pub(crate) resource_version: Option<String>,
}

impl Identity {
    /// The identity of the object `text`, read without recursing into anything else (every
    /// other field is skipped iteratively); `None` if even that is unreadable.
    pub(crate) fn read(text: &str) -> Option<Identity> {
        #[derive(Deserialize)]
        struct Object {
            #[serde(default)]
            metadata: Identity,
        }
        serde_json::from_str::<Object>(text)
            .ok()
            .map(|o| o.metadata)
    }

    /// `namespace/name`, or `name` for a cluster-scoped object, for messages.
    pub(crate) fn display_name(&self) -> String {
        let name = self.name.as_deref().unwrap_or("<unnamed>");
        match &self.namespace {
            Some(ns) => format!("{ns}/{name}"),
            None => name.to_owned(),
        }
    }
}

/// Why an object cannot be decoded, told without quoting it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot decode the object: {description}")]
pub struct DecodeError {
    description: String,
}

impl DecodeError {
    /// `error` described without its content: serde_json's syntax errors are fixed texts with
    /// a position, but its data errors quote the value they refused (a whole string field,
    /// for one, or an unknown name in backquotes), which must not reach a log line or an
    /// Event: what is quoted is cut out, and the rest cut to [`MAX_DESCRIPTION`].
    pub(crate) fn describe(error: &serde_json::Error) -> Self {
        use serde_json::error::Category;
        let mut description = error.to_string();
        if error.classify() == Category::Data {
            for quote in ['"', '`'] {
                if let (Some(first), Some(last)) =
                    (description.find(quote), description.rfind(quote))
                    && first < last
                {
                    description.replace_range(first..=last, "…");
                }
            }
        }
        if description.len() > MAX_DESCRIPTION {
            let mut end = MAX_DESCRIPTION;
            while !description.is_char_boundary(end) {
                end -= 1;
            }
            description.truncate(end);
            description.push('…');
        }
        Self { description }
    }
}

/// The longest description of a decoding error: serde_json's own messages are far shorter;
/// this only bounds one that quotes something this module does not know to cut.
pub(crate) const MAX_DESCRIPTION: usize = 200;

/// Decodes the object `text`, trimmed, whatever its depth (see the module's documentation).
pub fn decode(text: &str) -> Result<Watched, DecodeError> {
    match serde_json::from_str::<Decoded>(text) {
        Ok(Decoded(watched)) => Ok(watched),
        Err(_) => decode_raw(text),
    }
}

/// One watch event's `type` and object in one pass over the line, the object read the first
/// way of [`decode`]: what ordinary events cost. `None` if that fails; the caller then reads
/// the event's object apart (`listwatch::wire::raw_event`) and decodes it.
pub(crate) fn decode_event(line: &str) -> Option<(Cow<'_, str>, Watched)> {
    #[derive(Deserialize)]
    struct WatchEvent<'a> {
        #[serde(rename = "type", borrow)]
        kind: Cow<'a, str>,
        object: Decoded,
    }
    serde_json::from_str::<WatchEvent<'_>>(line)
        .ok()
        .map(|e| (e.kind, e.object.0))
}

/// The object `text` decoded by [`decode`] and written back as text: trimmed, as it is,
/// without `apiVersion`/`kind` added (an API server's reply to a get or a write names them).
pub(crate) fn trimmed_text(text: &str) -> Result<String, DecodeError> {
    let watched = decode(text)?;
    serde_json::to_string(&watched.fields).map_err(|e| DecodeError::describe(&e))
}

/// The second way of [`decode`]: every field but `metadata` read as a raw value first.
fn decode_raw(text: &str) -> Result<Watched, DecodeError> {
    let RawObject(raw) =
        serde_json::from_str::<RawObject<'_>>(text).map_err(|e| DecodeError::describe(&e))?;
    let mut identity = Identity::default();
    let mut fields = BTreeMap::new();
    for (key, value) in raw {
        let field = match value {
            RawField::Metadata(m) => {
                identity = m.identity;
                Field::Value(Value::Object(m.fields))
            }
            RawField::Raw(raw) => match serde_json::from_str::<Value>(raw.get()) {
                Ok(value) => Field::Value(value),
                Err(_) => Field::Raw(raw.to_owned()),
            },
        };
        fields.insert(key, field);
    }
    Ok(Watched { identity, fields })
}

impl Watched {
    /// The object's identity.
    pub(crate) fn identity(&self) -> &Identity {
        &self.identity
    }

    /// The object's namespace and name, for messages.
    pub(crate) fn display_name(&self) -> String {
        self.identity.display_name()
    }
}

/// The first way of [`decode`]: every field as a `Value`.
struct Decoded(Watched);

impl<'de> Deserialize<'de> for Decoded {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ObjectVisitor).map(Decoded)
    }
}

struct ObjectVisitor;

impl<'de> Visitor<'de> for ObjectVisitor {
    type Value = Watched;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Watched, A::Error> {
        let mut fields = BTreeMap::new();
        let mut identity = Identity::default();
        while let Some(key) = map.next_key::<String>()? {
            if key == "metadata" {
                let m: Metadata = map.next_value()?;
                identity = m.identity;
                fields.insert(key, Field::Value(Value::Object(m.fields)));
            } else {
                let value: Value = map.next_value()?;
                fields.insert(key, Field::Value(value));
            }
        }
        Ok(Watched { identity, fields })
    }
}

/// An object read with every field but `metadata` as a raw slice of the text.
struct RawObject<'a>(Vec<(String, RawField<'a>)>);

enum RawField<'a> {
    Metadata(Metadata),
    Raw(&'a RawValue),
}

impl<'de> Deserialize<'de> for RawObject<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(RawObjectVisitor)
    }
}

struct RawObjectVisitor;

impl<'de> Visitor<'de> for RawObjectVisitor {
    type Value = RawObject<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawObject<'de>, A::Error> {
        let mut fields = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let field = if key == "metadata" {
                RawField::Metadata(map.next_value()?)
            } else {
                RawField::Raw(map.next_value()?)
            };
            fields.push((key, field));
        }
        Ok(RawObject(fields))
    }
}

/// An object's metadata without `managedFields` and the last-applied annotation (and without
/// `annotations` when that was all it held), plus its identity.
struct Metadata {
    fields: Map<String, Value>,
    identity: Identity,
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
        let mut identity = Identity::default();
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
mod tests;
