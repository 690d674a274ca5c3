//! [`Store`]: the content of one shared watch — its objects, keyed by namespace and name —
//! and the [`Writer`] that applies the watcher's events to it.
//!
//! The table holds the [`CachedObject`]s themselves (a thin 8-byte pointer each: 16 bytes per
//! object with the table's spare capacity and control bytes, for 10,000 objects) and finds
//! them by the namespace and name read from their text, so a key copies nothing.
//! kube-runtime's reflector store, which the caches used before, kept per object an
//! `ObjectRef` key with its own copies of name, namespace, uid and resourceVersion beside the
//! object and its `ObjectMeta`: about 500 bytes more than this per object (see `cargo bench -p
//! wasmop --bench cache`). The price is that hashing or comparing a key parses the object's
//! text (340 ns per `get` of a 384-byte ConfigMap in that benchmark): once per change and per
//! lookup, and once per object when the table grows.
//!
//! Beside the table the store keeps an **owner index**: for each owner uid, the objects with an
//! owner reference to it (`kube.list-owned`, controller-runtime's owner-field index). The
//! writer reads an object's owner uids from its text once per change (a skim of
//! `metadata.ownerReferences`, outside the lock); a lookup copies out the owned objects'
//! pointers and reads nothing else, so its cost is that of what it returns, whatever the
//! cache holds. Only objects with owners cost anything: per owner a boxed uid and a small
//! table, per owned object an 8-byte slot in it.
//!
//! # Guarantees
//! - Readers see the content as of the last applied event; a re-list (after the watch was
//!   down) replaces the whole content at once when it completes, so objects deleted meanwhile
//!   disappear, and until then readers see the content as it was.
//! - The owner index always describes exactly the objects in the table (it changes under the
//!   same lock, in the same step).
//! - The lock is held only to copy pointers in or out, never across an `.await`.

use std::borrow::{Borrow, Cow};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, PoisonError, RwLock};

use kube::runtime::watcher::Event;

use super::CachedObject;

/// Which object: its namespace (`None` for cluster-scoped) and name. What work queues hold.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    /// The namespace, `None` for a cluster-scoped object.
    pub(crate) namespace: Option<String>,
    /// The name.
    pub(crate) name: String,
}

impl ObjectKey {
    /// The key of `name` in `namespace`.
    pub(crate) fn new(namespace: Option<&str>, name: &str) -> Self {
        Self {
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
        }
    }

    /// The key of `obj`.
    pub(crate) fn of(obj: &CachedObject) -> Self {
        let (namespace, name) = obj.key_parts();
        Self {
            namespace: Some(namespace.into_owned()).filter(|ns| !ns.is_empty()),
            name: name.into_owned(),
        }
    }
}

/// `namespace/name`, or `name` for a cluster-scoped object.
impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// The read side of one shared watch's cache. Cheap to clone; clones share the content.
#[derive(Clone, Default)]
pub struct Store {
    content: Arc<RwLock<Content>>,
}

/// What one lock guards: the objects and their owner index.
#[derive(Default)]
struct Content {
    objects: HashSet<Entry>,
    /// Owner uid → the objects with an owner reference to it.
    owned: HashMap<Box<str>, HashSet<Entry>>,
}

impl Content {
    fn with_capacity(objects: usize) -> Self {
        Self {
            objects: HashSet::with_capacity(objects),
            owned: HashMap::new(),
        }
    }

    /// Stores `obj` (whose owners are `owners`) in place of the object of its key, whose
    /// owners were `replaced`.
    fn put(&mut self, obj: &CachedObject, owners: &[Box<str>], replaced: &[Box<str>]) {
        self.unindex(obj, replaced);
        for uid in owners {
            self.owned
                .entry(uid.clone())
                .or_default()
                .replace(Entry(obj.clone()));
        }
        self.objects.replace(Entry(obj.clone()));
    }

    /// Removes the object of `obj`'s key, whose owners were `owners`.
    fn remove(&mut self, obj: &CachedObject, owners: &[Box<str>]) {
        self.unindex(obj, owners);
        self.objects.remove(&Entry(obj.clone()) as &dyn Keyed);
    }

    fn unindex(&mut self, obj: &CachedObject, owners: &[Box<str>]) {
        for uid in owners {
            if let Some(set) = self.owned.get_mut(uid) {
                set.remove(&Entry(obj.clone()) as &dyn Keyed);
                if set.is_empty() {
                    self.owned.remove(uid);
                }
            }
        }
    }

