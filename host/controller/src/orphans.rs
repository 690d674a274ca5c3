//! Finalizers of plugins that are gone: the rule that keeps a namespace from being stuck
//! forever behind a finalizer nobody will remove (kopf's most-cited trap).
//!
//! # The rule
//! 1. When a plugin with a finalizer starts, the host records (plugin, kind, finalizer,
//!    namespaces) under the plugin's name in the ConfigMap [`RECORD`] in the host's namespace.
//! 2. When the host starts and a recorded plugin is not running (removed from the sources,
//!    failing to load, or no longer declaring that finalizer on that kind), the host waits the
//!    grace period (`orphanedFinalizerGrace`, 10 minutes by default, so that a plugin being
//!    replaced or fixed can come back), then removes that finalizer from every object of the
//!    recorded kind in the recorded namespaces, writes a Warning Event `FinalizerReleased` on
//!    each, and deletes the record. The plugin's `cleanup` does not run for those objects.
//! 3. A plugin that comes back adds its finalizer again before its first reconcile.
//!
//! So an object being deleted waits at most the grace period plus one list-and-patch pass,
//! however the plugin disappeared.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams, TypeMeta};
use kube::core::GroupVersionKind;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::controller::finalizer;
use crate::controller::reconcile::reference;
use crate::events::{EventSink, Record};
use crate::kubeapi::discovery::{Resolved, Resolver};
use crate::watches::listwatch;
use wasmop_core::cluster::{EventType, ObjectRef, gvk_of};
use wasmop_core::plugin::PluginName;

/// The ConfigMap that records which plugins have finalizers on which kinds.
pub(crate) const RECORD: &str = "wasmop-finalizers";
/// The field manager of the host's own writes to the record.
const FIELD_MANAGER: &str = "wasmop";
/// Objects listed per page while releasing, to bound the host's memory on large kinds.
const PAGE: u32 = 500;

/// One recorded finalizer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// `apiVersion` of the kind.
    pub(crate) api_version: String,
    /// The kind.
    pub(crate) kind: String,
    /// The finalizer.
    pub(crate) finalizer: String,
    /// Namespaces the plugin was confined to; `None` for all.
    pub(crate) namespaces: Option<BTreeSet<String>>,
}

impl Entry {
    fn gvk(&self) -> Option<GroupVersionKind> {
        gvk_of(&self.api_version, &self.kind).ok()
    }
}

/// Why the record could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum OrphanError {
    /// Reading or writing the record ConfigMap failed.
    #[error("cannot {verb} the finalizer record {namespace}/{RECORD}")]
    Record {
        /// `read` or `write`.
        verb: &'static str,
        /// The host's namespace.
        namespace: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Encoding an entry failed (a host bug).
    #[error("cannot encode the finalizer record entry")]
    Encode(#[source] serde_json::Error),
}

/// The finalizer record in the host's namespace.
#[derive(Clone)]
pub struct Orphans {
    api: Api<ConfigMap>,
    namespace: String,
}

impl Orphans {
    /// The record in `namespace`.
    pub fn new(client: Client, namespace: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_owned(),
        }
    }

    /// Records that `plugin` puts `entry`'s finalizer on objects.
    pub(crate) async fn record(
        &self,
        plugin: &PluginName,
        entry: &Entry,
    ) -> Result<(), OrphanError> {
        let value = serde_json::to_string(entry).map_err(OrphanError::Encode)?;
        let patch = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": RECORD},
            "data": {plugin.as_str(): value},
        });
        self.api
            .patch(
                RECORD,
                &PatchParams::apply(&plugin.field_manager()).force(),
                &Patch::Apply(patch),
            )
            .await
            .map(|_| ())
            .map_err(|source| self.error("write", source))
    }

    /// Every recorded entry, by plugin name (entries that do not parse are skipped).
    pub async fn entries(&self) -> Result<BTreeMap<String, Entry>, OrphanError> {
        let Some(cm) = self
            .api
            .get_opt(RECORD)
            .await
            .map_err(|s| self.error("read", s))?
        else {
            return Ok(BTreeMap::new());
        };
        Ok(cm
            .data
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(plugin, text)| match serde_json::from_str(&text) {
                Ok(entry) => Some((plugin, entry)),
                Err(error) => {
                    tracing::warn!(plugin, %error, "unreadable finalizer record entry ignored");
                    None
                }
            })
            .collect())
    }

    async fn forget(&self, plugin: &str) -> Result<(), OrphanError> {
        let patch = json!({"data": {plugin: null}});
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        self.api
            .patch(RECORD, &params, &Patch::Merge(patch))
            .await
            .map(|_| ())
            .map_err(|source| self.error("write", source))
    }

    fn error(&self, verb: &'static str, source: kube::Error) -> OrphanError {
        OrphanError::Record {
            verb,
            namespace: self.namespace.clone(),
            source,
        }
    }
}

