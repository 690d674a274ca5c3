//! Shared watches: one watch and one cache per kind (and namespace scope), however many
//! plugins need it.
//!
//! Each [`SharedWatch`] runs one list-then-watch loop ([`listwatch`], kube-runtime's
//! `watcher` rebuilt to decode each object on its own) whose objects are trimmed while they
//! are decoded (no `managedFields`, no last-applied annotation, at any depth: [`decoded`]),
//! get `apiVersion`/`kind` when they lack them, and are kept as [`CachedObject`]s (the JSON
//! text alone) before they reach its [`Store`] and its subscribers; the store, the broadcast
//! and the subscribers share one copy of each object. An object that cannot be decoded is
//! skipped, counted and reported once ([`skipped`]); the watch goes on.
//! A subscriber gets every object already in the cache and then every change; if it falls
//! behind the broadcast buffer it is sent the whole cache again (level-triggered consumers
//! lose nothing by that).
//!
//! The store is the host's own ([`store`]), not kube-runtime's reflector: the reflector keys
//! every object by an `ObjectRef` holding copies of its identity strings and needs an
//! `ObjectMeta` per object, which together cost more than a small object's text. What a
//! cached object costs now is its text, the allocator's chunk overhead and a table slot; see
//! [`cached`] and `cargo bench -p wasmop-controller --bench cache`.
//!
//! # Guarantees
//! - One API watch per [`WatchKey`] for the life of the process.
//! - A subscriber's stream never ends while the watch runs; watch errors are retried with
//!   kube's default backoff and logged.
//! - No object stops a watch or its readiness: each list item and watch event is decoded on
//!   its own, at any depth, and one that does not decode is skipped.

pub(crate) mod cached;
pub mod decoded;
pub mod listwatch;
pub(crate) mod skipped;
pub(crate) mod store;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::Stream;
use kube::Client;
use kube::api::{Api, DynamicObject, TypeMeta};
use kube::core::ApiResource;
use kube::runtime::watcher::Event;
use tokio::sync::{broadcast, watch};

pub use self::cached::{CachedObject, CachedObjectError, Kind};
pub(crate) use self::decoded::DecodeError;
pub use self::skipped::Skipped;
pub use self::store::{ObjectKey, Store, Writer};

use self::listwatch::ListWatch;
pub use wasmop_core::cluster::trim::{LAST_APPLIED, trim, trim_metadata, trim_value};

/// Changes buffered per watch for slow subscribers. 1024 covers a burst of a thousand
/// changes; a subscriber further behind is resent the whole cache instead.
const BROADCAST_BUFFER: usize = 1024;

/// What one shared watch covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct WatchKey {
    /// The kind.
    pub(crate) resource: ApiResource,
    /// `Some(ns)` to watch one namespace, `None` for all (and for cluster-scoped kinds).
    pub(crate) namespace: Option<String>,
}

/// One change seen by a watch.
#[derive(Debug, Clone)]
pub(crate) enum Change {
    /// An object was created or changed (or listed at start).
    Applied(CachedObject),
    /// An object was deleted.
    Deleted(CachedObject),
}

impl Change {
    /// The object concerned.
    pub(crate) fn object(&self) -> &CachedObject {
        match self {
            Change::Applied(o) | Change::Deleted(o) => o,
        }
    }
}