    /// The object stored under `obj`'s key, if one is.
    fn stored(&self, obj: &CachedObject) -> Option<CachedObject> {
        self.objects
            .get(&Entry(obj.clone()) as &dyn Keyed)
            .map(|e| e.0.clone())
    }
}

impl Store {
    /// The object `name` in `namespace` (`None` for cluster-scoped), if cached.
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<CachedObject> {
        let lookup = Lookup {
            namespace: namespace.unwrap_or(""),
            name,
        };
        self.read()
            .objects
            .get(&lookup as &dyn Keyed)
            .map(|entry| entry.0.clone())
    }

    /// Every cached object, in no particular order.
    pub fn state(&self) -> Vec<CachedObject> {
        self.read()
            .objects
            .iter()
            .map(|entry| entry.0.clone())
            .collect()
    }

    /// The cached objects with an owner reference to `uid`, in no particular order: from the
    /// owner index, without reading any object.
    pub fn owned_by(&self, uid: &str) -> Vec<CachedObject> {
        self.read()
            .owned
            .get(uid)
            .map(|set| set.iter().map(|entry| entry.0.clone()).collect())
            .unwrap_or_default()
    }

    /// How many objects are cached.
    pub(crate) fn len(&self) -> usize {
        self.read().objects.len()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Content> {
        // A panic while the lock was held cannot leave the content half-changed in a way
        // readers notice: a change is a few `HashSet` calls on one key, or one swap.
        self.content.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Content> {
        self.content.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Applies a watcher's events to its [`Store`]. The only writer of its store, so what it
/// reads from the store between its own changes stays true.
#[derive(Default)]
pub struct Writer {
    store: Store,
    /// The content of a (re-)list in progress, swapped in whole when it completes.
    relist: Option<Content>,
}

impl Writer {
    /// A writer of an empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The store this writer fills.
    pub fn reader(&self) -> Store {
        self.store.clone()
    }

    /// Applies one event of kube-runtime's `watcher`: an applied object replaces the one of
    /// the same namespace and name, a deleted one is removed; the objects of a list
    /// (`Init`, `InitApply`…, `InitDone`) replace the whole content when the list completes.
    pub fn apply_watcher_event(&mut self, event: &Event<CachedObject>) {
        match event {
            Event::Apply(obj) => {
                // Owners are read outside the lock: the old object's from the stored copy
                // (this writer is the only one, so it stays stored until the change below).
                let owners = obj.owner_uids();
                let old = self.store.read().stored(obj);
                let replaced = old.map(|o| o.owner_uids()).unwrap_or_default();
                self.store.write().put(obj, &owners, &replaced);
            }
            Event::Delete(obj) => {
                let old = self.store.read().stored(obj);
                let owners = old.map(|o| o.owner_uids()).unwrap_or_default();
                self.store.write().remove(obj, &owners);
            }
            Event::Init => {
                // Sized for the content it will most likely replace: growing the table
                // re-hashes (re-parses) every object already in it.
                self.relist = Some(Content::with_capacity(self.store.len()));
            }
            Event::InitApply(obj) => {
                let relist = self.relist.get_or_insert_with(Content::default);
                let replaced = relist
                    .stored(obj)
                    .map(|o| o.owner_uids())
                    .unwrap_or_default();
                relist.put(obj, &obj.owner_uids(), &replaced);
            }
            Event::InitDone => {
                let mut listed = self.relist.take().unwrap_or_default();
                listed.objects.shrink_to_fit();
                let old = std::mem::replace(&mut *self.store.write(), listed);
                // Dropped after the lock is released: freeing thousands of objects takes time.
                drop(old);
            }
        }
    }
}

/// What the table is keyed by: a namespace (empty for cluster-scoped) and a name.
trait Keyed {
    fn key(&self) -> (Cow<'_, str>, Cow<'_, str>);
}

impl Hash for dyn Keyed + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let (namespace, name) = self.key();
        namespace.hash(state);
        name.hash(state);
    }
}

impl PartialEq for dyn Keyed + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for dyn Keyed + '_ {}

/// A cached object as the table holds it: hashed and compared by its key only (a
/// `CachedObject` itself compares by its whole text).
struct Entry(CachedObject);

impl Keyed for Entry {
    fn key(&self) -> (Cow<'_, str>, Cow<'_, str>) {
        self.0.key_parts()
    }
}

impl Hash for Entry {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self as &dyn Keyed).hash(state);
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self as &dyn Keyed) == (other as &dyn Keyed)
    }
}

