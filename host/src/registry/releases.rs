//! Finalizers of plugins that left: recorded plugins no source provides at start-up, and
//! plugins removed while the host runs, have their finalizers released after the grace
//! period, by the leader only.

use std::collections::BTreeMap;

use super::Registry;
use wasmop_controller::controller;
use wasmop_controller::orphans;
use wasmop_core::plugin::PluginName;

impl Registry {
    /// Releases, after the grace period, the finalizers of recorded plugins that no source
    /// provides (read once at start-up, when every source's first content is in).
    pub(super) async fn release_orphans(&mut self) {
        let running: BTreeMap<String, orphans::Entry> = self
            .live
            .iter()
            .filter_map(|(name, live)| {
                let plugin = live.running.current();
                let entry =
                    controller::finalizer_entry(plugin.reconciler()?, self.config.plugin(name))?;
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

    /// Releases `name`'s finalizers after `orphanedFinalizerGrace`, once this host leads,
    /// unless the plugin comes back first (its install aborts the task).
    pub(super) fn release_later(&mut self, name: PluginName, entry: orphans::Entry) {
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
}
