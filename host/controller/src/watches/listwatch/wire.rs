//! What the API server sends a list-watch, read one item at a time: a watch line as its type
//! and object ([`decode_event`], [`event`]), a list page as its items ([`raw_page`], [`page`]),
//! each object decoded on its own so that one that does not decode is skipped and reported
//! rather than failing the line or the page.

use std::borrow::Cow;

use kube::api::TypeMeta;
use kube::runtime::watcher::Event;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::super::CachedObject;
use super::super::decoded::{self, DecodeError, Identity, Watched};
use super::super::skipped::{self, Skipped};
use super::ListWatchError;

/// One watch event with its object decoded (see [`decode_event`]).
pub struct DecodedEvent<'a> {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    pub(crate) kind: Cow<'a, str>,
    /// The object, or why it does not decode.
    pub object: Result<Watched, DecodeError>,
}

/// Reads one line of a watch: in one pass when its object decodes the ordinary way (what
/// kube's `WatchEvent` cost), else with the object read apart as a raw value and then decoded
/// at any depth.
pub fn decode_event(line: &str) -> Result<DecodedEvent<'_>, ListWatchError> {
    if let Some((kind, watched)) = decoded::decode_event(line) {
        return Ok(DecodedEvent {
            kind,
            object: Ok(watched),
        });
    }
    let envelope = raw_event(line)?;
    Ok(DecodedEvent {
        object: decoded::decode(envelope.object.get()),
        kind: envelope.kind,
    })
}

/// One line of a watch: its change, if it is one the cache takes.
pub(crate) fn event(
    line: &str,
    rv: &mut String,
    types: &TypeMeta,
    skipped: &Skipped,
) -> Result<Option<Event<CachedObject>>, ListWatchError> {
    let malformed = |source| ListWatchError::Malformed {
        what: "watch event",
        source,
    };
    let decoded = decode_event(line)?;
    match decoded.kind.as_ref() {
        "ADDED" | "MODIFIED" | "DELETED" => {
            let deleted = decoded.kind == "DELETED";
            let cached = decoded.object.and_then(|watched| {
                let version = watched.identity().resource_version.clone();
                CachedObject::from_decoded(watched, types).map(|obj| (obj, version))
            });
            match cached {
                Ok((obj, version)) => {
                    *rv = version
                        .filter(|v| !v.is_empty())
                        .ok_or(ListWatchError::NoResourceVersion)?;
                    Ok(Some(if deleted {
                        Event::Delete(obj)
                    } else {
                        Event::Apply(obj)
                    }))
                }
                Err(error) => {
                    // The object's text, for its identity and the report (a rare path: read
                    // the line again).
                    let text = raw_event(line)?.object.get();
                    skipped.report(types, text, &error);
                    let identity = Identity::read(text);
                    if let Some(v) = identity
                        .as_ref()
                        .and_then(|i| i.resource_version.clone())
                        .filter(|v| !v.is_empty())
                    {
                        *rv = v;
                    }
                    // A deletion still removes the object: the cache needs only its key.
                    Ok(identity
                        .filter(|_| deleted)
                        .and_then(|i| key_only(&i, types))
                        .map(Event::Delete))
                }
            }
        }
        "BOOKMARK" => {
            let version = match decoded.object {
                Ok(watched) => watched.identity.resource_version,
                Err(_) => {
                    Identity::read(raw_event(line)?.object.get()).and_then(|i| i.resource_version)
                }
            };
            if let Some(v) = version.filter(|v| !v.is_empty()) {
                *rv = v;
            }
            Ok(None)
        }
        "ERROR" => {
            let status: WatchStatus = serde_json::from_str(raw_event(line)?.object.get())
                .map_err(|e| malformed(DecodeError::describe(&e)))?;
            Err(ListWatchError::Status {
                code: status.code,
                message: status.message,
            })
        }
        _ => Ok(None),
    }
}

