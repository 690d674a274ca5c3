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
//! # Cancellation
//! [`Registry::run`] returns at the host's shutdown, once every controller has ended; loads
//! in flight are aborted.

pub mod lifecycle;
mod loads;
mod report;
mod rollback;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

pub use self::report::{Rejection, ReloadResult};

use self::lifecycle::Running;
use self::loads::Loads;
use crate::config::Config;
use wasmop_controller::PluginSettings;
use wasmop_controller::controller::streak::Failing;
use wasmop_controller::controller::{self, Shared};
use wasmop_controller::orphans;
use wasmop_controller::source::{Source, Update};
use wasmop_core::plugin::{Digest, PluginInfo, PluginName};
use wasmop_core::policy::check_grants;
use wasmop_core::policy::{ExtraPermissions, Policy};
use wasmop_runtime::{LoadError, LoadOptions, Plugin, Runtime};

/// How long start-up waits for every source's first content before it decides which recorded
/// finalizers are orphaned: a ConfigMap source needs one list from the API.
const FIRST_CONTENT_WAIT: Duration = Duration::from_secs(30);

/// Where a component is: a source (by position) and its key there.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Origin {
    /// The source's position in the configuration (earlier wins).
    pub source: usize,
    /// The file name or ConfigMap key.
    pub key: String,
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
pub struct Registry {
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
}

