//! One controller per plugin (per namespace when the plugin is confined to namespaces), fed
//! by the shared watches: the triggers of its kinds, mapped to primary objects, drive a work
//! loop ([`runner`]) that calls [`reconcile::reconcile`].
//!
//! # Guarantees
//! - Level-triggered: a reconcile gets the object as it is in the cache now, not the change.
//! - Never the same object twice at once ([`runner`]), at most the plugin's
//!   `concurrency` reconciles of one plugin at once and at most the host's `concurrency` over
//!   all plugins (a semaphore held for the whole call).
//! - Errors back off per object ([`backoff`]), exponentially with jitter and a cap; a success
//!   resets it. A plugin's `requeue-after` is honoured, raised to the plugin's
//!   `minRequeueAfter` when it is shorter.
//! - No object is reconciled more often than the plugin's `objectRateLimit` allows
//!   ([`throttle`]), whether its reconciles come from requeues, from its own writes echoing
//!   back through the watch or from anything else; a first reconcile never waits for it.
//! - Changes to a primary object that do not bump its generation do not trigger a reconcile
//!   ([`filter`]) unless the plugin sets `reconcile-on-metadata-change`.
//! - Every object is reconciled again every resync period.
//! - A kind that the API server does not serve yet (a missing CRD) makes the plugin wait: it
//!   reports `waiting-for-kinds` (log, `wasmop_plugin_state`), retries discovery with backoff,
//!   and starts when the kind appears.
//!
//! - Leader election gates reconciling here, so a controller started at any time is gated:
//!   a plugin's watches start and its caches fill at once, but its reconcile loop starts only
//!   while [`Shared::leading`] is `true`, and stops at once (in-flight reconciles dropped) when
//!   it turns `false`.
//! - The plugin's state (`syncing`, then `running` or `standby`; `waiting-for-kinds`) is
//!   recorded in [`Shared::status`], which `/readyz` and `/status` report.
//!
//! # Cancellation
//! When the shutdown signal fires, controllers stop taking new work and wait for running
//! reconciles to finish.

pub mod backoff;
pub mod counted;
pub mod filter;
pub mod finalizer;
pub mod mapping;
pub mod queue;
pub mod reconcile;
pub mod runner;
pub mod streak;
pub mod throttle;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt, future};
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::core::GroupVersionKind;
use tokio::sync::{Semaphore, watch};

use self::backoff::Backoffs;
use self::filter::GenerationFilter;
use self::mapping::Primary;
use crate::events::EventSink;
use crate::kubeapi::KubeCluster;
use crate::kubeapi::discovery::{Resolved, Resolver};
use crate::metrics::{Metrics, PluginState};
use crate::orphans::{Entry, Orphans};
use crate::settings::PluginSettings;
use crate::status::{State, Status};
use crate::watches::{CachedObject, Change, ObjectKey, WatchKey, Watches};
use wasmop_core::chain;
use wasmop_core::cluster::selector::LabelSelector;
use wasmop_core::cluster::{Cluster, ClusterError, ObjectRef};
use wasmop_runtime::Plugin;

/// The first wait before discovery is retried for a missing kind.
const DISCOVERY_RETRY_FIRST: Duration = Duration::from_secs(1);
/// Discovery is retried at least every 30 s: a CRD installed later is picked up within that,
/// at the cost of one discovery request per waiting plugin per 30 s.
const DISCOVERY_RETRY_CAP: Duration = Duration::from_secs(30);

/// What every plugin's controllers share.
#[derive(Clone)]
pub struct Shared {
    /// The host's Kubernetes client.
    pub client: Client,
    /// Kind resolution.
    pub resolver: Resolver,
    /// The shared watches.
    pub watches: Watches,
    /// The cluster handle plugins' host calls use (scoped per plugin by [`run`]).
    pub cluster: KubeCluster,
    /// Event writer.
    pub events: Arc<EventSink>,
    /// Metrics.
    pub metrics: Metrics,
    /// The host-wide concurrency bound.
    pub global: Arc<Semaphore>,
    /// Periodic resync, if any.
    pub resync: Option<Duration>,
    /// Becomes `true` when the host shuts down.
    pub shutdown: watch::Receiver<bool>,
    /// `true` while this host may reconcile: always without leader election, else while it
    /// holds the leader Lease.
    pub leading: watch::Receiver<bool>,
    /// What `/readyz` and `/status` report.
    pub status: Status,
    /// Where plugins' finalizers are recorded.
    pub orphans: Orphans,
}