/// Entries whose plugin is not running with that finalizer on that kind.
pub fn orphaned(
    recorded: BTreeMap<String, Entry>,
    running: &BTreeMap<String, Entry>,
) -> Vec<(String, Entry)> {
    recorded
        .into_iter()
        .filter(|(plugin, entry)| {
            running.get(plugin).is_none_or(|r| {
                r.kind != entry.kind
                    || r.api_version != entry.api_version
                    || r.finalizer != entry.finalizer
            })
        })
        .collect()
}

/// Waits `grace`, then releases the finalizer of `entry` from every object that carries it
/// and forgets the entry. Retries with backoff until it has done so.
pub async fn release(
    orphans: Orphans,
    client: Client,
    resolver: Resolver,
    events: std::sync::Arc<EventSink>,
    plugin: String,
    entry: Entry,
    grace: Duration,
) {
    tracing::warn!(
        plugin,
        finalizer = %entry.finalizer,
        kind = %entry.kind,
        grace_s = grace.as_secs(),
        "plugin is not running but its finalizer is recorded; releasing it after the grace period"
    );
    tokio::time::sleep(grace).await;
    let mut delay = Duration::from_secs(1);
    loop {
        match release_once(&orphans, &client, &resolver, &events, &plugin, &entry).await {
            Ok(released) => {
                tracing::warn!(plugin, finalizer = %entry.finalizer, released, "orphaned finalizer released");
                return;
            }
            Err(error) => {
                tracing::warn!(plugin, error = %wasmop_core::chain(&*error), "releasing an orphaned finalizer failed; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(60));
            }
        }
    }
}

/// A failure of one release pass (retried by [`release`], which only logs it).
type ReleaseError = Box<dyn std::error::Error + Send + Sync>;

/// One pass of [`release`]: the finalizer off every object of the entry's kind, then the
/// entry forgotten. Gives how many objects it released.
async fn release_once(
    orphans: &Orphans,
    client: &Client,
    resolver: &Resolver,
    events: &EventSink,
    plugin: &str,
    entry: &Entry,
) -> Result<usize, ReleaseError> {
    let Some(gvk) = entry.gvk() else {
        orphans.forget(plugin).await?;
        return Ok(0);
    };
    let kind = match resolver.resolve(&gvk).await {
        Ok(kind) => kind,
        // The kind is gone (its CRD deleted): so are its objects and their finalizers.
        Err(wasmop_core::cluster::ClusterError::NotFound(_)) => {
            orphans.forget(plugin).await?;
            return Ok(0);
        }
        Err(e) => return Err(Box::new(e)),
    };
    let apis: Vec<Api<DynamicObject>> = match (&entry.namespaces, kind.namespaced) {
        (Some(set), true) => set
            .iter()
            .map(|ns| Api::namespaced_with(client.clone(), ns, &kind.resource))
            .collect(),
        _ => vec![Api::all_with(client.clone(), &kind.resource)],
    };
    let release = Release {
        client,
        events,
        plugin,
        name: PluginName::new(plugin.to_owned())?,
        entry,
        gvk,
        kind,
    };
    let mut released = 0;
    for api in apis {
        released += release.listed_by(&api).await?;
    }
    orphans.forget(plugin).await?;
    Ok(released)
}

/// What releasing one plugin's orphaned finalizer from objects of its kind needs.
struct Release<'a> {
    client: &'a Client,
    events: &'a EventSink,
    /// The plugin, as recorded.
    plugin: &'a str,
    /// The plugin's name, validated (the finalizer patch's field manager is made from it).
    name: PluginName,
    entry: &'a Entry,
    gvk: GroupVersionKind,
    kind: Resolved,
}