impl Registry {
    /// An empty registry for the sources of `config`.
    pub fn new(runtime: Runtime, config: Config, shared: Shared) -> Self {
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
        }
    }

    /// Applies the first content of every source (and waits for its loads), releases the
    /// finalizers of recorded plugins that none provides, then follows the sources' changes
    /// and the loads' ends until the host shuts down, and waits for every controller to end.
    pub async fn run(mut self, mut updates: mpsc::Receiver<Update>) {
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
        }
        self.loads.abort_all();
        for (_, live) in std::mem::take(&mut self.live) {
            live.running.join().await;
        }
    }

    async fn release_orphans(&mut self) {
        let running: BTreeMap<String, orphans::Entry> = self
            .live
            .iter()
            .filter_map(|(name, live)| {
                let plugin = live.running.current();
                let entry = controller::finalizer_entry(plugin.info(), self.config.plugin(name))?;
                Some((name.to_string(), entry))
            })
            .collect();
        match self.shared.orphans.entries().await {
            Ok(recorded) => {
                for (plugin, entry) in orphans::orphaned(recorded, &running) {
                    if let Ok(name) = PluginName::new(plugin) {
                        self.release_later(name, entry);
                    }
                }
            }
            Err(error) => {
                tracing::error!(error = %wasmop_core::chain(&error), "cannot read the finalizer record; orphaned finalizers are not released")
            }
        }
    }

    fn release_later(&mut self, name: PluginName, entry: orphans::Entry) {
        let s = &self.shared;
        let release = orphans::release(
            s.orphans.clone(),
            s.client.clone(),
            s.resolver.clone(),
            s.events.clone(),
            name.to_string(),
            entry,
            self.config.orphaned_finalizer_grace,
        );
        // Releasing finalizers writes to the cluster: only the leader does it.
        let mut leading = s.leading.clone();
        let task = tokio::spawn(async move {
            if leading.wait_for(|l| *l).await.is_ok() {
                release.await;
            }
        });
        if let Some(old) = self.releases.insert(name, task) {
            old.abort();
        }
    }

    /// Starts compiling the versions an early update shows that its settled update will
    /// probably bring (new bytes at a key), so that their loads find the work under way.
    fn compile_ahead(&self, update: &Update) {
        let Ok(components) = &update.components else {
            return;
        };
        for component in components {
            let origin = Origin {
                source: update.source,
                key: component.key.clone(),
            };
            let digest = component.digest();
            if self
                .slots
                .get(&origin)
                .is_none_or(|slot| slot.digest != digest)
                && self.loads.digest(&origin) != Some(digest)
            {
                self.runtime.compile_ahead(component.content.clone());
            }
        }
    }

    /// Brings the live set in line with the new content of one source: its new versions start
    /// loading, and are settled as their loads end ([`Self::loaded`]).
    async fn apply(&mut self, update: Update) {
        self.apply_settled(update).await;
        self.discard_ahead();
    }

    async fn apply_settled(&mut self, update: Update) {
        let Update {
            source,
            components,
            early: _,
        } = update;
        let components = match components {
            Ok(c) => c,
            Err(error) => {
                tracing::error!(source = %self.sources[source], error = %wasmop_core::chain(&error), "plugin source cannot be read; its plugins keep running as they are");
                return;
            }
        };
        let keys: BTreeSet<&str> = components.iter().map(|c| c.key.as_str()).collect();
        let mut changed = false;
        for origin in self.loads.origins(source) {
            if !keys.contains(origin.key.as_str()) {
                self.loads.cancel(&origin);
                changed = true;
            }
        }
        let gone: Vec<Origin> = self
            .slots
            .keys()
            .filter(|o| o.source == source && !keys.contains(o.key.as_str()))
            .cloned()
            .collect();
        changed |= !gone.is_empty();
        for origin in gone {
            let Some(name) = self.slots.remove(&origin).and_then(|slot| slot.provides) else {
                continue;
            };
            // A shadowed component declaring the same name takes over without a stop (a swap
            // when its kinds are the same); otherwise the plugin stops.
            let heir = self
                .slots
                .iter()
                .filter_map(|(o, s)| Some((o.clone(), s.shadowed.clone()?)))
                .find(|(_, p)| p.info().name == name);
            match heir {
                Some((heir, plugin)) => {
                    let settings = self.config.plugin(&name).clone();
                    self.install(heir, plugin, settings).await;
                }
                None => self.remove(&name).await,
            }
        }
        let mut unchanged = Vec::new();
        let mut new = Vec::new();
        for component in components {
            let origin = Origin {
                source,
                key: component.key.clone(),
            };
            let digest = component.digest();
            if self.loads.digest(&origin) == Some(digest) {
                // These bytes are loading here already.
                continue;
            }
            match self.slots.get(&origin) {
                Some(slot) if slot.digest == digest => {
                    // Back to the settled version: a newer one still loading is dropped.
                    self.loads.cancel(&origin);
                    unchanged.extend(slot.provides.clone());
                }
                _ => {
                    changed = true;
                    new.push((origin, component));
                }
            }
        }
        // The new versions load in the background, each in its own task (the runtime compiles
        // or maps up to one per CPU on the blocking pool; `describe` runs under its own short
        // deadline outside that limit), and are settled by [`Self::loaded`] as they end.
        for (origin, component) in new {
            self.start_load(origin, component);
        }
        if !changed {
            for name in unchanged {
                self.count(name.as_str(), ReloadResult::Unchanged);
            }
        }
        self.promote_shadowed().await;
    }

    fn count(&self, plugin: &str, result: ReloadResult) {
        self.shared.metrics.plugin_reload(plugin, result.label());
    }

    /// Runs the new version found at `origin` (loaded with the default options as `probe`)
    /// if it is good.
    async fn offer(&mut self, origin: Origin, digest: Digest, probe: Result<Plugin, LoadError>) {
        let previous = self.slots.get(&origin).and_then(|s| s.provides.clone());
        let slot = self.slots.entry(origin.clone()).or_insert(Slot {
            digest,
            provides: None,
            shadowed: None,
        });
        slot.digest = digest;
        slot.shadowed = None;
        let (plugin, settings) = match self.settle(&origin, probe) {
            Ok(loaded) => loaded,
            Err(refused) => {
                let (name, rejection) = *refused;
                let label = name.or(previous).map(|n| n.to_string());
                self.reject(&origin, label.as_deref(), &rejection).await;
                return;
            }
        };
        let name = plugin.info().name.clone();
        if let Some(old) = previous.filter(|old| *old != name) {
            // The same key now declares another plugin: the old one leaves.
            if let Some(slot) = self.slots.get_mut(&origin) {
                slot.provides = None;
            }
            self.remove(&old).await;
        }
        if let Some(first) = self.live.get(&name).map(|l| l.origin.clone())
            && first < origin
        {
            let rejection = Rejection::Duplicate {
                key: origin.key.clone(),
                location: self.sources[origin.source].to_string(),
                plugin: name.clone(),
                first_key: first.key.clone(),
                first_source: self.sources[first.source].to_string(),
            };
            self.reject(&origin, Some(name.as_str()), &rejection).await;
            if let Some(slot) = self.slots.get_mut(&origin) {
                slot.shadowed = Some(plugin);
            }
            return;
        }
        self.install(origin, plugin, settings).await;
    }

    /// Runs `plugin` (loaded from `origin`): a new controller, a swap, or a restart.
    async fn install(&mut self, origin: Origin, plugin: Plugin, settings: PluginSettings) {
        let name = plugin.info().name.clone();
        let fields = |p: &Plugin| (p.info().version.clone(), p.digest().short());
        let (version, digest) = fields(&plugin);
        if let Some(slot) = self.slots.get_mut(&origin) {
            slot.provides = Some(name.clone());
            slot.shadowed = None;
        }
        if let Some(task) = self.releases.remove(&name) {
            task.abort();
        }
        let source = self.sources[origin.source].to_string();
        let stats = plugin.load_stats();
        self.shared.metrics.plugin_loaded(
            name.as_str(),
            &version,
            &digest,
            stats.compile_time,
            stats.from_cache,
        );
        // Before the controller starts, so that the states it records are not lost.
        self.shared.status.version(name.as_str(), &version, &digest);
        match self.live.remove(&name) {
            None => {
                tracing::info!(plugin = %name, version, digest, key = origin.key, %source, "plugin loaded");
                let running = Running::start(plugin, settings, &self.shared, &self.failing);
                let previous = None;
                self.live.insert(
                    name.clone(),
                    Live {
                        origin,
                        running,
                        previous,
                    },
                );
            }
            Some(live) => {
                let mut displaced = None;
                if live.origin != origin
                    && let Some(slot) = self.slots.get_mut(&live.origin)
                {
                    // A component with precedence takes over; the other one waits, and is
                    // reported as the refused duplicate.
                    slot.provides = None;
                    slot.shadowed = Some(live.running.current());
                    displaced = Some(live.origin.clone());
                }
                let old = live.running.current();
                let (old_version, old_digest) = fields(&old);
                if (&old_version, &old_digest) != (&version, &digest) {
                    self.shared
                        .metrics
                        .plugin_unloaded(name.as_str(), &old_version, &old_digest);
                }
                let running = if same_watches(old.info(), plugin.info()) {
                    live.running.swap(plugin);
                    tracing::info!(plugin = %name, version, digest, from_version = %old.info().version, from_digest = %old.digest().short(), key = origin.key, %source, "plugin version swapped");
                    live.running
                } else {
                    live.running.stop().await;
                    tracing::info!(plugin = %name, version, digest, from_version = %old.info().version, from_digest = %old.digest().short(), key = origin.key, %source, "plugin kinds changed; controller restarted");
                    self.shared.status.record(
                        name.as_str(),
                        wasmop_controller::status::State::Loaded,
                        None,
                    );
                    Running::start(plugin, settings, &self.shared, &self.failing)
                };
                let previous = Some(old);
                self.live.insert(
                    name.clone(),
                    Live {
                        origin: origin.clone(),
                        running,
                        previous,
                    },
                );
                if let Some(displaced) = displaced {
                    let rejection = Rejection::Duplicate {
                        key: displaced.key.clone(),
                        location: self.sources[displaced.source].to_string(),
                        plugin: name.clone(),
                        first_key: origin.key.clone(),
                        first_source: source.clone(),
                    };
                    self.reject(&displaced, Some(name.as_str()), &rejection)
                        .await;
                }
            }
        }
        self.count(name.as_str(), ReloadResult::Loaded);
    }

    /// Stops the plugin `name`; a shadowed component declaring it may take over afterwards.
    async fn remove(&mut self, name: &PluginName) {
        let Some(live) = self.live.remove(name) else {
            return;
        };
        let plugin = live.running.current();
        live.running.stop().await;
        self.shared.metrics.plugin_gone(name.as_str());
        let (version, digest) = (plugin.info().version.clone(), plugin.digest().short());
        self.shared
            .metrics
            .plugin_unloaded(name.as_str(), &version, &digest);
        self.shared.status.remove(name.as_str());
        self.count(name.as_str(), ReloadResult::Removed);
        tracing::info!(plugin = %name, digest = %plugin.digest().short(), "plugin removed from its source; controller stopped");
        if let Some(entry) = controller::finalizer_entry(plugin.info(), self.config.plugin(name)) {
            self.release_later(name.clone(), entry);
        }
    }

    /// Runs shadowed components whose plugin name no longer runs.
    async fn promote_shadowed(&mut self) {
        let free: Vec<(Origin, Plugin)> = self
            .slots
            .iter()
            .filter_map(|(o, s)| Some((o.clone(), s.shadowed.clone()?)))
            .filter(|(_, p)| !self.live.contains_key(&p.info().name))
            .collect();
        let mut taken = BTreeSet::new();
        // Slots iterate in origin order, so the component with precedence goes first.
        for (origin, plugin) in free {
            let name = plugin.info().name.clone();
            if taken.insert(name.clone()) {
                let settings = self.config.plugin(&name).clone();
                self.install(origin, plugin, settings).await;
            }
        }
    }

    /// The plugin and its settings from `probe`, the version loaded with the default
    /// options: the settings depend on the name, which only `describe` tells, so they are
    /// applied afterwards (no second compilation).
    fn settle(
        &self,
        origin: &Origin,
        probe: Result<Plugin, LoadError>,
    ) -> Result<(Plugin, PluginSettings), Box<Refused>> {
        let source = || self.sources[origin.source].to_string();
        let key = || origin.key.clone();
        let probe = probe.map_err(|error| {
            let rejection = Rejection::Load {
                key: key(),
                location: source(),
                error,
            };
            Box::new((None, rejection))
        })?;
        let name = probe.info().name.clone();
        let settings = self.config.plugin(&name).clone();
        check_grants(
            probe.info(),
            &settings.grants,
            &self.config.sensitive_kinds(),
        )
        .map_err(|error| {
            let rejection = Rejection::Refused {
                key: key(),
                location: source(),
                error,
            };
            Box::new((Some(name.clone()), rejection))
        })?;
        let options = LoadOptions {
            policy: Policy {
                namespaces: settings.namespaces.clone(),
                extra_permissions: ExtraPermissions::Grant,
                explicit: settings.grants.clone(),
                sensitive: self.config.sensitive_kinds(),
                implied_cluster_writes: false,
            },
            config: settings.config.clone(),
            limits: Some(settings.limits.clone()),
        };
        let plugin = probe.with_options(options).map_err(|error| {
            let rejection = Rejection::Settings {
                key: key(),
                location: source(),
                plugin: name.clone(),
                error,
            };
            Box::new((Some(name.clone()), rejection))
        })?;
        Ok((plugin, settings))
    }
}

/// Why a loaded version is not run: the plugin's name when `describe` told it, and the
/// rejection to report (boxed by [`Registry::settle`]: it is large, and the cold path).
type Refused = (Option<PluginName>, Rejection);

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("live", &self.live.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// Whether two versions of a plugin need the same watches and the same policy: everything
/// they declare but the version string.
pub fn same_watches(a: &PluginInfo, b: &PluginInfo) -> bool {
    let strip = |i: &PluginInfo| PluginInfo {
        version: String::new(),
        ..i.clone()
    };
    strip(a) == strip(b)
}

#[cfg(test)]
mod tests {
    use kube::core::GroupVersionKind;

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
            &info("1", &["ConfigMap"]),
            &info("2", &["ConfigMap"])
        ));
    }

    #[test]
    fn other_kinds_or_finalizer_need_a_restart() {
        assert!(!same_watches(&info("1", &[]), &info("2", &["ConfigMap"])));
        let mut with_finalizer = info("2", &[]);
        with_finalizer.finalizer = Some("example.com/cleanup".into());
        assert!(!same_watches(&info("1", &[]), &with_finalizer));
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
