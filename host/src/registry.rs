//! The live set of plugins, driven by the sources: loads new versions off the hot path, swaps
//! them in atomically, keeps the last good version when a new one is bad, restarts a
//! plugin's controller when its kinds change, and stops a plugin removed from its source.
//!
//! # Guarantees
//! - A version is its sha256: bytes already seen at the same place are a no-op (also while
//!   they are still loading there).
//! - Every new version loads in the background, in a task of its own (`registry::loads`): no load
//!   (a long compilation, a `describe` running to its deadline) holds up another origin's
//!   load or reload. Results are settled one at a time in the registry's loop, as they end.
//! - A newer version at an origin supersedes an older one still loading there: the older
//!   load is aborted and its result, if already on its way, dropped; it is never run after
//!   the newer one. An origin that leaves its source has its load aborted the same way.
//! - Compiling, `describe`, the grant check and the settings are done before anything
//!   changes; then the swap is one atomic replacement ([`lifecycle::Running::swap`]).
//!   In-flight reconciles finish on the old version, new ones use the new version.
//! - A new version whose kinds, selector, finalizer or permissions differ from the running
//!   one's restarts the controller (in-flight reconciles finish first); otherwise watches and
//!   caches stay.
//! - A version that fails to load is rejected: the last good version keeps serving, and the
//!   rejection is logged, counted in `wasmop_plugin_reloads_total{result="rejected"}` and
//!   recorded as a Warning Event `PluginRejected` on the source ConfigMap (or on the host's
//!   Pod, from `POD_NAMESPACE`/`POD_NAME`, for a directory).
//! - Precedence: when two components declare the same plugin name, the one from the earlier
//!   source (then the smaller key) runs; the other is rejected as a duplicate and takes over
//!   if the first is removed. A plugin new to the host is therefore not started while an
//!   origin before its own still loads (that one may declare the same name); a new version
//!   of a running plugin never waits, and an earlier origin that turns out to declare its
//!   name takes over when its load ends.
//! - A version that traps or times out `failureThreshold` reconciles with no success between
//!   (other failures neither count nor reset the count, see [`wasmop_controller::controller::streak`]) is reported
//!   (log, Warning Event `PluginFailing`) and, with `rollback: true` (the default), replaced
//!   by the version it replaced (`wasmop_plugin_reloads_total{result="rolled-back"}`). Its
//!   bytes stay recorded, so it is not loaded again until its source holds another version.
//! - A plugin removed from its source stops cleanly; if it has a finalizer, its finalizers
//!   are released after `orphanedFinalizerGrace` unless it comes back before that.
//! - Start-up ([`Registry::run`]) reports the plugins loaded, and decides which recorded
//!   finalizers are orphaned, once the first content of every source has been loaded.
//!
//! # Layout
//! This file holds the registry's state and its loop; [`apply`] follows a source's updates,
//! [`loads`] runs and settles the loads, [`settle`] decides what a loaded version becomes,
//! [`install`] runs it (or stops a plugin that left), [`rollback`] replaces a failing version,
//! [`releases`] releases the finalizers of plugins that left, and [`report`] logs, counts
//! and records rejections.
//!
//! # Cancellation
//! [`Registry::run`] returns at the host's shutdown, once every controller has ended; loads
//! in flight are aborted.

mod apply;
mod install;
mod lifecycle;
mod loads;
mod releases;
mod report;
mod rollback;
mod settle;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

pub(crate) use self::report::{Rejection, ReloadResult};

use self::install::same_watches;
use self::lifecycle::Running;
use self::loads::Loads;
use crate::admission::{Catalog, ServedKinds, Webhook};
use crate::config::Config;
use wasmop_controller::controller::Shared;
use wasmop_controller::controller::streak::Failing;
use wasmop_controller::source::{Source, Update};
use wasmop_core::plugin::{Digest, PluginName};
use wasmop_runtime::{LoadError, Plugin, Runtime};

/// How long start-up waits for every source's first content before it decides which recorded
/// finalizers are orphaned: a ConfigMap source needs one list from the API.
const FIRST_CONTENT_WAIT: Duration = Duration::from_secs(30);

