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
//! without the filter. The memory is bounded by [`REMEMBERED`] writes per controller, and
//! [`HELD`] held changes per write in flight.

use std::collections::HashMap;
use std::future::Future;
use std::mem;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;

use crate::metrics::Metrics;
use crate::watches::decoded::Identity;
use crate::watches::{Change, ObjectKey};
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

/// The most changes held back while one write is in flight; past it, the write's reconcile
/// runs again whatever the reply says (the changes are not all its echo). The object's
/// changes are anyone's to make, so what one write holds is bounded.
const HELD: usize = 8;

/// A write in flight: whose reconcile makes it, and the versions of the changes held back
/// from that reconcile's primary until the reply says whether they are its echo.
#[derive(Debug)]
struct Flight {
    by: ObjectKey,
    held: Mutex<Held>,
}

/// The changes held back by one write in flight.
#[derive(Debug, Default)]
struct Held {
    /// Their versions, at most [`HELD`].
    versions: Vec<String>,
    /// Whether more came than `versions` holds.
    overflowed: bool,
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
        if n > 0 {
            self.metrics.echoes_skipped(&self.plugin, n);
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
            .versions
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
        held.overflowed || echoed < held.versions.len()
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
        let Some(version) = resource_version(obj.text()) else {
            return mapped;
        };
        let mut writes = self.lock();
        let held = match writes.get(&written) {
            Some(Last::Flying(f)) if f.by == by => {
                let mut held = f.held.lock().unwrap_or_else(PoisonError::into_inner);
                if held.versions.len() < HELD {
                    held.versions.push(version);
                } else {
                    held.overflowed = true;
                }
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

/// `metadata.resourceVersion` of an object's JSON text, if it has one (read as the watches
/// read an object's identity: nothing else decoded, at any depth).
fn resource_version(text: &str) -> Option<String> {
    Identity::read(text)
        .and_then(|identity| identity.resource_version)
        .filter(|rv| !rv.is_empty())
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
mod tests;
