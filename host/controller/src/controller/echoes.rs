//! Own-write echoes: a reconcile's own writes coming back through the watches.
//!
//! A reconcile that creates, applies or patches an object its primary owns (or one of a kind
//! it watches) sees that object come back through the watch, and the object is mapped to its
//! owner again. That owner has already seen this state: its reconcile made the write and had
//! the server's reply. Reconciling it again is pure overhead (in a convergence of fresh
//! objects, a third of all reconciles, each with its own no-op writes).
//!
//! So each controller remembers, per written object, the write its reconciles made last
//! and which primary object's reconcile made it ([`Recording`]):
//! - While the write is in flight, a change of the object that maps to that primary is held
//!   back from it. When the server's reply comes, a held change that carries the version the
//!   reply gave is the echo, and is dropped; any other held change (someone else's write
//!   that came first), or any held change at all when the write failed, makes the reconcile
//!   run again as soon as it ends ([`Recording::retrigger`]), as the change would have without
//!   this filter. (The watch often delivers the echo before the reply is read.)
//! - After the reply, a change that carries exactly the version the reply gave does not
//!   trigger that primary ([`OwnWrites::triggered`]), once.
//!
//! Every other change triggers as ever: one with any other version (someone else's write, a
//! controller updating its status), a deletion, and every change for the object's other
//! owners. Forgetting is always safe: a forgotten write's echo reconciles once more, as
//! without the filter. The memory is bounded by [`REMEMBERED`] writes per controller.

use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::mem;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use serde::Deserialize;

use crate::metrics::Metrics;
use crate::watches::{CachedObject, Change, ObjectKey};
use wasmop_core::cluster::{
    Cluster, ClusterError, DeleteParams, Event, GroupVersionKind, Json, ObjectRef, ObjectText,
    Patch,
};
use wasmop_core::plugin::PluginName;

/// The most writes one controller remembers. Past it, the memory starts afresh: a write whose
/// change never comes back (a no-op apply returns the version it found and changes nothing)
/// stays remembered until the object is written or deleted again, so without a bound,
/// objects deleted by others would accumulate.
pub(crate) const REMEMBERED: usize = 65_536;

/// A written object: its group and kind (any version: the watch may serve another), its
/// namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Written {
    group: String,
    kind: String,
    namespace: Option<String>,
    name: String,
}

impl Written {
    fn of(target: &ObjectRef) -> Self {
        Self {
            group: target.kind.group.clone(),
            kind: target.kind.kind.clone(),
            namespace: target.namespace.clone(),
            name: target.name.clone(),
        }
    }
}

/// A write in flight: whose reconcile makes it, and the versions of the changes held back
/// from that reconcile's primary until the reply says whether they are its echo.
#[derive(Debug)]
struct Flight {
    by: ObjectKey,
    held: Mutex<Vec<String>>,
}

/// The last write to one object.
#[derive(Debug)]
enum Last {
    /// Sent, no reply yet.
    Flying(Arc<Flight>),
    /// Replied: the version the server gave the object, and whose reconcile wrote it.
    Landed {
        resource_version: String,
        by: ObjectKey,
    },
}

/// The writes of one controller's reconciles whose echoes have not come back yet.
pub(crate) struct OwnWrites {
    writes: Mutex<HashMap<Written, Last>>,
    metrics: Metrics,
    plugin: String,
    /// The group and kind of the controllers' primary objects, whose writes (a status
    /// update, mostly) are not remembered: their changes pass the generation filter instead.
    primary: (String, String),
}

impl OwnWrites {
    /// The memory of the controllers of `plugin`, whose primary kind is `group`/`kind`,
    /// counting skipped echoes in `metrics`.
    pub(crate) fn new(metrics: Metrics, plugin: &str, group: &str, kind: &str) -> Self {
        Self {
            writes: Mutex::default(),
            metrics,
            plugin: plugin.to_owned(),
            primary: (group.to_owned(), kind.to_owned()),
        }
    }