impl Release<'_> {
    /// Releases the finalizer from every object `api` lists that carries it, page by page;
    /// gives how many.
    async fn listed_by(&self, api: &Api<DynamicObject>) -> Result<usize, ReleaseError> {
        let types = TypeMeta {
            api_version: self.kind.resource.api_version.clone(),
            kind: self.kind.resource.kind.clone(),
        };
        let mut released = 0;
        let mut params = ListParams::default().limit(PAGE);
        let request = kube::core::Request::new(api.resource_url());
        loop {
            // Read as text and item by item, at any depth: one object kube's decoder cannot
            // take must not stop the release of every other.
            let mut req = request.list(&params).map_err(kube::Error::BuildRequest)?;
            req.extensions_mut().insert("list");
            let text = self.client.request_text(req).await?;
            let page = listwatch::page(&text, &types, None)?;
            for obj in &page.objects {
                let meta = obj.meta();
                let carries = |f: &String| *f == self.entry.finalizer;
                if meta.finalizers.iter().flatten().any(carries) {
                    self.release(&meta).await?;
                    released += 1;
                }
            }
            match page.continue_token {
                Some(token) => params = params.continue_token(&token),
                None => return Ok(released),
            }
        }
    }

    /// Removes the finalizer from one object and says so in a Warning Event on it.
    async fn release(&self, meta: &ObjectMeta) -> Result<(), ReleaseError> {
        let (client, resource) = (self.client.clone(), &self.kind.resource);
        let scoped: Api<DynamicObject> = match meta.namespace.as_deref() {
            Some(ns) => Api::namespaced_with(client, ns, resource),
            None => Api::all_with(client, resource),
        };
        finalizer::remove(&scoped, meta, &self.entry.finalizer, &self.name).await?;
        let target = ObjectRef::new(
            self.gvk.clone(),
            meta.namespace.clone(),
            meta.name.clone().unwrap_or_default(),
        );
        let record = Record {
            regarding: reference(meta, &target),
            event_type: EventType::Warning,
            reason: "FinalizerReleased".into(),
            action: "ReleaseFinalizer".into(),
            note: format!(
                "plugin `{}` is not running, so the host removed its finalizer `{}` without calling its cleanup",
                self.plugin, self.entry.finalizer
            ),
        };
        // Written in the background: a failure is logged and counted by the sink.
        self.events.publish(self.plugin, record).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(finalizer: &str) -> Entry {
        Entry {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            finalizer: finalizer.into(),
            namespaces: None,
        }
    }

    #[test]
    fn a_recorded_plugin_that_is_not_running_is_orphaned() {
        let recorded = BTreeMap::from([
            ("mirror".to_owned(), entry("a/b")),
            ("db".to_owned(), entry("c/d")),
        ]);
        let running = BTreeMap::from([("db".to_owned(), entry("c/d"))]);
        let orphans = orphaned(recorded, &running);
        assert_eq!(orphans.len(), 1);
        assert_eq!(orphans[0].0, "mirror");
    }

    #[test]
    fn a_running_plugin_with_another_finalizer_orphans_the_old_one() {
        let recorded = BTreeMap::from([("db".to_owned(), entry("old/f"))]);
        let running = BTreeMap::from([("db".to_owned(), entry("new/f"))]);
        assert_eq!(orphaned(recorded, &running).len(), 1);
    }
}