impl Eq for Entry {}

impl<'a> Borrow<dyn Keyed + 'a> for Entry {
    fn borrow(&self) -> &(dyn Keyed + 'a) {
        self
    }
}

/// A key to look up, borrowed from the caller.
struct Lookup<'a> {
    namespace: &'a str,
    name: &'a str,
}

impl Keyed for Lookup<'_> {
    fn key(&self) -> (Cow<'_, str>, Cow<'_, str>) {
        (Cow::Borrowed(self.namespace), Cow::Borrowed(self.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::{DynamicObject, TypeMeta};
    use serde_json::json;

    fn cm(namespace: Option<&str>, name: &str, value: &str) -> CachedObject {
        let mut meta = json!({"name": name});
        if let Some(ns) = namespace {
            meta["namespace"] = json!(ns);
        }
        let obj: DynamicObject =
            serde_json::from_value(json!({"metadata": meta, "data": {"v": value}}))
                .expect("object");
        let types = TypeMeta {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        CachedObject::new(obj, &types).expect("cached")
    }

    fn value_of(obj: &CachedObject) -> String {
        obj.to_value().expect("value")["data"]["v"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    fn listed(writer: &mut Writer, objects: &[CachedObject]) {
        writer.apply_watcher_event(&Event::Init);
        for obj in objects {
            writer.apply_watcher_event(&Event::InitApply(obj.clone()));
        }
        writer.apply_watcher_event(&Event::InitDone);
    }

    #[test]
    fn an_applied_object_replaces_the_one_of_the_same_key_and_a_deleted_one_goes() {
        let mut writer = Writer::new();
        let store = writer.reader();
        writer.apply_watcher_event(&Event::Apply(cm(Some("a"), "x", "1")));
        writer.apply_watcher_event(&Event::Apply(cm(Some("b"), "x", "1")));
        writer.apply_watcher_event(&Event::Apply(cm(None, "x", "cluster")));
        writer.apply_watcher_event(&Event::Apply(cm(Some("a"), "x", "2")));
        assert_eq!(store.len(), 3);
        let got = store.get(Some("a"), "x").expect("cached");
        assert_eq!(value_of(&got), "2", "the newer version");
        assert_eq!(
            value_of(&store.get(None, "x").expect("cluster-scoped")),
            "cluster"
        );
        assert!(store.get(Some("c"), "x").is_none());
        writer.apply_watcher_event(&Event::Delete(cm(Some("a"), "x", "2")));
        assert!(store.get(Some("a"), "x").is_none());
        assert!(store.get(Some("b"), "x").is_some(), "other namespaces stay");
        assert_eq!(store.len(), 2);
    }

    #[test]
    fn a_relist_replaces_the_whole_content_when_it_completes() {
        let mut writer = Writer::new();
        let store = writer.reader();
        listed(
            &mut writer,
            &[cm(Some("a"), "gone", "1"), cm(Some("a"), "kept", "1")],
        );
        assert_eq!(store.len(), 2);
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(cm(Some("a"), "kept", "2")));
        writer.apply_watcher_event(&Event::InitApply(cm(Some("a"), "new", "1")));
        assert!(
            store.get(Some("a"), "gone").is_some(),
            "readers see the old content until the list completes"
        );
        writer.apply_watcher_event(&Event::InitDone);
        assert!(store.get(Some("a"), "gone").is_none(), "deleted while down");
        assert_eq!(value_of(&store.get(Some("a"), "kept").expect("kept")), "2");
        assert!(store.get(Some("a"), "new").is_some());
        assert_eq!(store.len(), 2);
    }

    #[test]
    fn state_lists_every_object_sharing_the_stored_copies() {
        let mut writer = Writer::new();
        let store = writer.reader();
        let objects: Vec<_> = (0..100)
            .map(|i| cm(Some("a"), &format!("o-{i}"), "v"))
            .collect();
        listed(&mut writer, &objects);
        let mut names: Vec<_> = store
            .state()
            .iter()
            .map(|o| o.name().into_owned())
            .collect();
        names.sort();
        let mut expected: Vec<_> = (0..100).map(|i| format!("o-{i}")).collect();
        expected.sort();
        assert_eq!(names, expected);
        let got = store.get(Some("a"), "o-7").expect("cached");
        assert!(std::ptr::eq(got.text(), objects[7].text()), "no copy");
    }

    fn owned(namespace: &str, name: &str, owners: &[&str]) -> CachedObject {
        let refs: Vec<_> = owners
            .iter()
            .map(|uid| json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": uid}))
            .collect();
        let obj: DynamicObject = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": namespace, "ownerReferences": refs}
        }))
        .expect("object");
        let types = TypeMeta {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        CachedObject::new(obj, &types).expect("cached")
    }

    fn names_owned_by(store: &Store, uid: &str) -> Vec<String> {
        let mut names: Vec<_> = store
            .owned_by(uid)
            .iter()
            .map(|o| o.name().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_owner_index_follows_every_change_of_ownership() {
        let mut writer = Writer::new();
        let store = writer.reader();
        writer.apply_watcher_event(&Event::Apply(owned("a", "j1", &["u1"])));
        writer.apply_watcher_event(&Event::Apply(owned("a", "j2", &["u1", "u2"])));
        writer.apply_watcher_event(&Event::Apply(owned("a", "free", &[])));
        assert_eq!(names_owned_by(&store, "u1"), ["j1", "j2"]);
        assert_eq!(names_owned_by(&store, "u2"), ["j2"]);
        // Adopted by another owner, released by the first.
        writer.apply_watcher_event(&Event::Apply(owned("a", "j1", &["u2"])));
        assert_eq!(names_owned_by(&store, "u1"), ["j2"]);
        assert_eq!(names_owned_by(&store, "u2"), ["j1", "j2"]);
        // The index hands over the newest copy.
        let newest = store.get(Some("a"), "j1").expect("cached");
        assert!(
            store
                .owned_by("u2")
                .iter()
                .any(|o| std::ptr::eq(o.text(), newest.text()))
        );
        writer.apply_watcher_event(&Event::Delete(owned("a", "j2", &[])));
        assert!(
            names_owned_by(&store, "u1").is_empty(),
            "removed by its stored owners"
        );
        assert_eq!(names_owned_by(&store, "u2"), ["j1"]);
        assert!(!store.read().owned.contains_key("u1"), "no empty sets kept");
        // A relist rebuilds the index with the content.
        listed(
            &mut writer,
            &[owned("a", "j3", &["u1"]), owned("a", "j3", &["u3"])],
        );
        assert!(
            names_owned_by(&store, "u1").is_empty(),
            "the later item replaced it"
        );
        assert_eq!(names_owned_by(&store, "u3"), ["j3"]);
        assert!(names_owned_by(&store, "u2").is_empty());
        assert_eq!(store.read().owned.len(), 1);
    }

    #[test]
    fn keys_with_escapes_are_found_by_their_decoded_names() {
        let mut writer = Writer::new();
        let store = writer.reader();
        writer.apply_watcher_event(&Event::Apply(cm(Some("a"), "q\"uote", "1")));
        assert!(store.get(Some("a"), "q\"uote").is_some());
        assert_eq!(
            ObjectKey::of(&store.state()[0]),
            ObjectKey::new(Some("a"), "q\"uote")
        );
    }

    #[test]
    fn readers_on_other_threads_see_a_consistent_store_while_it_changes() {
        let mut writer = Writer::new();
        let store = writer.reader();
        listed(&mut writer, &[cm(Some("a"), "fixed", "0")]);
        let readers: Vec<_> = (0..4)
            .map(|_| {
                let store = store.clone();
                std::thread::spawn(move || {
                    for _ in 0..2_000 {
                        assert!(store.get(Some("a"), "fixed").is_some());
                        let all = store.state();
                        assert!(all.iter().any(|o| o.name() == "fixed"));
                    }
                })
            })
            .collect();
        for i in 0..500 {
            let obj = cm(Some("a"), &format!("o-{}", i % 50), &i.to_string());
            writer.apply_watcher_event(&Event::Apply(obj.clone()));
            if i % 3 == 0 {
                writer.apply_watcher_event(&Event::Delete(obj));
            }
            if i % 100 == 0 {
                listed(&mut writer, &[cm(Some("a"), "fixed", &i.to_string())]);
            }
        }
        for reader in readers {
            reader.join().expect("reader");
        }
        assert!(store.get(Some("a"), "fixed").is_some());
    }
}