    /// Whether writes to `target` are remembered: all but those of the primary kind.
    fn remembers(&self, target: &ObjectRef) -> bool {
        (target.kind.group.as_str(), target.kind.kind.as_str())
            != (self.primary.0.as_str(), self.primary.1.as_str())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Written, Last>> {
        self.writes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn skipped(&self, n: usize) {
        for _ in 0..n {
            self.metrics.echo_skipped(&self.plugin);
        }
    }

    /// A write to `target` by the reconcile of `by` is about to be sent.
    fn take_off(&self, target: &ObjectRef, by: &ObjectKey) -> Arc<Flight> {
        let flight = Arc::new(Flight {
            by: by.clone(),
            held: Mutex::default(),
        });
        let written = Written::of(target);
        let mut writes = self.lock();
        if writes.len() >= REMEMBERED && !writes.contains_key(&written) {
            writes.clear();
        }
        writes.insert(written, Last::Flying(flight.clone()));
        flight
    }

    /// The write `flight` to `target` got `reply` (`None`: it failed, or was given up).
    /// Gives whether a change held back meanwhile was not its echo, so that its reconcile
    /// must run again.
    fn land(&self, target: &ObjectRef, flight: &Arc<Flight>, reply: Option<&str>) -> bool {
        let version = reply.and_then(resource_version);
        let held = mem::take(&mut *flight.held.lock().unwrap_or_else(PoisonError::into_inner));
        let echoed = held
            .iter()
            .filter(|v| Some(v.as_str()) == version.as_deref())
            .count();
        let written = Written::of(target);
        {
            let mut writes = self.lock();
            // Still the last write to the object (not replaced by a later one, nor forgotten
            // at a deletion or the bound)?
            if let Some(Last::Flying(f)) = writes.get(&written)
                && Arc::ptr_eq(f, flight)
            {
                match version {
                    Some(resource_version) if echoed == 0 => {
                        let by = flight.by.clone();
                        writes.insert(
                            written,
                            Last::Landed {
                                resource_version,
                                by,
                            },
                        );
                    }
                    // Failed, or its echo came already.
                    _ => {
                        writes.remove(&written);
                    }
                }
            }
        }
        self.skipped(echoed);
        echoed < held.len()
    }

    /// The primary objects `change` (of `group`/`kind`) should trigger, out of `mapped`, the
    /// ones it maps to: all of them, but the one whose reconcile is writing the object now (the
    /// change is held back until its reply) or wrote exactly this version of it.
    pub(crate) fn triggered(
        &self,
        group: &str,
        kind: &str,
        change: &Change,
        mut mapped: Vec<ObjectKey>,
    ) -> Vec<ObjectKey> {
        if self.lock().is_empty() {
            return mapped;
        }
        let (namespace, name) = change.object().key_parts();
        let written = Written {
            group: group.to_owned(),
            kind: kind.to_owned(),
            namespace: Some(namespace.into_owned()).filter(|ns| !ns.is_empty()),
            name: name.into_owned(),
        };
        let obj = match change {
            Change::Deleted(_) => {
                self.lock().remove(&written);
                return mapped;
            }
            Change::Applied(obj) => obj,
        };
        let by = match self.lock().get(&written) {
            None => return mapped,
            Some(Last::Flying(f)) => f.by.clone(),
            Some(Last::Landed { by, .. }) => by.clone(),
        };
        if !mapped.contains(&by) {
            return mapped;
        }
        // Read outside the lock: the object's text may be long.
        let Some(version) = version_of(obj) else {
            return mapped;
        };
        let mut writes = self.lock();
        let held = match writes.get(&written) {
            Some(Last::Flying(f)) if f.by == by => {
                f.held
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(version);
                true
            }
            Some(Last::Landed {
                resource_version,
                by: b,
            }) if *b == by && *resource_version == version => {
                writes.remove(&written);
                drop(writes);
                self.skipped(1);
                true
            }
            _ => false,
        };
        if held {
            mapped.retain(|primary| *primary != by);
        }
        mapped
    }

    /// How many writes are remembered now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

/// `metadata.resourceVersion` of an object's JSON text, if it has one.
fn resource_version(text: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Object<'a> {
        #[serde(borrow, default)]
        metadata: Meta<'a>,
    }
    #[derive(Deserialize, Default)]
    struct Meta<'a> {
        #[serde(borrow, default, rename = "resourceVersion")]
        resource_version: Option<Cow<'a, str>>,
    }
    let object = serde_json::from_str::<Object<'_>>(text).ok()?;
    object
        .metadata
        .resource_version
        .filter(|rv| !rv.is_empty())
        .map(Cow::into_owned)
}

/// The cached object's `resourceVersion`.
fn version_of(obj: &CachedObject) -> Option<String> {
    resource_version(obj.text())
}

/// The cluster one reconcile's plugin call reaches: `inner`, with each write remembered as
/// made by the reconcile of `by`.
pub(crate) struct Recording {
    inner: Arc<dyn Cluster>,
    writes: Arc<OwnWrites>,
    by: ObjectKey,
    retrigger: AtomicBool,
}

/// A write in flight; lands as failed if dropped before its reply (the call given up).
struct Landing<'a> {
    recording: &'a Recording,
    target: &'a ObjectRef,
    flight: Option<Arc<Flight>>,
}

