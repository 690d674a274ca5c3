//! The [`Cluster`] the runtime uses under `wasmop run`: the real API server, with reads
//! served from the shared watch caches when a kind is watched.
//!
//! - Kinds are resolved by discovery ([`discovery::Resolver`]); requests are built by
//!   `Api<DynamicObject>` for the resolved `ApiResource`, and what they return is decoded by
//!   the host's own stack-safe, trimming decoder ([`crate::watches::decoded`]), so an object of
//!   any depth the API server stores can be read, written and listed.
//! - `apply` and apply patches are server-side apply with the field manager `wasmop/<plugin>`
//!   and force; other writes carry the same field manager.
//! - `list-owned` of a watched kind is answered from the cache's owner index (no request,
//!   nothing else read); of another kind, by one list request filtered here.
//! - Transient failures (429, 5xx, transport) are retried ([`errors::retrying`]); the rest map
//!   onto the WIT `kube-error` cases ([`errors::classify`]).

pub mod discovery;
pub(crate) mod errors;

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::api::{Api, DynamicObject, GetParams, ListParams, Patch, PatchParams, PostParams};

use self::discovery::{Resolved, Resolver};
use self::errors::retrying;
use crate::events::{EventSink, Record};
use crate::watches::{CachedObject, CachedObjectError, Watches, decoded, listwatch};
use wasmop_core::cluster::selector::LabelSelector;
use wasmop_core::cluster::{
    Cluster, ClusterError, DeleteParams, Event, GroupVersionKind, Json, ObjectRef, ObjectText,
};
use wasmop_core::plugin::PluginName;

/// The API server, as one plugin's host calls reach it. Cheap to clone.
#[derive(Clone)]
pub struct KubeCluster {
    client: Client,
    resolver: Resolver,
    watches: Watches,
    events: Arc<EventSink>,
    /// The namespaces of the plugin this handle serves, if it is confined: a list across all
    /// namespaces then covers only these.
    scope: Option<BTreeSet<String>>,
}

impl KubeCluster {
    /// A cluster handle over `client`, reading from `watches` where it can.
    pub fn new(
        client: Client,
        resolver: Resolver,
        watches: Watches,
        events: Arc<EventSink>,
    ) -> Self {
        Self {
            client,
            resolver,
            watches,
            events,
            scope: None,
        }
    }

    /// The same handle for a plugin confined to `namespaces` (`None`: not confined).
    #[must_use]
    pub(crate) fn scoped(&self, namespaces: Option<BTreeSet<String>>) -> Self {
        Self {
            scope: namespaces,
            ..self.clone()
        }
    }