/// An object holding only `identity`'s name and namespace, to remove it from the cache.
fn key_only(identity: &Identity, types: &TypeMeta) -> Option<CachedObject> {
    let mut meta = serde_json::Map::new();
    meta.insert("name".into(), identity.name.clone()?.into());
    for (key, value) in [
        ("namespace", &identity.namespace),
        ("uid", &identity.uid),
        ("resourceVersion", &identity.resource_version),
    ] {
        if let Some(v) = value {
            meta.insert(key.into(), v.clone().into());
        }
    }
    let text = serde_json::json!({ "metadata": meta }).to_string();
    CachedObject::decode(&text, types).ok()
}

/// One watch event as the API server sends it, its object not yet read.
#[derive(Deserialize)]
pub(crate) struct RawEvent<'a> {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    #[serde(rename = "type", borrow)]
    pub(crate) kind: Cow<'a, str>,
    /// The object (or the `Status` of an `ERROR`), as a slice of the line.
    #[serde(borrow)]
    pub(crate) object: &'a RawValue,
}

/// Reads one line of a watch as its type and its undecoded object: serde_json skips the
/// object without recursing into it.
pub(crate) fn raw_event(line: &str) -> Result<RawEvent<'_>, ListWatchError> {
    serde_json::from_str(line).map_err(|e| ListWatchError::Malformed {
        what: "watch event",
        source: DecodeError::describe(&e),
    })
}

/// The `Status` of an `ERROR` event: the fields the loop acts on.
#[derive(Deserialize)]
struct WatchStatus {
    #[serde(default)]
    code: u16,
    #[serde(default)]
    message: String,
}

/// One list page's objects (those that decode) and where the list goes on.
#[derive(Debug)]
pub(crate) struct Page {
    /// The objects that decoded, in order.
    pub(crate) objects: Vec<CachedObject>,
    /// The list's resourceVersion.
    pub(crate) resource_version: Option<String>,
    /// The token for the next page, if there is one.
    pub(crate) continue_token: Option<String>,
}

/// One list page as the API server sends it, its items not yet read.
#[derive(Deserialize)]
pub struct RawPage<'a> {
    /// The list's resourceVersion and continue token.
    #[serde(default)]
    metadata: ListMeta,
    /// Each item as a slice of the page (none: the server sent `null`).
    #[serde(borrow, default)]
    pub items: Option<Vec<&'a RawValue>>,
}

#[derive(Deserialize, Default)]
struct ListMeta {
    #[serde(rename = "resourceVersion", default)]
    resource_version: Option<String>,
    #[serde(rename = "continue", default)]
    continue_token: Option<String>,
}

/// Reads the list page `text` as its items, undecoded: serde_json skips each without
/// recursing into it.
pub fn raw_page(text: &str) -> Result<RawPage<'_>, ListWatchError> {
    serde_json::from_str(text).map_err(|e| ListWatchError::Malformed {
        what: "list page",
        source: DecodeError::describe(&e),
    })
}

/// Reads the list page `text`: each item on its own, those that do not decode skipped and
/// reported to `skipped` (none: only logged, without their content).
pub(crate) fn page(
    text: &str,
    types: &TypeMeta,
    skipped: Option<&Skipped>,
) -> Result<Page, ListWatchError> {
    let raw = raw_page(text)?;
    let items = raw.items.unwrap_or_default();
    let mut objects = Vec::with_capacity(items.len());
    for item in items {
        match CachedObject::decode(item.get(), types) {
            Ok(obj) => objects.push(obj),
            Err(error) => match skipped {
                Some(skipped) => {
                    skipped.report(types, item.get(), &error);
                }
                None => skipped::log(types, item.get(), &error),
            },
        }
    }
    Ok(Page {
        objects,
        resource_version: raw.metadata.resource_version.filter(|v| !v.is_empty()),
        continue_token: raw.metadata.continue_token.filter(|t| !t.is_empty()),
    })
}