/// One running watch and its cache.
pub(crate) struct SharedWatch {
    store: Store,
    changes: broadcast::Sender<Change>,
    /// Becomes true once the initial list is in the cache.
    ready: watch::Receiver<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SharedWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl SharedWatch {
    fn start(client: Client, key: WatchKey, skipped: Arc<Skipped>) -> Self {
        let api: Api<DynamicObject> = match &key.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &key.resource),
            None => Api::all_with(client.clone(), &key.resource),
        };
        let mut writer = Writer::new();
        let store = writer.reader();
        let (changes, _) = broadcast::channel(BROADCAST_BUFFER);
        let types = TypeMeta {
            api_version: key.resource.api_version.clone(),
            kind: key.resource.kind.clone(),
        };
        let label = format!("{}/{}", key.resource.api_version, key.resource.plural);
        let scope = key.namespace.clone().unwrap_or_else(|| "*".into());
        let list_watch = ListWatch::new(
            client,
            api.resource_url().to_owned(),
            types,
            (label, scope),
            skipped,
        );
        let tx = changes.clone();
        let (ready_tx, ready) = watch::channel(false);
        let task = tokio::spawn(list_watch.run(move |event| {
            // Into the store first, so a subscriber that reads the store on a change finds
            // the object there.
            writer.apply_watcher_event(&event);
            match event {
                Event::Apply(obj) | Event::InitApply(obj) => {
                    let _ = tx.send(Change::Applied(obj));
                }
                Event::Delete(obj) => {
                    let _ = tx.send(Change::Deleted(obj));
                }
                Event::InitDone => {
                    ready_tx.send_replace(true);
                }
                Event::Init => {}
            }
        }));
        Self {
            store,
            changes,
            ready,
            task,
        }
    }

    /// The cache.
    pub(crate) fn store(&self) -> Store {
        self.store.clone()
    }

    /// Whether the initial list has completed (the cache is complete).
    pub(crate) fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// Waits until the initial list has completed.
    pub(crate) async fn ready(&self) {
        let mut ready = self.ready.clone();
        // The sender lives as long as the watch task; if it ended, there is nothing to wait for.
        let _ = ready.wait_for(|r| *r).await;
    }

    /// Every object in the cache, then every change. The stream waits for the initial list.
    pub(crate) fn subscribe(&self) -> impl Stream<Item = Change> + Send + 'static {
        let rx = self.changes.subscribe();
        let store = self.store.clone();
        let ready = self.ready.clone();
        futures::stream::unfold(
            (rx, store, ready, Vec::<CachedObject>::new(), true),
            |(mut rx, store, mut ready, mut backlog, first)| async move {
                if first {
                    // Subscribed before the snapshot: a change racing with it is seen twice,
                    // never missed.
                    if ready.wait_for(|r| *r).await.is_err() {
                        return None;
                    }
                    backlog = store.state();
                }
                loop {
                    if let Some(obj) = backlog.pop() {
                        return Some((Change::Applied(obj), (rx, store, ready, backlog, false)));
                    }
                    match rx.recv().await {
                        Ok(change) => return Some((change, (rx, store, ready, backlog, false))),
                        Err(broadcast::error::RecvError::Lagged(missed)) => {
                            tracing::debug!(missed, "subscriber fell behind; resending the cache");
                            backlog = store.state();
                        }
                        Err(broadcast::error::RecvError::Closed) => return None,
                    }
                }
            },
        )
    }
}

/// Every shared watch of the process.
#[derive(Clone)]
pub struct Watches {
    client: Client,
    running: Arc<Mutex<HashMap<WatchKey, Arc<SharedWatch>>>>,
    skipped: Arc<Skipped>,
}

impl Watches {
    /// No watches yet; they start on first use. Objects they cannot decode are reported to
    /// `skipped`.
    pub fn new(client: Client, skipped: Arc<Skipped>) -> Self {
        Self {
            client,
            running: Arc::default(),
            skipped,
        }
    }

    /// Where objects that do not decode are counted and reported.
    pub(crate) fn skipped(&self) -> &Arc<Skipped> {
        &self.skipped
    }

    /// The watch for `key`, started if it is not running yet.
    pub(crate) fn watch(&self, key: WatchKey) -> Arc<SharedWatch> {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        running
            .entry(key.clone())
            .or_insert_with(|| {
                tracing::info!(
                    kind = %format!("{}/{}", key.resource.api_version, key.resource.kind),
                    namespace = key.namespace.as_deref().unwrap_or("*"),
                    "shared watch started"
                );
                Arc::new(SharedWatch::start(
                    self.client.clone(),
                    key,
                    self.skipped.clone(),
                ))
            })
            .clone()
    }

    /// The ready cache that holds objects of `resource` in `namespace` (`None`: every
    /// namespace, which only an all-namespace watch can serve), if one is running.
    pub(crate) fn cache_for(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
    ) -> Option<Store> {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let all = WatchKey {
            resource: resource.clone(),
            namespace: None,
        };
        if let Some(w) = running.get(&all).filter(|w| w.is_ready()) {
            return Some(w.store());
        }
        let ns = namespace?;
        running
            .get(&WatchKey {
                resource: resource.clone(),
                namespace: Some(ns.to_owned()),
            })
            .filter(|w| w.is_ready())
            .map(|w| w.store())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn trimming_drops_managed_fields_and_last_applied_but_keeps_other_annotations() {
        let mut obj: DynamicObject = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "a",
                "managedFields": [{"manager": "kubectl"}],
                "annotations": {LAST_APPLIED: "{}", "keep": "me"}
            }
        }))
        .expect("object");
        let types = TypeMeta {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        trim(&mut obj, &types);
        assert!(obj.metadata.managed_fields.is_none());
        assert_eq!(
            obj.metadata.annotations,
            Some(BTreeMap::from([("keep".to_owned(), "me".to_owned())]))
        );
        assert_eq!(obj.types, Some(types));
    }
}
