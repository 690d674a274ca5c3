//! An in-memory [`Cluster`]: a map of objects plus a journal of every write a plugin made.
//! It serves `wasmop test`, plugin crates' offline tests and the runtime's own tests.
//!
//! It is deterministic (uids and resourceVersions come from counters, there are no
//! timestamps) and deliberately simple where Kubernetes is not:
//! - server-side apply merges the applied object into the stored one like a JSON merge patch
//!   (no field ownership, lists are replaced);
//! - a strategic merge patch is applied as a JSON merge patch;
//! - every kind behaves as if it had a status subresource: writes to the object ignore
//!   `status`, `patch-status` changes only `status`;
//! - a delete removes the object at once (finalizers are not honoured); with background or
//!   foreground propagation everything it owns goes at once too, with orphan propagation its
//!   dependents stay and lose their owner reference to it;
//! - as in the API server, a write whose result names another `metadata.resourceVersion` than
//!   the stored object's fails with `conflict` (a guarded patch), and a delete whose uid or
//!   resourceVersion precondition does not hold fails with `conflict`.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use serde_json::{Map, Value, json};

pub use crate::journal::{DeleteOptions, PatchType, Target, Write};
use wasmop_core::cluster::selector::LabelSelector;
use wasmop_core::cluster::text::{Json, ObjectText, patch_value};
use wasmop_core::cluster::{
    Cluster, ClusterError, DeleteParams, Event, GroupVersionKind, ObjectRef, Patch,
    PropagationPolicy, json_text,
};
use wasmop_core::plugin::PluginName;

/// Storage key: versions of one kind share their objects, as in the API server.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    group: String,
    kind: String,
    namespace: Option<String>,
    name: String,
}

impl From<&ObjectRef> for Key {
    fn from(r: &ObjectRef) -> Self {
        Self {
            group: r.kind.group.clone(),
            kind: r.kind.kind.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
        }
    }
}

#[derive(Default)]
struct State {
    objects: BTreeMap<Key, Value>,
    journal: Vec<Write>,
    /// Source of uids and resourceVersions, so runs are reproducible.
    counter: u64,
}

/// An in-memory cluster that records writes. Cheap to create; share it with `Arc`.
#[derive(Default)]
pub struct MemoryCluster {
    // A std mutex: it is never held across an await, and every operation is short.
    state: Mutex<State>,
}

impl MemoryCluster {
    /// An empty cluster.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores objects as they are, filling in a uid, resourceVersion and generation where
    /// missing. Seeding is not recorded as a write.
    ///
    /// A given `metadata.resourceVersion` is kept, so a test (and its golden file) can name
    /// it. The versions this cluster assigns, to the seeded objects that have none and to
    /// every later write, are above the highest numeric one given, as the API server's only
    /// grow. A non-numeric one is kept as it is and orders nothing (the API server's are
    /// opaque strings; only numeric ones can be compared).
    pub fn seed(&self, objects: impl IntoIterator<Item = Value>) -> Result<(), ClusterError> {
        let objects: Vec<Value> = objects.into_iter().collect();
        let mut state = self.lock();
        if let Some(highest) = objects.iter().filter_map(numeric_version).max() {
            state.counter = state.counter.max(highest);
        }
        for object in objects {
            let r = ObjectRef::of(&object).map_err(|e| ClusterError::Invalid(e.to_string()))?;
            let object = state.stamp_seeded(object);
            state.objects.insert(Key::from(&r), object);
        }
        Ok(())
    }

    /// Every write so far, in order.
    pub fn writes(&self) -> Vec<Write> {
        self.lock().journal.clone()
    }

    /// Every stored object, sorted by group, kind, namespace and name.
    pub fn objects(&self) -> Vec<Value> {
        self.lock().objects.values().cloned().collect()
    }

    /// One stored object, if present.
    pub fn object(&self, target: &ObjectRef) -> Option<Value> {
        self.lock().objects.get(&Key::from(target)).cloned()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the map half-updated in a way that
        // matters to a test double, so recover from poisoning.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn not_found(target: &ObjectRef) -> ClusterError {
    ClusterError::NotFound(format!("{target} not found"))
}

fn labels_of(object: &Value) -> BTreeMap<String, String> {
    object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// A seeded object's `metadata.resourceVersion`, if it is a number (as text, as the API
/// server writes it, or a bare YAML number).
fn numeric_version(object: &Value) -> Option<u64> {
    match object.pointer("/metadata/resourceVersion")? {
        Value::String(s) => s.parse().ok(),
        v => v.as_u64(),
    }
}

/// Whether a seeded object names its resourceVersion (an empty one is none).
fn has_version(object: &Value) -> bool {
    match object.pointer("/metadata/resourceVersion") {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) => !s.is_empty(),
        Some(_) => true,
    }
}

/// The parts of an object whose change bumps `metadata.generation`.
fn spec_of(object: &Value) -> Value {
    let mut o = object.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
    }
    o
}