/// Where a component is: a source (by position) and its key there.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Origin {
    /// The source's position in the configuration (earlier wins).
    pub(crate) source: usize,
    /// The file name or ConfigMap key.
    pub(crate) key: String,
}

/// What the registry knows of one component of a source.
struct Slot {
    /// The last version seen here.
    digest: Digest,
    /// The plugin this component provides now (its last good version runs).
    provides: Option<PluginName>,
    /// A loaded version shadowed by a component with precedence, kept to take over.
    shadowed: Option<Plugin>,
}

struct Live {
    origin: Origin,
    running: Running,
    /// The version the running one replaced, to roll back to if the new one fails.
    previous: Option<Plugin>,
}

/// What the registry's loop wakes up for.
enum Event {
    Update(Update),
    Loaded(loads::Loaded<Result<Plugin, LoadError>>),
    Failing(Failing),
}

/// The live plugins and where each came from.
pub(crate) struct Registry {
    runtime: Runtime,
    config: Config,
    sources: Vec<Source>,
    shared: Shared,
    slots: BTreeMap<Origin, Slot>,
    live: BTreeMap<PluginName, Live>,
    releases: BTreeMap<PluginName, JoinHandle<()>>,
    failing: mpsc::UnboundedSender<Failing>,
    failures: mpsc::UnboundedReceiver<Failing>,
    loads: Loads<Result<Plugin, LoadError>>,
    /// Where the plugins that serve admission are published (see [`crate::admission`]).
    webhooks: watch::Sender<Catalog>,
    /// Versions whose admission webhooks were reported as not served (admission is off).
    unserved: BTreeSet<Digest>,
}

impl Registry {
    /// An empty registry for the sources of `config`.
    pub(crate) fn new(
        runtime: Runtime,
        config: Config,
        shared: Shared,
        webhooks: watch::Sender<Catalog>,
    ) -> Self {
        let (failing, failures) = mpsc::unbounded_channel();
        Self {
            runtime,
            sources: config.sources.clone(),
            config,
            shared,
            slots: BTreeMap::new(),
            live: BTreeMap::new(),
            releases: BTreeMap::new(),
            failing,
            failures,
            loads: Loads::new(),
            webhooks,
            unserved: BTreeSet::new(),
        }
    }

    /// Applies the first content of every source (and waits for its loads), releases the
    /// finalizers of recorded plugins that none provides, then follows the sources' changes
    /// and the loads' ends until the host shuts down, and waits for every controller to end.
    pub(crate) async fn run(mut self, mut updates: mpsc::Receiver<Update>) {
        let mut shutdown = self.shared.shutdown.clone();
        let mut waiting: BTreeSet<usize> = (0..self.sources.len()).collect();
        let deadline = tokio::time::Instant::now() + FIRST_CONTENT_WAIT;
        while !waiting.is_empty() || !self.loads.is_idle() {
            let next = tokio::select! {
                update = updates.recv() => update.map(Event::Update),
                loaded = self.loads.next() => Some(Event::Loaded(loaded)),
                () = tokio::time::sleep_until(deadline), if !waiting.is_empty() => {
                    tracing::warn!(sources = waiting.len(), "some plugin sources have not been read yet; going on without them");
                    waiting.clear();
                    continue;
                }
                _ = shutdown.wait_for(|stop| *stop) => None,
            };
            match next {
                Some(Event::Update(update)) if update.early => self.compile_ahead(&update),
                Some(Event::Update(update)) => {
                    waiting.remove(&update.source);
                    self.apply(update).await;
                }
                Some(Event::Loaded(loaded)) => self.loaded(loaded).await,
                Some(Event::Failing(_)) | None => break,
            }
            self.publish_webhooks();
        }
        tracing::info!(plugins = self.live.len(), "plugins loaded");
        self.shared.status.plugins_loaded();
        for name in self.config.configured_plugins() {
            if !self.live.contains_key(name) {
                tracing::warn!(plugin = %name, "the host config has settings for plugin `{name}`, but no source provides it");
            }
        }
        self.release_orphans().await;
        loop {
            let next = tokio::select! {
                update = updates.recv() => update.map(Event::Update),
                loaded = self.loads.next() => Some(Event::Loaded(loaded)),
                Some(failing) = self.failures.recv() => Some(Event::Failing(failing)),
                _ = shutdown.wait_for(|stop| *stop) => None,
            };
            match next {
                Some(Event::Update(update)) if update.early => self.compile_ahead(&update),
                Some(Event::Update(update)) => self.apply(update).await,
                Some(Event::Loaded(loaded)) => self.loaded(loaded).await,
                Some(Event::Failing(failing)) => self.failing(failing).await,
                None => break,
            }
            self.publish_webhooks();
        }
        self.loads.abort_all();
        for (_, live) in std::mem::take(&mut self.live) {
            live.running.join().await;
        }
    }