/// What one plugin's reconciles need.
pub struct PluginCtx {
    /// The version reconciles call: each reconcile takes the current one when it starts and
    /// finishes on it, so a swap never interrupts a call.
    plugin: watch::Receiver<Plugin>,
    /// The cluster as this plugin's host calls see it (confined to its namespaces).
    cluster: Arc<dyn Cluster>,
    shared: Shared,
    primary: Primary,
    namespaces: Option<std::collections::BTreeSet<String>>,
    selector: Option<LabelSelector>,
    permits: Semaphore,
    backoffs: Backoffs<ObjectRef>,
    /// The workqueue figures of this plugin.
    queue: queue::Queue,
    streak: Arc<streak::Streak>,
    /// The shortest requeue-after honoured; a shorter one is raised to it.
    min_requeue_after: Duration,
}

impl PluginCtx {
    /// The version a reconcile starting now calls.
    pub fn current(&self) -> Plugin {
        self.plugin.borrow().clone()
    }

    /// Whether `obj` is one the plugin may see: inside its namespaces and matching its
    /// primary selector. (Mappings from other kinds can name objects outside them.)
    fn in_scope(&self, obj: &CachedObject) -> bool {
        if let (Some(allowed), true) = (&self.namespaces, self.primary.namespaced)
            && !obj
                .namespace()
                .is_some_and(|ns| allowed.contains(ns.as_ref()))
        {
            return false;
        }
        match &self.selector {
            Some(s) => selected(s, obj),
            None => true,
        }
    }

    /// Reports the objects a trigger names as queued, and passes them on.
    fn queued(&self, refs: Vec<ObjectKey>) -> Vec<ObjectKey> {
        for r in &refs {
            self.queue.added(r.namespace.as_deref(), &r.name);
        }
        refs
    }

    fn target_of(&self, obj: &CachedObject) -> ObjectRef {
        let r = &self.primary.resource;
        // One read of the key from the text for both parts.
        let key = ObjectKey::of(obj);
        ObjectRef::new(
            GroupVersionKind::gvk(&r.group, &r.version, &r.kind),
            key.namespace,
            key.name,
        )
    }

    fn primary_api(&self, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace {
            Some(ns) => {
                Api::namespaced_with(self.shared.client.clone(), ns, &*self.primary.resource)
            }
            None => Api::all_with(self.shared.client.clone(), &*self.primary.resource),
        }
    }
}

/// Why a plugin's controller cannot be set up (other than a kind that is not served yet,
/// which is waited for).
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The plugin's primary selector is not a valid label selector.
    #[error("plugin `{plugin}` declares an invalid primary selector")]
    Selector {
        /// The plugin.
        plugin: String,
        /// Why.
        #[source]
        source: wasmop_core::cluster::selector::SelectorError,
    },
}

struct Kinds {
    primary: Resolved,
    owned: Vec<Resolved>,
    watched: Vec<(
        Resolved,
        Option<LabelSelector>,
        wasmop_core::plugin::Mapping,
    )>,
}

async fn resolve_all(plugin: &Plugin, resolver: &Resolver) -> Result<Kinds, ClusterError> {
    let info = plugin.info();
    let primary = resolver.resolve(&info.primary).await?;
    let mut owned = Vec::new();
    for k in &info.owns {
        owned.push(resolver.resolve(k).await?);
    }
    let mut watched = Vec::new();
    for w in &info.watches {
        let selector = w
            .selector
            .as_deref()
            .map(LabelSelector::parse)
            .transpose()
            .map_err(|e| ClusterError::Invalid(e.to_string()))?;
        watched.push((
            resolver.resolve(&w.kind).await?,
            selector,
            w.mapping.clone(),
        ));
    }
    Ok(Kinds {
        primary,
        owned,
        watched,
    })
}