fn metadata_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.get("metadata").is_some_and(Value::is_object) {
        object["metadata"] = json!({});
    }
    match object.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        _ => unreachable!("metadata was just made an object"),
    }
}

impl State {
    fn next(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }

    fn stamp_new(&mut self, mut object: Value) -> Value {
        let n = self.next();
        let meta = metadata_mut(&mut object);
        meta.entry("uid")
            .or_insert_with(|| json!(format!("00000000-0000-4000-8000-{n:012}")));
        meta.insert("resourceVersion".into(), json!(n.to_string()));
        meta.entry("generation").or_insert(json!(1));
        object
    }

    /// A seeded object as stored: its own resourceVersion if it has one (see
    /// [`MemoryCluster::seed`]), else a new one, like [`Self::stamp_new`].
    fn stamp_seeded(&mut self, object: Value) -> Value {
        if !has_version(&object) {
            return self.stamp_new(object);
        }
        let n = self.next();
        let mut object = object;
        let meta = metadata_mut(&mut object);
        meta.entry("uid")
            .or_insert_with(|| json!(format!("00000000-0000-4000-8000-{n:012}")));
        meta.entry("generation").or_insert(json!(1));
        object
    }

    /// Stores `new` in place of `old`, bumping resourceVersion and, if the spec changed,
    /// generation.
    fn replace(&mut self, key: Key, old: &Value, mut new: Value) -> Value {
        let n = self.next();
        let generation = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let bump = i64::from(spec_of(old) != spec_of(&new));
        let meta = metadata_mut(&mut new);
        meta.insert("resourceVersion".into(), json!(n.to_string()));
        meta.insert("generation".into(), json!(generation + bump));
        for field in ["uid", "creationTimestamp"] {
            if let Some(v) = old.pointer(&format!("/metadata/{field}")) {
                meta.insert(field.into(), v.clone());
            }
        }
        self.objects.insert(key, new.clone());
        new
    }

    fn create(&mut self, object: Value) -> Result<Value, ClusterError> {
        let r = ObjectRef::of(&object).map_err(|e| ClusterError::Invalid(e.to_string()))?;
        let key = Key::from(&r);
        if self.objects.contains_key(&key) {
            return Err(ClusterError::AlreadyExists(r.to_string()));
        }
        let mut object = object;
        if let Some(m) = object.as_object_mut() {
            m.remove("status");
        }
        let object = self.stamp_new(object);
        self.objects.insert(key, object.clone());
        Ok(object)
    }

    /// Applies a body to the object (not its status), creating it for an apply.
    fn patch(
        &mut self,
        target: &ObjectRef,
        patch: &Patch<Value>,
        status: bool,
    ) -> Result<Value, ClusterError> {
        let key = Key::from(target);
        let Some(old) = self.objects.get(&key).cloned() else {
            return match patch {
                Patch::Apply(body) if !status => self.create(body.clone()),
                _ => Err(not_found(target)),
            };
        };
        let mut patched = old.clone();
        match patch {
            Patch::Apply(body) | Patch::Merge(body) | Patch::Strategic(body) => {
                json_patch::merge(&mut patched, body);
            }
            Patch::Json(ops) => json_patch::patch(&mut patched, ops)
                .map_err(|e| ClusterError::Invalid(format!("json patch failed: {e}")))?,
            _ => {
                return Err(ClusterError::Invalid(
                    "the in-memory cluster does not know this patch type".into(),
                ));
            }
        }
        if ObjectRef::of(&patched).ok().as_ref() != Some(target) {
            return Err(ClusterError::Invalid(format!(
                "the patch changes the identity of {target}"
            )));
        }
        let stored = old.pointer("/metadata/resourceVersion");
        if let Some(wanted) = patched.pointer("/metadata/resourceVersion")
            && Some(wanted) != stored
        {
            return Err(stale(target));
        }
        let mut new = old.clone();
        let (from, to) = (patched.as_object_mut(), new.as_object_mut());
        if let (Some(from), Some(to)) = (from, to) {
            if status {
                match from.remove("status") {
                    Some(s) => to.insert("status".into(), s),
                    None => to.remove("status"),
                };
            } else {
                let status = to.remove("status");
                *to = std::mem::take(from);
                to.remove("status");
                if let Some(s) = status {
                    to.insert("status".into(), s);
                }
            }
        }
        Ok(self.replace(key, &old, new))
    }