    /// The namespaces a list of `resolved` in `namespace` covers (`None`: all of them). A
    /// confined plugin's list across all namespaces of a namespaced kind covers its namespaces
    /// only, one query each.
    fn queried<'a>(
        &'a self,
        resolved: &Resolved,
        namespace: Option<&'a str>,
    ) -> Vec<Option<&'a str>> {
        match (&self.scope, namespace) {
            (Some(scope), None) if resolved.namespaced => {
                scope.iter().map(|ns| Some(ns.as_str())).collect()
            }
            _ => vec![namespace],
        }
    }

    /// Lists in one namespace, or in all with `None`: from the cache when one covers it.
    async fn list_in(
        &self,
        resolved: &Resolved,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<String>, ClusterError> {
        let parsed = selector(label_selector)?;
        if let Some(store) = self.watches.cache_for(&resolved.resource, namespace) {
            return select(store.state(), namespace, parsed.as_ref());
        }
        let listed = self.list_api(resolved, namespace, label_selector).await?;
        Ok(listed.iter().map(|o| o.text().to_owned()).collect())
    }

    /// Lists the objects owned by `owner_uid` in one namespace, or in all with `None`: from
    /// the owner index of the cache when one covers it, otherwise from one list request.
    async fn list_owned_in(
        &self,
        resolved: &Resolved,
        namespace: Option<&str>,
        owner_uid: &str,
    ) -> Result<Vec<String>, ClusterError> {
        let owned = match self.watches.cache_for(&resolved.resource, namespace) {
            Some(store) => store.owned_by(owner_uid),
            None => {
                let mut listed = self.list_api(resolved, namespace, None).await?;
                listed.retain(|o| o.owner_uids().iter().any(|uid| &**uid == owner_uid));
                listed
            }
        };
        Ok(owned
            .iter()
            .filter(|o| namespace.is_none() || o.namespace().as_deref() == namespace)
            .map(|o| o.text().to_owned())
            .collect())
    }

    /// One list request to the API server, each item decoded as the caches decode them.
    async fn list_api(
        &self,
        resolved: &Resolved,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<CachedObject>, ClusterError> {
        let api: Api<DynamicObject> = match namespace {
            Some(ns) if resolved.namespaced => {
                Api::namespaced_with(self.client.clone(), ns, &resolved.resource)
            }
            _ => Api::all_with(self.client.clone(), &resolved.resource),
        };
        let mut params = ListParams::default();
        if let Some(s) = label_selector {
            params = params.labels(s);
        }
        let text = self.send("list", &api, |r| r.list(&params)).await?;
        let types = kube::api::TypeMeta {
            api_version: resolved.resource.api_version.clone(),
            kind: resolved.resource.kind.clone(),
        };
        // Each item on its own, at any depth; one that does not decode is skipped and
        // reported as a watch would skip it.
        let page = listwatch::page(&text, &types, Some(self.watches.skipped())).map_err(|e| {
            ClusterError::Other(format!(
                "cannot read the list of {}: {}",
                resolved.resource.kind,
                wasmop_core::chain(&e)
            ))
        })?;
        Ok(page.objects)
    }

    fn api(
        &self,
        kind: &Resolved,
        namespace: Option<&str>,
    ) -> Result<Api<DynamicObject>, ClusterError> {
        match (kind.namespaced, namespace) {
            (true, Some(ns)) => Ok(Api::namespaced_with(
                self.client.clone(),
                ns,
                &kind.resource,
            )),
            (true, None) => Err(ClusterError::Invalid(format!(
                "{} is namespaced: name a namespace",
                kind.resource.kind
            ))),
            (false, Some(ns)) => Err(ClusterError::Invalid(format!(
                "{} is cluster-scoped, but namespace `{ns}` was given",
                kind.resource.kind
            ))),
            (false, None) => Ok(Api::all_with(self.client.clone(), &kind.resource)),
        }
    }

    /// The resolved kind and API handle for an object given as JSON.
    async fn api_of(&self, target: &ObjectRef) -> Result<Api<DynamicObject>, ClusterError> {
        let kind = self.resolver.resolve(&target.kind).await?;
        self.api(&kind, target.namespace.as_deref())
    }

    /// Sends one request as `api` would and returns the reply as text, undecoded: what it
    /// holds is decoded by the host's one stack-safe decoder ([`decoded`]), never by kube's
    /// (which stops at serde_json's recursion limit and logs the whole reply when it fails).
    async fn send(
        &self,
        what: &'static str,
        api: &Api<DynamicObject>,
        build: impl Fn(
            &kube::core::Request,
        ) -> Result<hyper::Request<Vec<u8>>, kube::core::request::Error>,
    ) -> Result<String, ClusterError> {
        let request = kube::core::Request::new(api.resource_url());
        retrying(what, || async {
            let mut req = build(&request).map_err(kube::Error::BuildRequest)?;
            req.extensions_mut().insert(what);
            self.client.request_text(req).await
        })
        .await
    }

    /// Sends one request whose reply is an object (a get, or a write and the stored object
    /// the server replies with), kept as JSON: trimmed like a cached object, at any depth,
    /// and written back as text, instead of decoded into a `DynamicObject` (every metadata
    /// field typed, timestamps parsed) and encoded twice more on its way to the plugin.
    async fn object(
        &self,
        what: &'static str,
        api: &Api<DynamicObject>,
        build: impl Fn(
            &kube::core::Request,
        ) -> Result<hyper::Request<Vec<u8>>, kube::core::request::Error>,
    ) -> Result<String, ClusterError> {
        let reply = self.send(what, api, build).await?;
        decoded::trimmed_text(&reply)
            .map_err(|e| ClusterError::Other(format!("the API server's reply to `{what}`: {e}")))
    }

    /// Looks up the uid of `target` (cache first) so Events attach to the right object.
    async fn uid_of(&self, target: &ObjectRef) -> Option<String> {
        let kind = self.resolver.resolve(&target.kind).await.ok()?;
        if let Some(store) = self
            .watches
            .cache_for(&kind.resource, target.namespace.as_deref())
        {
            return store
                .get(target.namespace.as_deref(), &target.name)
                .and_then(|o| o.meta().uid);
        }
        let api = self.api(&kind, target.namespace.as_deref()).ok()?;
        // Only the uid is read, skipping the rest at any depth.
        let text = self
            .send("get", &api, |r| r.get(&target.name, &GetParams::default()))
            .await
            .ok()?;
        decoded::Identity::read(&text)?.uid
    }
}

/// Whether `status` is the API server's 404 for the object `name` itself.
fn is_gone(status: &kube::core::Status, name: &str) -> bool {
    status.code == 404 && status.details.as_ref().is_some_and(|d| d.name == name)
}

/// The cached objects in `namespace` (all with `None`) that `selector` matches, as their
/// cached JSON text.
fn select(
    objects: Vec<CachedObject>,
    namespace: Option<&str>,
    selector: Option<&LabelSelector>,
) -> Result<Vec<String>, ClusterError> {
    let mut out = Vec::new();
    for obj in objects {
        if namespace.is_some() && obj.namespace().as_deref() != namespace {
            continue;
        }
        if let Some(s) = selector
            && !s.matches(&obj.labels().map_err(cache_error)?)
        {
            continue;
        }
        out.push(obj.text().to_owned());
    }
    Ok(out)
}

/// A cached object's text whose labels do not decode is a host bug; the plugin gets `other`.
fn cache_error(e: CachedObjectError) -> ClusterError {
    ClusterError::Other(wasmop_core::chain(&e))
}

fn selector(text: Option<&str>) -> Result<Option<LabelSelector>, ClusterError> {
    text.map(|s| LabelSelector::parse(s).map_err(|e| ClusterError::Invalid(e.to_string())))
        .transpose()
}

/// An apply patch must be sent with a field manager and force; other patch types carry the
/// field manager too, so `managedFields` says which plugin wrote what.
fn patch_params(patch: &Patch<Json>, plugin: &PluginName) -> PatchParams {
    match patch {
        Patch::Apply(_) => PatchParams::apply(&plugin.field_manager()).force(),
        _ => PatchParams {
            field_manager: Some(plugin.field_manager()),
            ..PatchParams::default()
        },
    }
}

#[async_trait]
impl Cluster for KubeCluster {
    async fn get(&self, target: &ObjectRef) -> Result<String, ClusterError> {
        let kind = self.resolver.resolve(&target.kind).await?;
        if let Some(store) = self
            .watches
            .cache_for(&kind.resource, target.namespace.as_deref())
        {
            return match store.get(target.namespace.as_deref(), &target.name) {
                Some(obj) => Ok(obj.text().to_owned()),
                None => Err(ClusterError::NotFound(format!("{target} does not exist"))),
            };
        }
        let api = self.api(&kind, target.namespace.as_deref())?;
        self.object("get", &api, |r| r.get(&target.name, &GetParams::default()))
            .await
    }

    async fn list(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<String>, ClusterError> {
        let resolved = self.resolver.resolve(kind).await?;
        let mut out = Vec::new();
        for ns in self.queried(&resolved, namespace) {
            out.extend(self.list_in(&resolved, ns, label_selector).await?);
        }
        Ok(out)
    }

    async fn list_owned(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        owner_uid: &str,
    ) -> Result<Vec<String>, ClusterError> {
        let resolved = self.resolver.resolve(kind).await?;
        let mut out = Vec::new();
        for ns in self.queried(&resolved, namespace) {
            out.extend(self.list_owned_in(&resolved, ns, owner_uid).await?);
        }
        Ok(out)
    }

    async fn create(
        &self,
        object: ObjectText,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        let api = self.api_of(object.target()).await?;
        // The plugin's text is the body, as it sent it.
        let body = object.json().get().as_bytes().to_vec();
        let params = PostParams {
            field_manager: Some(plugin.field_manager()),
            ..PostParams::default()
        };
        self.object("create", &api, |r| r.create(&params, body.clone()))
            .await
    }

    async fn apply(&self, object: ObjectText, plugin: &PluginName) -> Result<String, ClusterError> {
        let api = self.api_of(object.target()).await?;
        let params = PatchParams::apply(&plugin.field_manager()).force();
        let name = object.target().name.clone();
        // A `RawValue` serializes as its text: the body is what the plugin sent.
        let patch = Patch::Apply(object.into_json());
        self.object("apply", &api, |r| r.patch(&name, &params, &patch))
            .await
    }

    async fn patch(
        &self,
        target: &ObjectRef,
        patch: Patch<Json>,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        let kind = self.resolver.resolve(&target.kind).await?;
        let api = self.api(&kind, target.namespace.as_deref())?;
        let params = patch_params(&patch, plugin);
        self.object("patch", &api, |r| r.patch(&target.name, &params, &patch))
            .await
    }

    async fn patch_status(
        &self,
        target: &ObjectRef,
        patch: Patch<Json>,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        let kind = self.resolver.resolve(&target.kind).await?;
        let api = self.api(&kind, target.namespace.as_deref())?;
        let params = patch_params(&patch, plugin);
        self.object("patch-status", &api, |r| {
            r.patch_subresource("status", &target.name, &params, &patch)
        })
        .await
    }

    async fn delete(
        &self,
        target: &ObjectRef,
        params: &DeleteParams,
        _plugin: &PluginName,
    ) -> Result<(), ClusterError> {
        let kind = self.resolver.resolve(&target.kind).await?;
        let api = self.api(&kind, target.namespace.as_deref())?;
        // Deleting an object that is already gone succeeds (the WIT promises it), but only a
        // 404 that names this very object says so: any other 404 (a kind no longer served, a
        // path the server does not route) is reported as the `not-found` it is.
        // The reply (the object, or a Status) is read as text and dropped: decoding it into a
        // `DynamicObject` would fail on an object deeper than serde_json's limit, and kube
        // logs a reply it cannot decode in full.
        let request = kube::core::Request::new(api.resource_url());
        retrying("delete", || async {
            let mut req = request
                .delete(&target.name, params)
                .map_err(kube::Error::BuildRequest)?;
            req.extensions_mut().insert("delete");
            match self.client.request_text(req).await {
                Err(kube::Error::Api(status)) if is_gone(&status, &target.name) => Ok(()),
                other => other.map(drop),
            }
        })
        .await
    }

    async fn emit_event(&self, event: Event, plugin: &PluginName) -> Result<(), ClusterError> {
        let uid = self.uid_of(&event.regarding).await;
        let regarding = ObjectReference {
            api_version: Some(event.regarding.api_version()),
            kind: Some(event.regarding.kind.kind.clone()),
            namespace: event.regarding.namespace.clone(),
            name: Some(event.regarding.name.clone()),
            uid,
            ..ObjectReference::default()
        };
        let record = Record {
            regarding,
            event_type: event.event_type,
            reason: event.reason,
            action: event.action,
            note: event.note,
        };
        // Queued and written in the background (see crate::events): the API server's answer
        // comes after this call has returned, so only a refusal here reaches the plugin.
        self.events.publish(plugin.as_str(), record).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::TypeMeta;
    use serde_json::{Value, json};

    fn cached(namespace: &str, name: &str, labels: Value) -> CachedObject {
        let obj: DynamicObject = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": namespace, "labels": labels,
                         "managedFields": [{"manager": "m"}]},
            "data": {"k": name}
        }))
        .expect("object");
        let types = TypeMeta {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        CachedObject::new(obj, &types).expect("cached")
    }

    fn names(texts: &[String]) -> Vec<String> {
        texts
            .iter()
            .map(|t| {
                parsed(t)["metadata"]["name"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned()
            })
            .collect()
    }

    fn parsed(text: &str) -> Value {
        serde_json::from_str(text).expect("JSON text")
    }

    #[test]
    fn a_cached_list_filters_by_namespace_and_label_selector() {
        let objects = vec![
            cached("a", "web", json!({"app": "web", "tier": "front"})),
            cached("a", "db", json!({"app": "db"})),
            cached("b", "web", json!({"app": "web"})),
        ];
        let web = LabelSelector::parse("app=web").expect("selector");
        let all_web = select(objects.clone(), None, Some(&web)).expect("list");
        assert_eq!(names(&all_web), ["web", "web"]);
        let in_a = select(objects.clone(), Some("a"), None).expect("list");
        assert_eq!(names(&in_a), ["web", "db"]);
        let not_web = LabelSelector::parse("app!=web").expect("selector");
        let db_text = objects[1].text().to_owned();
        let other = select(objects, Some("a"), Some(&not_web)).expect("list");
        assert_eq!(names(&other), ["db"]);
        assert_eq!(other[0], db_text, "the cached text, handed over as it is");
        assert_eq!(parsed(&other[0])["apiVersion"], "v1");
        assert!(parsed(&other[0])["metadata"].get("managedFields").is_none());
    }
}