/// Waits until every kind of the plugin is served, reporting the wait.
async fn wait_for_kinds(plugin: &Plugin, shared: &Shared) -> Option<Kinds> {
    let name = plugin.info().name.as_str();
    let mut delay = DISCOVERY_RETRY_FIRST;
    let mut shutdown = shared.shutdown.clone();
    loop {
        match resolve_all(plugin, &shared.resolver).await {
            Ok(kinds) => return Some(kinds),
            Err(error) => {
                shared
                    .metrics
                    .plugin_state(name, PluginState::WaitingForKinds);
                shared.status.record(name, State::WaitingForKinds, None);
                tracing::warn!(plugin = name, %error, retry_in_s = delay.as_secs(), "plugin waits for its kinds to be served");
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    _ = shutdown.wait_for(|stop| *stop) => return None,
                }
                delay = (delay * 2).min(DISCOVERY_RETRY_CAP);
            }
        }
    }
}

/// Runs the plugin until `shared.shutdown` fires, calling whichever version `version` holds
/// when each reconcile starts. A new version must declare the same kinds (the registry
/// restarts the controller otherwise): the watches are set up from the version at start.
/// Every reconcile's outcome is recorded in `streak`.
pub async fn run(
    version: watch::Receiver<Plugin>,
    settings: PluginSettings,
    shared: Shared,
    streak: Arc<streak::Streak>,
) -> Result<(), ControllerError> {
    let plugin = version.borrow().clone();
    let info = plugin.info().clone();
    let name = info.name.to_string();
    let selector = info
        .primary_selector
        .as_deref()
        .map(LabelSelector::parse)
        .transpose()
        .map_err(|source| ControllerError::Selector {
            plugin: name.clone(),
            source,
        })?;
    let Some(kinds) = wait_for_kinds(&plugin, &shared).await else {
        return Ok(());
    };
    let primary = Primary {
        resource: Arc::new(kinds.primary.resource.clone()),
        namespaced: kinds.primary.namespaced,
    };
    let scopes: Vec<Option<String>> = match &settings.namespaces {
        Some(set) => set.iter().cloned().map(Some).collect(),
        None => vec![None],
    };
    let ctx = Arc::new(PluginCtx {
        plugin: version,
        cluster: Arc::new(counted::Counted::new(
            Arc::new(shared.cluster.scoped(settings.namespaces.clone())),
            shared.metrics.clone(),
            &name,
        )),
        shared: shared.clone(),
        primary: primary.clone(),
        namespaces: settings.namespaces.clone(),
        selector,
        permits: Semaphore::new(usize::from(settings.concurrency)),
        backoffs: Backoffs::default(),
        queue: queue::Queue::new(&name, shared.metrics.clone()),
        streak,
        min_requeue_after: settings.min_requeue_after,
    });
    // Written once, by the first scope that starts reconciling: before any finalizer is
    // added, and never by a standby.
    let recorded = Arc::new(tokio::sync::OnceCell::<()>::new());
    let record_entry = finalizer_entry(&info, &settings);
    shared.metrics.plugin_state(&name, PluginState::Running);
    shared.metrics.max_concurrent(&name, settings.concurrency);
    shared.status.record(&name, State::Syncing, None);
    tracing::info!(
        plugin = %name,
        primary = %format!("{}/{}", primary.resource.api_version, primary.resource.kind),
        owns = kinds.owned.len(),
        watches = kinds.watched.len(),
        "plugin controller starting"
    );
    // A cluster-scoped primary kind has one controller; a namespaced one has one per scope.
    let controller_scopes = if primary.namespaced {
        scopes.clone()
    } else {
        vec![None]
    };
    // The last scope whose caches are synced reports the plugin synced.
    let unsynced = Arc::new(AtomicUsize::new(controller_scopes.len()));
    let runs = controller_scopes.into_iter().map(|scope| {
        let ctx = ctx.clone();
        let shared = shared.clone();
        let kinds_scope = |k: &Resolved| -> Vec<Option<String>> {
            if !k.namespaced {
                vec![None]
            } else if scope.is_some() {
                vec![scope.clone()]
            } else {
                scopes.clone()
            }
        };
        let primary_watch = shared.watches.watch(WatchKey {
            resource: kinds.primary.resource.clone(),
            namespace: if primary.namespaced { scope.clone() } else { None },
        });
        let store = primary_watch.store();
        let mut gen_filter = GenerationFilter::default();
        let every_change = info.reconcile_on_metadata_change;
        let scoped = ctx.clone();
        let primary_stream = primary_watch.subscribe().filter_map(move |change| {
            let admit = match &change {
                Change::Deleted(obj) => {
                    gen_filter.forget(&obj.meta());
                    false
                }
                Change::Applied(obj) => scoped.in_scope(obj) && (every_change || gen_filter.admit(&obj.meta())),
            };
            let out = admit.then(|| {
                let obj = change.object();
                let key = ObjectKey::of(obj);
                scoped.queue.added(key.namespace.as_deref(), &key.name);
                key
            });
            future::ready(out)
        });
        // Every trigger of this scope's controller, as the primary objects it names.
        let mut triggers: Vec<BoxStream<'static, ObjectKey>> = vec![primary_stream.boxed()];
        for owned in &kinds.owned {
            let (p, q) = (primary.clone(), ctx.clone());
            let stream = merged(&shared, owned, kinds_scope(owned), None);
            triggers.push(stream.flat_map(move |child| futures::stream::iter(q.queued(p.owners_of(&child)))).boxed());
        }
        for (kind, selector, mapping) in &kinds.watched {
            let (p, q) = (primary.clone(), ctx.clone());
            let mapping = mapping.clone();
            let primaries = store.clone();
            let stream = merged(&shared, kind, kinds_scope(kind), selector.clone());
            triggers.push(stream.flat_map(move |other| futures::stream::iter(q.queued(p.mapped(&mapping, &other, &primaries)))).boxed());
        }
        if let Some(period) = shared.resync {
            let ticks = futures::stream::unfold(tokio::time::interval_at(tokio::time::Instant::now() + period, period), |mut i| async move {
                i.tick().await;
                Some(((), i))
            });
            let all = store.clone();
            triggers.push(ticks.flat_map(move |()| {
                let refs: Vec<_> = all.state().iter().map(ObjectKey::of).collect();
                futures::stream::iter(refs)
            }).boxed());
        }
        let triggers = futures::stream::select_all(triggers);
        let plugin_name = name.clone();
        let queue_ctx = ctx.clone();
        // Every watch this scope's controller reads: the primary kind's and each owned and
        // watched kind's in the scopes it covers.
        let mut feeds = vec![primary_watch.clone()];
        for kind in kinds.owned.iter().chain(kinds.watched.iter().map(|(k, _, _)| k)) {
            for ns in kinds_scope(kind) {
                feeds.push(shared.watches.watch(WatchKey {
                    resource: kind.resource.clone(),
                    namespace: ns,
                }));
            }
        }
        let unsynced = unsynced.clone();
        let (recorded, record_entry) = (recorded.clone(), record_entry.clone());
        let concurrency = usize::from(settings.concurrency);
        let object_rate = settings.object_rate;
        async move {
            let mut shutdown = shared.shutdown.clone();
            tokio::select! {
                _ = future::join_all(feeds.iter().map(|w| w.ready())) => {}
                _ = shutdown.wait_for(|stop| *stop) => return,
            }
            if unsynced.fetch_sub(1, Ordering::AcqRel) == 1 {
                let leading = *shared.leading.borrow();
                let state = if leading { State::Running } else { State::Standby };
                // Logged before readiness can flip, so a log reader never sees ready first.
                tracing::info!(plugin = %plugin_name, leading, "plugin caches synced");
                shared.status.record(&plugin_name, state, None);
            }
            let mut leading = shared.leading.clone();
            tokio::select! {
                r = leading.wait_for(|l| *l) => if r.is_err() { return },
                _ = shutdown.wait_for(|stop| *stop) => return,
            }
            if let Some(entry) = &record_entry {
                // Without the record the orphan rule cannot release this finalizer if the
                // plugin is removed later; the plugin still runs, and the failure is logged.
                recorded
                    .get_or_init(|| async {
                        if let Err(error) = shared.orphans.record(&ctx.current().info().name, entry).await {
                            tracing::error!(plugin = %plugin_name, error = %chain(&error), "cannot record the plugin's finalizer");
                        }
                    })
                    .await;
            }
            let stop = async move {
                let _ = shutdown.wait_for(|stop| *stop).await;
            };
            let start = |key: ObjectKey| {
                let Some(obj) = store.get(key.namespace.as_deref(), &key.name).map(Arc::new) else {
                    queue_ctx.queue.dropped(key.namespace.as_deref(), &key.name);
                    tracing::debug!(plugin = %plugin_name, object = %key, "object gone before its reconcile");
                    return None;
                };
                let ctx = ctx.clone();
                Some(async move {
                    match reconcile::reconcile(obj.clone(), ctx.clone()).await {
                        Ok(requeue) => requeue,
                        Err(error) => Some(reconcile::error_policy(obj, &error, ctx)),
                    }
                })
            };
            let (metrics, throttled_plugin) = (shared.metrics.clone(), plugin_name.clone());
            let loop_settings = runner::Settings {
                concurrency,
                rate: object_rate,
                on_throttled: move |key: &ObjectKey| {
                    metrics.throttled(&throttled_plugin);
                    tracing::debug!(plugin = %throttled_plugin, object = %key, "object reconciled as often as its rate limit allows: it waits for its next token");
                },
            };
            let reconciling = runner::run(triggers, loop_settings, start, stop);
            // Without the lease nothing may reconcile: dropping the loop drops in-flight
            // reconciles at their next await point.
            tokio::select! {
                () = reconciling => {}
                () = async {
                    // A closed channel (the host is going away) is not a loss: keep draining.
                    if leading.wait_for(|l| !*l).await.is_err() {
                        future::pending::<()>().await;
                    }
                } => {
                    tracing::warn!(plugin = %plugin_name, "leadership lost: reconciling stopped");
                }
            }
        }
    });
    future::join_all(runs).await;
    shared.status.record(&name, State::Stopped, None);
    tracing::info!(plugin = %name, "plugin controller stopped");
    Ok(())
}