impl Landing<'_> {
    fn land(&mut self, reply: Option<&str>) {
        if let Some(flight) = self.flight.take()
            && self.recording.writes.land(self.target, &flight, reply)
        {
            self.recording.retrigger.store(true, Ordering::Relaxed);
        }
    }
}

impl Drop for Landing<'_> {
    fn drop(&mut self) {
        self.land(None);
    }
}

impl Recording {
    /// `inner` as the reconcile of `by` reaches it, its writes remembered in `writes`.
    pub(crate) fn new(inner: Arc<dyn Cluster>, writes: Arc<OwnWrites>, by: ObjectKey) -> Self {
        Self {
            inner,
            writes,
            by,
            retrigger: AtomicBool::new(false),
        }
    }

    /// Whether a change held back from this reconcile turned out not to be its own write's
    /// echo: the reconcile must run again when it ends.
    pub(crate) fn retrigger(&self) -> bool {
        self.retrigger.load(Ordering::Relaxed)
    }

    async fn writing(
        &self,
        target: &ObjectRef,
        write: impl Future<Output = Result<String, ClusterError>>,
    ) -> Result<String, ClusterError> {
        if !self.writes.remembers(target) {
            return write.await;
        }
        let mut landing = Landing {
            recording: self,
            target,
            flight: Some(self.writes.take_off(target, &self.by)),
        };
        let result = write.await;
        landing.land(result.as_deref().ok());
        result
    }
}

#[async_trait]
impl Cluster for Recording {
    async fn get(&self, target: &ObjectRef) -> Result<String, ClusterError> {
        self.inner.get(target).await
    }

    async fn list(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<String>, ClusterError> {
        self.inner.list(kind, namespace, label_selector).await
    }

    async fn list_owned(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        owner_uid: &str,
    ) -> Result<Vec<String>, ClusterError> {
        self.inner.list_owned(kind, namespace, owner_uid).await
    }

    async fn create(
        &self,
        object: ObjectText,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        let target = object.target().clone();
        self.writing(&target, self.inner.create(object, plugin))
            .await
    }

    async fn apply(&self, object: ObjectText, plugin: &PluginName) -> Result<String, ClusterError> {
        let target = object.target().clone();
        self.writing(&target, self.inner.apply(object, plugin))
            .await
    }

    async fn patch(
        &self,
        target: &ObjectRef,
        patch: Patch<Json>,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        self.writing(target, self.inner.patch(target, patch, plugin))
            .await
    }

    async fn patch_status(
        &self,
        target: &ObjectRef,
        patch: Patch<Json>,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        self.writing(target, self.inner.patch_status(target, patch, plugin))
            .await
    }

    async fn delete(
        &self,
        target: &ObjectRef,
        params: &DeleteParams,
        plugin: &PluginName,
    ) -> Result<(), ClusterError> {
        self.inner.delete(target, params, plugin).await
    }

    async fn emit_event(&self, event: Event, plugin: &PluginName) -> Result<(), ClusterError> {
        self.inner.emit_event(event, plugin).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use wasmop_offline::memory::MemoryCluster;

    fn config_map(name: &str, rv: &str) -> CachedObject {
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}});
        let types = kube::api::TypeMeta {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        CachedObject::new(serde_json::from_value(obj).expect("object"), &types).expect("cached")
    }

