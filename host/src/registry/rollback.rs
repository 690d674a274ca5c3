//! Rolling a failing version back: the registry's answer to a [`Failing`] report.

use super::lifecycle::Running;
use super::{Live, Registry, ReloadResult, same_watches};
use wasmop_controller::controller::streak::Failing;

impl Registry {
    /// Reports a failing version, and rolls it back to the version it replaced when the
    /// plugin's settings say so (`rollback`, on by default). The failing version's digest stays
    /// recorded for its source, so only a different version there is tried again.
    pub(super) async fn failing(&mut self, failing: Failing) {
        let name = failing.plugin.clone();
        let settings = self.config.plugin(&name).clone();
        let Some(live) = self.live.get_mut(&name) else {
            return;
        };
        let current = live.running.current();
        if current.digest() != failing.digest {
            return;
        }
        let previous = live.previous.take().filter(|_| settings.rollback);
        let origin = live.origin.clone();
        let note = match &previous {
            Some(p) => format!(
                "version {} ({}) of plugin `{name}` failed {} reconciles in a row (last: {}); rolled back to version {} ({})",
                current.version(),
                current.digest().short(),
                failing.failures,
                failing.last,
                p.version(),
                p.digest().short()
            ),
            None => format!(
                "version {} ({}) of plugin `{name}` failed {} reconciles in a row (last: {}); it keeps running ({})",
                current.version(),
                current.digest().short(),
                failing.failures,
                failing.last,
                if settings.rollback {
                    "no earlier version to roll back to"
                } else {
                    "rollback is off"
                }
            ),
        };
        tracing::error!(plugin = %name, digest = %current.digest().short(), failures = failing.failures, "{note}");
        self.shared.status.error(name.as_str(), note.clone());
        self.event(
            origin.source,
            name.as_str(),
            "PluginFailing",
            "Rollback",
            note,
        )
        .await;
        let Some(previous) = previous else {
            return;
        };
        let Some(live) = self.live.remove(&name) else {
            return;
        };
        let running = if same_watches(current.reconciler(), previous.reconciler()) {
            live.running.swap(previous.clone());
            live.running
        } else {
            live.running.stop().await;
            Running::start(previous.clone(), settings, &self.shared, &self.failing)
        };
        tracing::info!(plugin = %name, version = %previous.version(), digest = %previous.digest().short(), "plugin version rolled back");
        self.live.insert(
            name.clone(),
            Live {
                origin: live.origin,
                running,
                previous: None,
            },
        );
        self.count(name.as_str(), ReloadResult::RolledBack);
    }
}