/// Whether `obj`'s labels match `selector`. The labels are read from the object's cached
/// text, which the host wrote itself; should that ever fail, the failure is logged and the
/// object left out.
fn selected(selector: &LabelSelector, obj: &CachedObject) -> bool {
    match obj.labels() {
        Ok(labels) => selector.matches(&labels),
        Err(error) => {
            tracing::error!(error = %chain(&error), "cannot read a cached object's labels");
            false
        }
    }
}

/// The finalizer record entry of a plugin that declares a finalizer.
pub fn finalizer_entry(
    info: &wasmop_core::plugin::PluginInfo,
    settings: &PluginSettings,
) -> Option<Entry> {
    info.finalizer.as_ref().map(|f| Entry {
        api_version: info.primary.api_version(),
        kind: info.primary.kind.clone(),
        finalizer: f.clone(),
        namespaces: settings.namespaces.clone(),
    })
}

/// The changes of `kind` in each of `scopes`, filtered by `selector`, as one trigger stream.
fn merged(
    shared: &Shared,
    kind: &Resolved,
    scopes: Vec<Option<String>>,
    selector: Option<LabelSelector>,
) -> impl Stream<Item = CachedObject> + Send + 'static {
    let streams = scopes.into_iter().map(|ns| {
        shared
            .watches
            .watch(WatchKey {
                resource: kind.resource.clone(),
                namespace: ns,
            })
            .subscribe()
            .boxed()
    });
    futures::stream::select_all(streams).filter_map(move |change| {
        let obj = change.object();
        let keep = selector.as_ref().is_none_or(|s| selected(s, obj));
        future::ready(keep.then(|| obj.clone()))
    })
}