    /// Deletes `target` if `params`' preconditions hold (a missing object is no error), and
    /// its dependents as `params`' propagation says.
    fn delete(&mut self, target: &ObjectRef, params: &DeleteParams) -> Result<(), ClusterError> {
        let key = Key::from(target);
        let Some(object) = self.objects.get(&key) else {
            return Ok(());
        };
        if let Some(p) = &params.preconditions {
            let meta = |field: &str| object.pointer(&format!("/metadata/{field}"));
            let holds = |wanted: &Option<String>, field: &str| {
                wanted
                    .as_deref()
                    .is_none_or(|w| meta(field).and_then(Value::as_str) == Some(w))
            };
            if !holds(&p.uid, "uid") || !holds(&p.resource_version, "resourceVersion") {
                return Err(ClusterError::Conflict(format!(
                    "precondition failed: {target} is not the object the delete names"
                )));
            }
        }
        let orphan = matches!(params.propagation_policy, Some(PropagationPolicy::Orphan));
        self.remove(&key, orphan);
        Ok(())
    }

    /// Removes an object, and everything it owns (or, with `orphan`, their owner references
    /// to it).
    fn remove(&mut self, key: &Key, orphan: bool) {
        let Some(gone) = self.objects.remove(key) else {
            return;
        };
        let Some(uid) = gone.pointer("/metadata/uid").and_then(Value::as_str) else {
            return;
        };
        if orphan {
            for object in self.objects.values_mut() {
                if let Some(refs) = object
                    .pointer_mut("/metadata/ownerReferences")
                    .and_then(Value::as_array_mut)
                {
                    refs.retain(|r| r["uid"] != uid);
                }
            }
            return;
        }
        let owned: Vec<Key> = self
            .objects
            .iter()
            .filter(|(_, o)| owned_by(o, uid))
            .map(|(k, _)| k.clone())
            .collect();
        for key in owned {
            self.remove(&key, false);
        }
    }
}

/// Whether `object` has an owner reference to `uid`.
fn owned_by(object: &Value, uid: &str) -> bool {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid))
}

/// The API server's answer to a write whose resourceVersion is not the stored one.
fn stale(target: &ObjectRef) -> ClusterError {
    ClusterError::Conflict(format!(
        "{target} has been modified since the given resourceVersion; read it again"
    ))
}

fn patch_parts(patch: &Patch<Value>) -> (PatchType, Value) {
    match patch {
        Patch::Apply(v) => (PatchType::Apply, v.clone()),
        Patch::Merge(v) => (PatchType::Merge, v.clone()),
        Patch::Strategic(v) => (PatchType::Strategic, v.clone()),
        Patch::Json(ops) => (
            PatchType::Json,
            serde_json::to_value(ops).unwrap_or(Value::Null),
        ),
        // kube's Patch is non-exhaustive; `State::patch` refuses unknown types.
        _ => (PatchType::Merge, Value::Null),
    }
}

fn error_text<T>(r: &Result<T, ClusterError>) -> Option<String> {
    r.as_ref().err().map(ToString::to_string)
}

#[async_trait]
impl Cluster for MemoryCluster {
    async fn get(&self, target: &ObjectRef) -> Result<String, ClusterError> {
        let state = self.lock();
        let object = state.objects.get(&Key::from(target));
        object.map(json_text).ok_or_else(|| not_found(target))
    }

