//! What the host is and holds, rather than what a call did: the leader Lease, the loaded
//! plugins (version and digest, load time, reloads, lifecycle state) and the objects a shared
//! watch could not decode.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::labels::{
    InfoLabels, KindLabels, LoadLabels, NameLabels, ReloadLabels, Said, StateLabels,
};
use super::{Histograms, Metrics, load_histogram, registered};

/// A plugin's lifecycle state, as reported by `wasmop_plugin_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PluginState {
    /// One of its kinds is not served by the API server yet (its CRD is missing).
    WaitingForKinds,
    /// Its controller runs.
    Running,
}

impl PluginState {
    const ALL: [PluginState; 2] = [PluginState::WaitingForKinds, PluginState::Running];

    fn label(self) -> &'static str {
        match self {
            PluginState::WaitingForKinds => "waiting-for-kinds",
            PluginState::Running => "running",
        }
    }
}

/// The host-state families.
#[derive(Clone)]
pub(super) struct HostState {
    leader: Family<NameLabels, Gauge>,
    plugin_state: Family<StateLabels, Gauge>,
    plugin_info: Family<InfoLabels, Gauge>,
    load_time: Histograms<LoadLabels>,
    reloads: Family<ReloadLabels, Counter>,
    watch_skipped: Family<KindLabels, Counter>,
}

impl HostState {
    /// Registers the host-state families in `r`.
    pub(super) fn register(r: &mut Registry) -> Self {
        Self {
            leader: registered(
                r,
                "leader_election_master_status",
                "1 while this host holds the leader Lease (name), else 0",
                Family::default(),
            ),
            plugin_state: registered(
                r,
                "wasmop_plugin_state",
                "1 for the state each plugin is in (waiting-for-kinds, running)",
                Family::default(),
            ),
            plugin_info: registered(
                r,
                "wasmop_plugin_info",
                "1 for each loaded plugin, with its version and component digest",
                Family::default(),
            ),
            load_time: registered(
                r,
                "wasmop_plugin_load_seconds",
                "Time to compile a plugin (or load its cached artefact)",
                Family::new_with_constructor(load_histogram),
            ),
            reloads: registered(
                r,
                "wasmop_plugin_reloads",
                "Plugin versions offered by the sources, per plugin and result (loaded, unchanged, \
                 rejected, removed); `unknown` when a rejected component never said its name",
                Family::default(),
            ),
            watch_skipped: registered(
                r,
                "wasmop_watch_objects_skipped",
                "Objects (list items and watch events) a shared watch could not decode and skipped, \
                 per watched kind",
                Family::default(),
            ),
        }
    }
}

impl Metrics {
    /// Records whether this host holds the leader Lease `lease`.
    pub(crate) fn leader(&self, lease: &str, leading: bool) {
        self.state
            .leader
            .get_or_create(&NameLabels {
                name: lease.to_owned(),
            })
            .set(i64::from(leading));
    }

    /// Records a loaded plugin: its version and digest, and how long loading took.
    pub fn plugin_loaded(
        &self,
        plugin: &str,
        version: &str,
        digest: &str,
        load_time: Duration,
        from_cache: bool,
    ) {
        self.state
            .plugin_info
            .get_or_create(&InfoLabels {
                plugin: plugin.to_owned(),
                version: Said(version.to_owned()),
                digest: digest.to_owned(),
            })
            .set(1);
        self.state
            .load_time
            .get_or_create(&LoadLabels {
                plugin: plugin.to_owned(),
                from_cache: from_cache.to_string(),
            })
            .observe(load_time.as_secs_f64());
    }

    /// Drops the info series of a version that no longer runs (replaced or removed).
    pub fn plugin_unloaded(&self, plugin: &str, version: &str, digest: &str) {
        self.state.plugin_info.remove(&InfoLabels {
            plugin: plugin.to_owned(),
            version: Said(version.to_owned()),
            digest: digest.to_owned(),
        });
    }

    /// Records the state a plugin is in (1 for it, 0 for the others).
    pub(crate) fn plugin_state(&self, plugin: &str, state: PluginState) {
        for s in PluginState::ALL {
            self.state
                .plugin_state
                .get_or_create(&StateLabels {
                    plugin: plugin.to_owned(),
                    state: s.label().to_owned(),
                })
                .set(i64::from(s == state));
        }
    }

    /// Counts one reload of a plugin; `result` is one of the registry's bounded result labels.
    pub fn plugin_reload(&self, plugin: &str, result: &str) {
        self.state
            .reloads
            .get_or_create(&ReloadLabels {
                plugin: plugin.to_owned(),
                result: result.to_owned(),
            })
            .inc();
    }

    /// Forgets the state of a plugin that no longer runs (removed from its source).
    pub fn plugin_gone(&self, plugin: &str) {
        for s in PluginState::ALL {
            self.state.plugin_state.remove(&StateLabels {
                plugin: plugin.to_owned(),
                state: s.label().to_owned(),
            });
        }
    }

    /// Counts one object a shared watch of `kind` (`apiVersion/Kind`, from discovery) skipped
    /// because it does not decode.
    pub(crate) fn watch_object_skipped(&self, kind: &str) {
        self.state
            .watch_skipped
            .get_or_create(&KindLabels {
                kind: kind.to_owned(),
            })
            .inc();
    }
}
