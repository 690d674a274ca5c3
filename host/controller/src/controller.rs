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
//! - A reconcile's own write to an owned or watched object, coming back through the watch,
//!   does not reconcile the object that made it again ([`echoes`]); any other change does.
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

pub(crate) mod backoff;
pub(crate) mod counted;
pub(crate) mod echoes;
pub(crate) mod filter;
pub mod finalizer;
mod kinds;
pub(crate) mod mapping;
pub(crate) mod queue;
pub(crate) mod reconcile;
pub(crate) mod runner;
mod scope;
pub mod streak;
pub mod throttle;
mod triggers;

use std::sync::Arc;
use std::time::Duration;

use futures::future;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::core::GroupVersionKind;
use tokio::sync::{Semaphore, watch};

use self::backoff::Backoffs;
use self::kinds::Kinds;
use self::mapping::Primary;
use self::triggers::Scope;
use crate::events::EventSink;
use crate::kubeapi::KubeCluster;
use crate::kubeapi::discovery::Resolver;
use crate::metrics::{Metrics, PluginState};
use crate::orphans::{Entry, Orphans};
use crate::settings::PluginSettings;
use crate::status::{State, Status};
use crate::watches::{CachedObject, ObjectKey, Watches};
use wasmop_core::chain;
use wasmop_core::cluster::selector::LabelSelector;
use wasmop_core::cluster::{Cluster, ObjectRef};
use wasmop_core::plugin::PluginInfo;
use wasmop_runtime::Plugin;

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
    /// Reconcile every object of a plugin again when a new version of it is swapped in
    /// (`wasmop dev`: a saved edit shows on the objects at once, not at their next change).
    pub reconcile_on_new_version: bool,
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

impl Shared {
    /// The cluster as the host calls of plugin `name` see it: confined to `namespaces`
    /// (`None`: every namespace) and counted in the host-call metrics under its name. Its
    /// reconciles and its admission reviews use the same.
    pub fn plugin_cluster(
        &self,
        name: &str,
        namespaces: Option<std::collections::BTreeSet<String>>,
    ) -> Arc<dyn Cluster> {
        Arc::new(counted::Counted::new(
            Arc::new(self.cluster.scoped(namespaces)),
            self.metrics.clone(),
            name,
        ))
    }
}

/// What one plugin's reconciles need.
pub(crate) struct PluginCtx {
    /// The version reconciles call: each reconcile takes the current one when it starts and
    /// finishes on it, so a swap never interrupts a call.
    plugin: watch::Receiver<Plugin>,
    /// What the version the controller started with declared: its kinds and finalizer. A
    /// version swapped in declares the same (the registry restarts the controller when
    /// they differ), but for its version string.
    info: Arc<PluginInfo>,
    /// The cluster as this plugin's host calls see it (confined to its namespaces).
    cluster: Arc<dyn Cluster>,
    /// The writes of this controller's reconciles whose echoes are awaited.
    own_writes: Arc<echoes::OwnWrites>,
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
    /// The context of a plugin run with `settings`, calling whichever version `version` holds.
    fn new(
        version: watch::Receiver<Plugin>,
        info: &PluginInfo,
        settings: &PluginSettings,
        shared: &Shared,
        primary: Primary,
        selector: Option<LabelSelector>,
        streak: Arc<streak::Streak>,
    ) -> Self {
        let name = info.name.to_string();
        Self {
            plugin: version,
            info: Arc::new(info.clone()),
            cluster: shared.plugin_cluster(&name, settings.namespaces.clone()),
            own_writes: Arc::new(echoes::OwnWrites::new(
                shared.metrics.clone(),
                &name,
                &primary.resource.group,
                &primary.resource.kind,
            )),
            shared: shared.clone(),
            primary,
            namespaces: settings.namespaces.clone(),
            selector,
            permits: Semaphore::new(usize::from(settings.concurrency)),
            backoffs: Backoffs::default(),
            queue: queue::Queue::new(&name, shared.metrics.clone()),
            streak,
            min_requeue_after: settings.min_requeue_after,
        }
    }

