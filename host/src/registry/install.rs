//! Running a settled version: a new controller, a swap of the running version, or a
//! restart when the watches differ; stopping a plugin that left; and promoting a shadowed
//! component once the plugin it declares no longer runs.

use std::collections::BTreeSet;

use super::lifecycle::Running;
use super::{Live, Origin, Registry, Rejection, ReloadResult};
use wasmop_controller::PluginSettings;
use wasmop_controller::controller;
use wasmop_core::plugin::{PluginInfo, PluginName};
use wasmop_runtime::Plugin;

impl Registry {
    /// Runs `plugin` (loaded from `origin`): a new controller, a swap, or a restart.
    pub(super) async fn install(
        &mut self,
        origin: Origin,
        plugin: Plugin,
        settings: PluginSettings,
    ) {
        let name = plugin.name().clone();
        if let Some(slot) = self.slots.get_mut(&origin) {
            slot.provides = Some(name.clone());
            slot.shadowed = None;
        }
        if let Some(task) = self.releases.remove(&name) {
            task.abort();
        }
        let (version, digest) = version_and_digest(&plugin);
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
        self.shared.status.not_refused(&self.component(&origin));
        match self.live.remove(&name) {
            None => {
                let source = &self.sources[origin.source];
                tracing::info!(plugin = %name, version, digest, key = origin.key, %source, "plugin loaded");
                let running = Running::start(plugin, settings, &self.shared, &self.failing);
                let live = Live {
                    origin,
                    running,
                    previous: None,
                };
                self.live.insert(name.clone(), live);
            }
            Some(live) => self.replace(live, origin, plugin, settings).await,
        }
        self.count(name.as_str(), ReloadResult::Loaded);
    }

    /// Replaces the running version `live` with `plugin`: a swap when both need the same
    /// watches, else a restart of the controller. A component with precedence that takes
    /// over from another origin leaves that one shadowed, reported as the duplicate.
    async fn replace(
        &mut self,
        live: Live,
        origin: Origin,
        plugin: Plugin,
        settings: PluginSettings,
    ) {
        let name = plugin.name().clone();
        let (version, digest) = version_and_digest(&plugin);
        let source = self.sources[origin.source].to_string();
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
        let (old_version, old_digest) = version_and_digest(&old);
        if (&old_version, &old_digest) != (&version, &digest) {
            self.shared
                .metrics
                .plugin_unloaded(name.as_str(), &old_version, &old_digest);
        }
        let running = if same_watches(old.reconciler(), plugin.reconciler()) {
            live.running.swap(plugin);
            tracing::info!(plugin = %name, version, digest, from_version = %old.version(), from_digest = %old.digest().short(), key = origin.key, %source, "plugin version swapped");
            live.running
        } else {
            live.running.stop().await;
            tracing::info!(plugin = %name, version, digest, from_version = %old.version(), from_digest = %old.digest().short(), key = origin.key, %source, "plugin kinds changed; controller restarted");
            self.shared.status.record(
                name.as_str(),
                wasmop_controller::status::State::Loaded,
                None,
            );
            Running::start(plugin, settings, &self.shared, &self.failing)
        };
        let live = Live {
            origin: origin.clone(),
            running,
            previous: Some(old),
        };
        self.live.insert(name.clone(), live);
        if let Some(displaced) = displaced {
            let rejection = Rejection::Duplicate {
                key: displaced.key.clone(),
                location: self.sources[displaced.source].to_string(),
                plugin: name.clone(),
                first_key: origin.key.clone(),
                first_source: source,
            };
            self.reject(&displaced, Some(name.as_str()), &rejection)
                .await;
        }
    }

    /// Stops the plugin `name`; a shadowed component declaring it may take over afterwards.
    pub(super) async fn remove(&mut self, name: &PluginName) {
        let Some(live) = self.live.remove(name) else {
            return;
        };
        let plugin = live.running.current();
        live.running.stop().await;
        self.shared.metrics.plugin_gone(name.as_str());
        let (version, digest) = (plugin.version().to_owned(), plugin.digest().short());
        self.shared
            .metrics
            .plugin_unloaded(name.as_str(), &version, &digest);
        self.shared.status.remove(name.as_str());
        self.count(name.as_str(), ReloadResult::Removed);
        tracing::info!(plugin = %name, digest = %plugin.digest().short(), "plugin removed from its source; controller stopped");
        if let Some(entry) = plugin
            .reconciler()
            .and_then(|info| controller::finalizer_entry(info, self.config.plugin(name)))
        {
            self.release_later(name.clone(), entry);
        }
    }

    /// Runs shadowed components whose plugin name no longer runs.
    pub(super) async fn promote_shadowed(&mut self) {
        let free: Vec<(Origin, Plugin)> = self
            .slots
            .iter()
            .filter_map(|(o, s)| Some((o.clone(), s.shadowed.clone()?)))
            .filter(|(_, p)| !self.live.contains_key(p.name()))
            .collect();
        let mut taken = BTreeSet::new();
        // Slots iterate in origin order, so the component with precedence goes first.
        for (origin, plugin) in free {
            let name = plugin.name().clone();
            if taken.insert(name.clone()) {
                let settings = self.config.plugin(&name).clone();
                self.install(origin, plugin, settings).await;
            }
        }
    }
}

/// The version string and short digest a plugin is logged and counted with.
fn version_and_digest(plugin: &Plugin) -> (String, String) {
    (plugin.version().to_owned(), plugin.digest().short())
}

/// Whether two versions of a plugin need the same watches and the same policy: everything
/// their reconcilers declare but the version string. Two versions without a reconciler
/// (admission only) have no controller to restart; one with and one without need a start
/// or a stop.
pub(super) fn same_watches(a: Option<&PluginInfo>, b: Option<&PluginInfo>) -> bool {
    let strip = |i: &PluginInfo| PluginInfo {
        version: String::new(),
        ..i.clone()
    };
    match (a, b) {
        (Some(a), Some(b)) => strip(a) == strip(b),
        (None, None) => true,
        _ => false,
    }
}