    /// Publishes the running versions that serve admission, when they changed. With
    /// admission off, a version that declares webhooks is reported once.
    fn publish_webhooks(&mut self) {
        let mut catalog = BTreeMap::new();
        for (name, live) in &self.live {
            let plugin = live.running.current();
            if plugin.admission().is_none() {
                continue;
            }
            if self.config.admission.is_none() {
                if self.unserved.insert(plugin.digest()) {
                    tracing::warn!(plugin = %name, "the plugin declares admission webhooks, but this host does not serve admission (no `admission` section in its config); its reconciler runs, its webhooks do not");
                }
                continue;
            }
            let settings = self.config.plugin(name);
            if !settings.admission.enabled {
                continue;
            }
            let namespaces = settings.namespaces.clone();
            let failure_policy = settings.admission.failure_policy;
            let cluster = self
                .shared
                .plugin_cluster(name.as_str(), namespaces.clone());
            catalog.insert(
                name.clone(),
                Webhook {
                    plugin,
                    cluster,
                    namespaces,
                    failure_policy,
                    serves: ServedKinds {
                        validating: settings.admission.validating,
                        mutating: settings.admission.mutating,
                    },
                },
            );
        }
        let catalog: Catalog = std::sync::Arc::new(catalog);
        self.webhooks.send_if_modified(|current| {
            if crate::admission::same(current, &catalog) {
                false
            } else {
                *current = catalog;
                true
            }
        });
    }

    fn count(&self, plugin: &str, result: ReloadResult) {
        self.shared.metrics.plugin_reload(plugin, result.label());
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("live", &self.live.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use kube::core::GroupVersionKind;
    use wasmop_core::plugin::PluginInfo;

    use super::*;

    fn info(version: &str, owns: &[&str]) -> PluginInfo {
        PluginInfo {
            name: PluginName::new("db").expect("name"),
            version: version.into(),
            primary: GroupVersionKind::gvk("example.com", "v1", "Database"),
            primary_selector: None,
            owns: owns
                .iter()
                .map(|k| GroupVersionKind::gvk("", "v1", k))
                .collect(),
            watches: vec![],
            finalizer: None,
            reconcile_on_metadata_change: false,
            permissions: vec![],
        }
    }

    #[test]
    fn a_new_version_string_alone_keeps_the_watches() {
        assert!(same_watches(
            Some(&info("1", &["ConfigMap"])),
            Some(&info("2", &["ConfigMap"]))
        ));
    }

    #[test]
    fn other_kinds_or_finalizer_need_a_restart() {
        assert!(!same_watches(
            Some(&info("1", &[])),
            Some(&info("2", &["ConfigMap"]))
        ));
        let mut with_finalizer = info("2", &[]);
        with_finalizer.finalizer = Some("example.com/cleanup".into());
        assert!(!same_watches(Some(&info("1", &[])), Some(&with_finalizer)));
    }

    #[test]
    fn gaining_or_losing_the_reconciler_starts_or_stops_the_controller() {
        assert!(!same_watches(None, Some(&info("2", &[]))));
        assert!(!same_watches(Some(&info("1", &[])), None));
        // Admission only, before and after: no controller to restart.
        assert!(same_watches(None, None));
    }

    #[test]
    fn origins_order_by_source_then_key() {
        let o = |source, key: &str| Origin {
            source,
            key: key.into(),
        };
        assert!(o(0, "z.wasm") < o(1, "a.wasm"));
        assert!(o(1, "a.wasm") < o(1, "b.wasm"));
    }
}