    async fn list(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<String>, ClusterError> {
        let selector = LabelSelector::parse(label_selector.unwrap_or(""))
            .map_err(|e| ClusterError::Invalid(e.to_string()))?;
        let state = self.lock();
        Ok(state
            .objects
            .iter()
            .filter(|(k, _)| k.group == kind.group && k.kind == kind.kind)
            .filter(|(k, _)| namespace.is_none() || k.namespace.as_deref() == namespace)
            .filter(|(_, o)| selector.matches(&labels_of(o)))
            .map(|(_, o)| json_text(o))
            .collect())
    }

    async fn list_owned(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        owner_uid: &str,
    ) -> Result<Vec<String>, ClusterError> {
        let state = self.lock();
        Ok(state
            .objects
            .iter()
            .filter(|(k, _)| k.group == kind.group && k.kind == kind.kind)
            .filter(|(k, _)| namespace.is_none() || k.namespace.as_deref() == namespace)
            .filter(|(_, o)| owned_by(o, owner_uid))
            .map(|(_, o)| json_text(o))
            .collect())
    }

    async fn create(
        &self,
        object: ObjectText,
        _plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        let object = object.to_value();
        let mut state = self.lock();
        let result = state.create(object.clone());
        let error = error_text(&result);
        state.journal.push(Write::Create { object, error });
        result.map(|v| json_text(&v))
    }

    async fn apply(&self, object: ObjectText, plugin: &PluginName) -> Result<String, ClusterError> {
        let target = object.target().clone();
        let object = object.to_value();
        let mut state = self.lock();
        let result = state.patch(&target, &Patch::Apply(object.clone()), false);
        let error = error_text(&result);
        state.journal.push(Write::Apply {
            field_manager: plugin.field_manager(),
            object,
            error,
        });
        result.map(|v| json_text(&v))
    }

    async fn patch(
        &self,
        target: &ObjectRef,
        patch: Patch<Json>,
        _plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        let patch = patch_value(&patch).map_err(|e| ClusterError::Invalid(e.to_string()))?;
        let mut state = self.lock();
        let result = state.patch(target, &patch, false);
        let (patch_type, patch) = patch_parts(&patch);
        let error = error_text(&result);
        state.journal.push(Write::Patch {
            target: target.into(),
            patch_type,
            patch,
            error,
        });
        result.map(|v| json_text(&v))
    }

    async fn patch_status(
        &self,
        target: &ObjectRef,
        patch: Patch<Json>,
        _plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        let patch = patch_value(&patch).map_err(|e| ClusterError::Invalid(e.to_string()))?;
        let mut state = self.lock();
        let result = state.patch(target, &patch, true);
        let (patch_type, patch) = patch_parts(&patch);
        let error = error_text(&result);
        state.journal.push(Write::PatchStatus {
            target: target.into(),
            patch_type,
            patch,
            error,
        });
        result.map(|v| json_text(&v))
    }

    async fn delete(
        &self,
        target: &ObjectRef,
        params: &DeleteParams,
        _plugin: &PluginName,
    ) -> Result<(), ClusterError> {
        let mut state = self.lock();
        let result = state.delete(target, params);
        state.journal.push(Write::Delete {
            target: target.into(),
            options: DeleteOptions::of(params),
            error: error_text(&result),
        });
        result
    }

    async fn emit_event(&self, event: Event, _plugin: &PluginName) -> Result<(), ClusterError> {
        self.lock().journal.push(Write::Event {
            regarding: (&event.regarding).into(),
            event_type: event.event_type,
            reason: event.reason,
            action: event.action,
            note: event.note,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plugin() -> PluginName {
        PluginName::new("test").expect("valid")
    }

    fn cm(name: &str, data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "default"}, "data": data})
    }

    fn text(object: Value) -> ObjectText {
        ObjectText::from_value(&object).expect("an object")
    }

    fn merge(body: Value) -> Patch<Json> {
        wasmop_core::cluster::text::patch_json(Patch::Merge(body)).expect("a patch")
    }

    fn cm_ref(name: &str) -> ObjectRef {
        ObjectRef::new(
            GroupVersionKind::gvk("", "v1", "ConfigMap"),
            Some("default".into()),
            name,
        )
    }

    #[tokio::test]
    async fn apply_creates_then_merges_and_bumps_generation_only_on_spec_change() {
        let c = MemoryCluster::new();
        let first = c
            .apply(text(cm("a", json!({"k": "1"}))), &plugin())
            .await
            .expect("created");
        let first: Value = serde_json::from_str(&first).expect("the reply is JSON");
        assert_eq!(first["metadata"]["generation"], 1);
        let second = c
            .apply(text(cm("a", json!({"k": "2"}))), &plugin())
            .await
            .expect("applied");
        let second: Value = serde_json::from_str(&second).expect("the reply is JSON");
        assert_eq!(second["metadata"]["generation"], 2);
        assert_eq!(second["metadata"]["uid"], first["metadata"]["uid"]);
        let status = c
            .patch_status(
                &cm_ref("a"),
                merge(json!({"status": {"ok": true}})),
                &plugin(),
            )
            .await
            .expect("status");
        let status: Value = serde_json::from_str(&status).expect("the reply is JSON");
        assert_eq!(status["metadata"]["generation"], 2);
        assert_eq!(status["status"]["ok"], true);
        assert_eq!(c.writes().len(), 3);
    }

    #[tokio::test]
    async fn create_of_an_existing_object_already_exists_and_is_journaled_with_the_error() {
        let c = MemoryCluster::new();
        c.seed([cm("a", json!({}))]).expect("seed");
        let err = c
            .create(text(cm("a", json!({}))), &plugin())
            .await
            .expect_err("exists");
        assert!(matches!(err, ClusterError::AlreadyExists(_)), "{err}");
        let writes = c.writes();
        assert!(
            matches!(&writes[0], Write::Create { error: Some(e), .. } if e.contains("already exists"))
        );
    }

    #[tokio::test]
    async fn get_returns_the_stored_object_as_json_text_and_a_missing_one_is_not_found() {
        let c = MemoryCluster::new();
        c.seed([cm("a", json!({"k": "1"}))]).expect("seed");
        let text = c.get(&cm_ref("a")).await.expect("found");
        let value: Value = serde_json::from_str(&text).expect("JSON text");
        assert_eq!(Some(value), c.object(&cm_ref("a")));
        let err = c.get(&cm_ref("missing")).await.expect_err("missing");
        assert!(matches!(err, ClusterError::NotFound(_)), "{err}");
    }

    #[tokio::test]
    async fn list_filters_by_namespace_and_selector() {
        let c = MemoryCluster::new();
        let mut labelled = cm("a", json!({}));
        labelled["metadata"]["labels"] = json!({"app": "web"});
        c.seed([labelled, cm("b", json!({}))]).expect("seed");
        let kind = GroupVersionKind::gvk("", "v1", "ConfigMap");
        let all = c.list(&kind, Some("default"), None).await.expect("list");
        assert_eq!(all.len(), 2);
        let web = c.list(&kind, None, Some("app=web")).await.expect("list");
        assert_eq!(web.len(), 1);
        let web: Value = serde_json::from_str(&web[0]).expect("JSON text");
        assert_eq!(web["metadata"]["name"], "a");
        let other = c.list(&kind, Some("other"), None).await.expect("list");
        assert!(other.is_empty());
    }

    #[tokio::test]
    async fn seeding_keeps_given_resource_versions_and_later_ones_are_above_them() {
        let c = MemoryCluster::new();
        let mut given = cm("given", json!({}));
        given["metadata"]["resourceVersion"] = json!("41");
        let mut opaque = cm("opaque", json!({}));
        opaque["metadata"]["resourceVersion"] = json!("abc");
        c.seed([
            cm("first", json!({})),
            given,
            opaque,
            cm("later", json!({})),
        ])
        .expect("seed");
        let version = |name: &str| {
            c.object(&cm_ref(name)).expect("stored")["metadata"]["resourceVersion"].clone()
        };
        assert_eq!(version("given"), "41");
        assert_eq!(
            version("opaque"),
            "abc",
            "a non-numeric one is kept as it is"
        );
        let assigned = |name: &str| -> u64 {
            version(name)
                .as_str()
                .expect("text")
                .parse()
                .expect("numeric")
        };
        assert!(assigned("first") > 41 && assigned("later") > 41);
        assert_ne!(assigned("first"), assigned("later"));
        let patched = c
            .patch(
                &cm_ref("given"),
                merge(json!({"data": {"k": "v"}})),
                &plugin(),
            )
            .await
            .expect("patched");
        let patched: Value = serde_json::from_str(&patched).expect("the reply is JSON");
        let after: u64 = patched["metadata"]["resourceVersion"]
            .as_str()
            .expect("text")
            .parse()
            .expect("numeric");
        assert!(
            after > assigned("later"),
            "a write is above every seeded version"
        );
    }

    #[tokio::test]
    async fn delete_removes_owned_objects_too() {
        let c = MemoryCluster::new();
        let mut owner = cm("owner", json!({}));
        owner["metadata"]["uid"] = json!("u-1");
        let mut owned = cm("owned", json!({}));
        owned["metadata"]["ownerReferences"] =
            json!([{"uid": "u-1", "kind": "ConfigMap", "name": "owner"}]);
        c.seed([owner, owned]).expect("seed");
        c.delete(&cm_ref("owner"), &DeleteParams::background(), &plugin())
            .await
            .expect("delete");
        assert!(c.objects().is_empty());
    }

    fn family() -> MemoryCluster {
        let c = MemoryCluster::new();
        let mut owner = cm("owner", json!({}));
        owner["metadata"]["uid"] = json!("u-1");
        let mut owned = cm("owned", json!({}));
        owned["metadata"]["ownerReferences"] =
            json!([{"uid": "u-1", "kind": "ConfigMap", "name": "owner"}]);
        let mut elsewhere = owned.clone();
        elsewhere["metadata"]["namespace"] = json!("other");
        c.seed([owner, owned, elsewhere, cm("stranger", json!({}))])
            .expect("seed");
        c
    }

    #[tokio::test]
    async fn list_owned_returns_only_the_owners_objects_in_the_namespace() {
        let c = family();
        let kind = GroupVersionKind::gvk("", "v1", "ConfigMap");
        let here = c
            .list_owned(&kind, Some("default"), "u-1")
            .await
            .expect("list");
        assert_eq!(here.len(), 1);
        assert!(here[0].contains(r#""name":"owned""#), "{}", here[0]);
        let everywhere = c.list_owned(&kind, None, "u-1").await.expect("list");
        assert_eq!(everywhere.len(), 2);
        assert!(
            c.list_owned(&kind, None, "u-2")
                .await
                .expect("list")
                .is_empty()
        );
    }

    #[tokio::test]
    async fn orphan_propagation_keeps_dependents_without_their_owner_reference() {
        let c = family();
        c.delete(&cm_ref("owner"), &DeleteParams::orphan(), &plugin())
            .await
            .expect("delete");
        let owned = c.object(&cm_ref("owned")).expect("kept");
        assert_eq!(owned["metadata"]["ownerReferences"], json!([]));
        assert!(c.object(&cm_ref("owner")).is_none());
    }

    #[tokio::test]
    async fn a_delete_whose_precondition_fails_conflicts_and_deletes_nothing() {
        let c = family();
        let stale = DeleteParams::background().preconditions(wasmop_core::cluster::Preconditions {
            uid: Some("u-other".into()),
            resource_version: None,
        });
        let err = c
            .delete(&cm_ref("owner"), &stale, &plugin())
            .await
            .expect_err("uid differs");
        assert!(matches!(err, ClusterError::Conflict(_)), "{err}");
        assert!(c.object(&cm_ref("owner")).is_some());
        let right = DeleteParams::background().preconditions(wasmop_core::cluster::Preconditions {
            uid: Some("u-1".into()),
            resource_version: None,
        });
        c.delete(&cm_ref("owner"), &right, &plugin())
            .await
            .expect("uid matches");
        assert!(c.object(&cm_ref("owner")).is_none());
        let Write::Delete { options, error, .. } = &c.writes()[0] else {
            panic!("a delete is journaled");
        };
        assert_eq!(options.uid.as_deref(), Some("u-other"));
        assert!(error.as_deref().is_some_and(|e| e.contains("precondition")));
    }

    #[tokio::test]
    async fn a_patch_naming_a_stale_resource_version_conflicts() {
        let c = MemoryCluster::new();
        c.seed([cm("a", json!({"k": "1"}))]).expect("seed");
        let rv = c.object(&cm_ref("a")).expect("seeded")["metadata"]["resourceVersion"].clone();
        let rv = rv.as_str().expect("a string").to_owned();
        let guarded = |value: &str| {
            wasmop_core::cluster::text::guarded(merge(json!({"status": {"n": value}})), &rv)
                .expect("guarded")
        };
        c.patch_status(&cm_ref("a"), guarded("1"), &plugin())
            .await
            .expect("fresh");
        let err = c
            .patch_status(&cm_ref("a"), guarded("2"), &plugin())
            .await
            .expect_err("the first write moved it on");
        assert!(matches!(err, ClusterError::Conflict(_)), "{err}");
        assert_eq!(c.object(&cm_ref("a")).expect("kept")["status"]["n"], "1");
    }

    #[tokio::test]
    async fn json_patch_and_missing_targets_fail_typed() {
        let c = MemoryCluster::new();
        c.seed([cm("a", json!({"k": "1"}))]).expect("seed");
        let ops: json_patch::Patch =
            serde_json::from_value(json!([{"op": "replace", "path": "/data/k", "value": "2"}]))
                .expect("ops");
        let patched = c
            .patch(&cm_ref("a"), Patch::Json(ops), &plugin())
            .await
            .expect("patched");
        let patched: Value = serde_json::from_str(&patched).expect("the reply is JSON");
        assert_eq!(patched["data"]["k"], "2");
        let err = c
            .patch(&cm_ref("missing"), merge(json!({})), &plugin())
            .await
            .expect_err("missing");
        assert!(matches!(err, ClusterError::NotFound(_)));
    }
}