    fn changed(name: &str, rv: &str) -> Change {
        Change::Applied(config_map(name, rv))
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new(Some("ns"), name)
    }

    fn target(name: &str) -> ObjectRef {
        ObjectRef::new(
            GroupVersionKind::gvk("", "v1", "ConfigMap"),
            Some("ns".into()),
            name,
        )
    }

    fn reply(name: &str, rv: &str) -> String {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}})
        .to_string()
    }

    fn fresh() -> (OwnWrites, Metrics) {
        let metrics = Metrics::new();
        let writes = OwnWrites::new(metrics.clone(), "p", "example.com", "Database");
        (writes, metrics)
    }

    fn skipped(metrics: &Metrics) -> String {
        let series = r#"wasmop_own_write_echoes_skipped_total{plugin="p"} "#;
        let text = metrics.render();
        text.lines()
            .find_map(|l| l.strip_prefix(series))
            .unwrap_or("0")
            .to_owned()
    }

    /// A write by the reconcile of `by` to `name`, replied with version `rv`.
    fn wrote(writes: &OwnWrites, name: &str, rv: &str, by: &str) -> bool {
        let flight = writes.take_off(&target(name), &key(by));
        writes.land(&target(name), &flight, Some(&reply(name, rv)))
    }

    #[test]
    fn the_echo_after_the_reply_skips_its_writer_only_and_only_once() {
        let (writes, metrics) = fresh();
        assert!(!wrote(&writes, "cm", "7", "db"));
        let owners = vec![key("db"), key("other")];
        let echo = changed("cm", "7");
        let triggered = writes.triggered("", "ConfigMap", &echo, owners.clone());
        assert_eq!(triggered, vec![key("other")]);
        assert_eq!(skipped(&metrics), "1");
        // Seen once: the same version again (a relist) triggers as any change does.
        let triggered = writes.triggered("", "ConfigMap", &echo, owners.clone());
        assert_eq!(triggered, owners);
        assert_eq!(skipped(&metrics), "1");
    }

    #[test]
    fn the_echo_before_the_reply_is_held_and_dropped_when_the_reply_names_its_version() {
        let (writes, metrics) = fresh();
        let flight = writes.take_off(&target("cm"), &key("db"));
        let owners = vec![key("db"), key("other")];
        let triggered = writes.triggered("", "ConfigMap", &changed("cm", "7"), owners);
        assert_eq!(triggered, vec![key("other")], "held back from its writer");
        assert!(!writes.land(&target("cm"), &flight, Some(&reply("cm", "7"))));
        assert_eq!(skipped(&metrics), "1");
        assert_eq!(writes.len(), 0, "its echo came: nothing left to await");
    }

    #[test]
    fn a_held_change_that_is_not_the_echo_or_held_over_a_failed_write_retriggers() {
        let (writes, metrics) = fresh();
        // Someone else's write came first (version 6), then ours (7).
        let flight = writes.take_off(&target("cm"), &key("db"));
        writes.triggered("", "ConfigMap", &changed("cm", "6"), vec![key("db")]);
        assert!(writes.land(&target("cm"), &flight, Some(&reply("cm", "7"))));
        // Ours still awaits its echo.
        let triggered = writes.triggered("", "ConfigMap", &changed("cm", "7"), vec![key("db")]);
        assert!(triggered.is_empty());
        // A failed write: whatever was held goes to the reconcile.
        let flight = writes.take_off(&target("cm"), &key("db"));
        writes.triggered("", "ConfigMap", &changed("cm", "8"), vec![key("db")]);
        assert!(writes.land(&target("cm"), &flight, None));
        assert_eq!(writes.len(), 0);
        assert_eq!(skipped(&metrics), "1");
    }

    #[test]
    fn any_other_version_kind_object_or_primary_triggers() {
        let (writes, metrics) = fresh();
        wrote(&writes, "cm", "7", "db");
        let owners = vec![key("other")];
        for (kind, change, owners) in [
            ("ConfigMap", changed("cm", "8"), vec![key("db")]),
            ("ConfigMap", changed("other", "7"), vec![key("db")]),
            ("Secret", changed("cm", "7"), vec![key("db")]),
            ("ConfigMap", changed("cm", "7"), owners),
        ] {
            let triggered = writes.triggered("", kind, &change, owners.clone());
            assert_eq!(triggered, owners, "{kind} {change:?}");
        }
        assert_eq!(writes.len(), 1, "still awaiting its echo");
        assert_eq!(skipped(&metrics), "0");
    }

    #[test]
    fn a_deletion_triggers_and_forgets_the_write() {
        let (writes, _) = fresh();
        wrote(&writes, "cm", "7", "db");
        let gone = Change::Deleted(config_map("cm", "7"));
        let triggered = writes.triggered("", "ConfigMap", &gone, vec![key("db")]);
        assert_eq!(triggered, vec![key("db")]);
        assert_eq!(writes.len(), 0);
    }

    #[test]
    fn a_later_write_replaces_the_earlier_and_the_memory_is_bounded() {
        let (writes, _) = fresh();
        wrote(&writes, "cm", "7", "db");
        wrote(&writes, "cm", "9", "db");
        let stale = changed("cm", "7");
        let triggered = writes.triggered("", "ConfigMap", &stale, vec![key("db")]);
        assert_eq!(
            triggered.len(),
            1,
            "the first write's version is not the last's"
        );
        for i in 0..REMEMBERED + 10 {
            wrote(&writes, &format!("cm-{i}"), "1", "db");
        }
        assert!(writes.len() <= REMEMBERED, "{} remembered", writes.len());
        // A reply without a version is not remembered.
        let (writes, _) = fresh();
        let flight = writes.take_off(&target("cm"), &key("db"));
        writes.land(&target("cm"), &flight, Some("{\"metadata\":{}}"));
        let flight = writes.take_off(&target("cm"), &key("db"));
        writes.land(&target("cm"), &flight, Some("not json"));
        assert_eq!(writes.len(), 0);
    }

    #[tokio::test]
    async fn recording_remembers_writes_with_the_server_version_and_a_dropped_call_lands() {
        let (writes, metrics) = fresh();
        let writes = Arc::new(writes);
        let inner: Arc<dyn Cluster> = Arc::new(MemoryCluster::new());
        let cluster = Recording::new(inner, writes.clone(), key("db"));
        let plugin = PluginName::new("p").expect("name");
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "cm", "namespace": "ns"}});
        let created = cluster
            .create(ObjectText::from_value(&cm).expect("object"), &plugin)
            .await
            .expect("created");
        cluster
            .create(ObjectText::from_value(&cm).expect("object"), &plugin)
            .await
            .expect_err("exists");
        assert_eq!(writes.len(), 0, "the failed write forgot the first");
        let applied = cluster
            .apply(ObjectText::from_value(&cm).expect("object"), &plugin)
            .await
            .expect("applied");
        assert_ne!(created, applied);
        let rv = resource_version(&applied).expect("the memory cluster gives versions");
        let triggered = writes.triggered("", "ConfigMap", &changed("cm", &rv), vec![key("db")]);
        assert!(triggered.is_empty());
        assert_eq!(skipped(&metrics), "1");
        assert!(!cluster.retrigger());

        // A write whose call is given up while a change is held: the change goes back.
        let pending = cluster.apply(ObjectText::from_value(&cm).expect("object"), &plugin);
        let mut pending = Box::pin(pending);
        // Not polled: the write is not in flight yet.
        assert_eq!(writes.len(), 0);
        let _ = futures::poll!(pending.as_mut());
        drop(pending);
        assert!(!cluster.retrigger(), "nothing was held");
        // Writes to the primary kind are not remembered.
        let before = writes.len();
        let db = json!({"apiVersion": "example.com/v1", "kind": "Database",
                        "metadata": {"name": "db", "namespace": "ns"}});
        cluster
            .create(ObjectText::from_value(&db).expect("object"), &plugin)
            .await
            .expect("created");
        assert_eq!(writes.len(), before);
        let flight = writes.take_off(&target("cm"), &key("db"));
        writes.triggered("", "ConfigMap", &changed("cm", "x"), vec![key("db")]);
        drop(Landing {
            recording: &cluster,
            target: &target("cm"),
            flight: Some(flight),
        });
        assert!(cluster.retrigger());
    }
}
