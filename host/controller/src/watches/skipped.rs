//! [`Skipped`]: what happens to an object a shared watch cannot decode — it is skipped,
//! counted, and reported once.
//!
//! Since the decoder reads any depth ([`super::decoded`]), such an object is one whose
//! metadata is not what the API server writes (a host bug, or an API server that is not
//! one). Whatever the cause, the watch must go on: one object must never stop a kind's cache
//! or the readiness of every plugin that watches it. So each skip:
//!
//! - is counted in `wasmop_watch_objects_skipped_total{kind}` (every time, also when a relist
//!   meets the object again);
//! - is reported once per object version (uid and resourceVersion): a log line naming the
//!   object and the problem without the object's content, and a Warning Event on the object
//!   when its identity can be read, reported by `wasmop/host`.
//!
//! What is remembered to report only once is bounded ([`REMEMBERED`]).

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::TypeMeta;

use super::decoded::{DecodeError, Identity};
use crate::events::{EventSink, Record};
use crate::metrics::Metrics;
use wasmop_core::cluster::EventType;

/// Object versions remembered as reported. 4,096 keys of a uid and a resourceVersion are
/// about 400 KiB at most; past that the oldest are forgotten, and an object skipped again
/// after thousands of others is reported again (a repeat, never a loss).
pub(crate) const REMEMBERED: usize = 4096;

/// The reporter Events about skipped objects are written as (`wasmop/host`).
pub(crate) const REPORTER: &str = "host";

/// Counts and reports skipped objects for every shared watch. Cheap to share behind an `Arc`.
pub struct Skipped {
    metrics: Metrics,
    events: Option<Arc<EventSink>>,
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    keys: HashSet<String>,
    order: VecDeque<String>,
}

impl Seen {
    /// Remembers `key`; false if it was remembered already.
    fn first(&mut self, key: String) -> bool {
        if self.keys.contains(&key) {
            return false;
        }
        if self.order.len() >= REMEMBERED
            && let Some(old) = self.order.pop_front()
        {
            self.keys.remove(&old);
        }
        self.keys.insert(key.clone());
        self.order.push_back(key);
        true
    }
}

impl Skipped {
    /// A reporter counting in `metrics` and writing Events to `events` (none: log only).
    pub fn new(metrics: Metrics, events: Option<Arc<EventSink>>) -> Self {
        Self {
            metrics,
            events,
            seen: Mutex::default(),
        }
    }

    /// Counts the object `text` of kind `types` as skipped for `error`, and reports it unless
    /// this version of it was reported already. Returns whether it was reported. Never
    /// waits: the Event is queued by a task of its own.
    pub(crate) fn report(&self, types: &TypeMeta, text: &str, error: &DecodeError) -> bool {
        let kind = format!("{}/{}", types.api_version, types.kind);
        self.metrics.watch_object_skipped(&kind);
        let identity = Identity::read(text);
        let key = match &identity {
            Some(Identity {
                uid: Some(uid),
                resource_version: Some(rv),
                ..
            }) => format!("{uid}/{rv}"),
            // No identity to key by: the text's hash stands for this version.
            _ => format!("#{:016x}", hash(text)),
        };
        let first = self
            .seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .first(format!("{kind}/{key}"));
        if !first {
            return false;
        }
        log_line(&kind, identity.as_ref(), text, error);
        if let (Some(events), Some(identity)) = (&self.events, identity)
            && identity.name.is_some()
        {
            let record = Record {
                note: format!(
                    "wasmop cannot decode this object ({error}); its watch skips this version \
                     and no plugin sees it"
                ),
                regarding: ObjectReference {
                    api_version: Some(types.api_version.clone()),
                    kind: Some(types.kind.clone()),
                    namespace: identity.namespace,
                    name: identity.name,
                    uid: identity.uid,
                    resource_version: identity.resource_version,
                    ..ObjectReference::default()
                },
                event_type: EventType::Warning,
                reason: "Undecodable".into(),
                action: "Watch".into(),
            };
            let events = events.clone();
            tokio::spawn(async move {
                events.publish(REPORTER, record).await;
            });
        }
        true
    }
}

/// Logs the object `text` of kind `types` as skipped for `error`, without its content, for
/// a reader that skips an object outside the shared watches (and reports nothing else).
pub(crate) fn log(types: &TypeMeta, text: &str, error: &DecodeError) {
    let kind = format!("{}/{}", types.api_version, types.kind);
    log_line(&kind, Identity::read(text).as_ref(), text, error);
}

/// The one log line of a skipped object: its kind, identity, size and the problem.
fn log_line(kind: &str, identity: Option<&Identity>, text: &str, error: &DecodeError) {
    let object = identity
        .filter(|i| i.name.is_some())
        .map_or_else(|| "<unreadable>".to_owned(), Identity::display_name);
    tracing::warn!(
        kind = %kind,
        object = %object,
        uid = identity.and_then(|i| i.uid.as_deref()),
        resource_version = identity.and_then(|i| i.resource_version.as_deref()),
        bytes = text.len(),
        %error,
        "object skipped: it cannot be decoded"
    );
}

fn hash(text: &str) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    BuildHasherDefault::<DefaultHasher>::default().hash_one(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_keys_are_forgotten_past_the_bound() {
        let mut seen = Seen::default();
        for i in 0..REMEMBERED {
            assert!(seen.first(i.to_string()));
        }
        assert!(!seen.first("0".into()));
        assert!(seen.first("new".into()));
        assert_eq!(seen.keys.len(), REMEMBERED);
        assert!(seen.first("0".into()), "forgotten, so reported again");
        assert!(!seen.first("new".into()));
    }
}