    /// The version a reconcile starting now calls.
    pub(crate) fn current(&self) -> Plugin {
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

    /// Of the primary objects `mapped` that a `change` of `kind` maps to, the ones it should
    /// reconcile: all but the one whose reconcile made this very version ([`echoes`]).
    fn unechoed(
        &self,
        kind: &crate::kubeapi::discovery::Resolved,
        change: &crate::watches::Change,
        mapped: Vec<ObjectKey>,
    ) -> Vec<ObjectKey> {
        let resource = &kind.resource;
        self.own_writes
            .triggered(&resource.group, &resource.kind, change, mapped)
    }

    /// The cluster the plugin call of the reconcile of `target` reaches: this plugin's, with
    /// its writes remembered so that their echoes do not reconcile `target` again.
    fn cluster_for(&self, target: &ObjectRef) -> Arc<echoes::Recording> {
        Arc::new(echoes::Recording::new(
            self.cluster.clone(),
            self.own_writes.clone(),
            ObjectKey::new(target.namespace.as_deref(), &target.name),
        ))
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
    /// The plugin only serves admission: it has nothing to reconcile.
    #[error("plugin `{0}` exports no reconciler: it serves admission only, and has no controller")]
    NoReconciler(String),
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
    let Some(info) = plugin.reconciler().cloned() else {
        return Err(ControllerError::NoReconciler(plugin.name().to_string()));
    };
    let name = info.name.to_string();
    let selector = primary_selector(&info)?;
    let Some(kinds) = kinds::wait_for_kinds(&info, &shared).await else {
        return Ok(());
    };
    let primary = Primary {
        resource: Arc::new(kinds.primary.resource.clone()),
        namespaced: kinds.primary.namespaced,
    };
    let ctx = PluginCtx::new(
        version, &info, &settings, &shared, primary, selector, streak,
    );
    let ctx = Arc::new(ctx);
    starting(&shared, &name, &settings, &kinds);
    let scopes: Vec<Option<String>> = match &settings.namespaces {
        Some(set) => set.iter().cloned().map(Some).collect(),
        None => vec![None],
    };
    // A cluster-scoped primary kind has one controller; a namespaced one has one per scope.
    let controller_scopes = if ctx.primary.namespaced {
        scopes.clone()
    } else {
        vec![None]
    };
    let startup = scope::Startup::new(controller_scopes.len(), finalizer_entry(&info, &settings));
    let runs = controller_scopes.into_iter().map(|this| {
        let scope = Scope {
            this,
            all: scopes.clone(),
        };
        let every_change = info.reconcile_on_metadata_change;
        let (ctx, startup) = (ctx.clone(), startup.clone());
        scope::controller(
            ctx,
            name.clone(),
            &kinds,
            &scope,
            startup,
            &settings,
            every_change,
        )
    });
    future::join_all(runs).await;
    shared.status.record(&name, State::Stopped, None);
    tracing::info!(plugin = %name, "plugin controller stopped");
    Ok(())
}

/// The plugin's primary selector, parsed.
fn primary_selector(info: &PluginInfo) -> Result<Option<LabelSelector>, ControllerError> {
    info.primary_selector
        .as_deref()
        .map(LabelSelector::parse)
        .transpose()
        .map_err(|source| ControllerError::Selector {
            plugin: info.name.to_string(),
            source,
        })
}

/// Reports a plugin whose kinds are all served as starting: `running` in its metrics,
/// `syncing` in its status, its concurrency, and a log line.
fn starting(shared: &Shared, name: &str, settings: &PluginSettings, kinds: &Kinds) {
    shared.metrics.plugin_state(name, PluginState::Running);
    shared.metrics.max_concurrent(name, settings.concurrency);
    shared.status.record(name, State::Syncing, None);
    let primary = &kinds.primary.resource;
    tracing::info!(
        plugin = %name,
        primary = %format!("{}/{}", primary.api_version, primary.kind),
        owns = kinds.owned.len(),
        watches = kinds.watched.len(),
        "plugin controller starting"
    );
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
pub fn finalizer_entry(info: &PluginInfo, settings: &PluginSettings) -> Option<Entry> {
    info.finalizer.as_ref().map(|f| Entry {
        api_version: info.primary.api_version(),
        kind: info.primary.kind.clone(),
        finalizer: f.clone(),
        namespaces: settings.namespaces.clone(),
    })
}
