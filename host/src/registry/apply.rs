//! Following a source: an early update starts compilations ahead, a settled one brings the
//! live set in line with the source's new content (departed keys go, new versions start
//! loading; their loads are settled in `loads` as they end).

use std::collections::BTreeSet;

use super::{Origin, Registry, ReloadResult};
use wasmop_controller::source::{Component, Update};
use wasmop_core::plugin::PluginName;

impl Registry {
    /// Starts compiling the versions an early update shows that its settled update will
    /// probably bring (new bytes at a key), so that their loads find the work under way.
    pub(super) fn compile_ahead(&self, update: &Update) {
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
    pub(super) async fn apply(&mut self, update: Update) {
        self.apply_settled(update).await;
        self.discard_ahead();
    }

    /// [`Self::apply`] without the discard of compilations begun ahead: what leaves the
    /// source goes (its loads aborted, its plugins stopped or taken over), what is new starts
    /// loading, and a source read again unchanged counts its plugins as `unchanged`.
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
        let mut changed = self.cancel_departed_loads(source, &keys);
        changed |= self.drop_departed(source, &keys).await;
        let (unchanged, new) = self.sort_components(source, components);
        changed |= !new.is_empty();
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

    /// Aborts the loads at keys of `source` that are no longer there; whether there were any.
    fn cancel_departed_loads(&mut self, source: usize, keys: &BTreeSet<&str>) -> bool {
        let mut changed = false;
        for origin in self.loads.origins(source) {
            if !keys.contains(origin.key.as_str()) {
                self.loads.cancel(&origin);
                changed = true;
            }
        }
        changed
    }

    /// Forgets the components at keys of `source` that are no longer there: the plugin each
    /// provided is taken over by a shadowed component declaring the same name, or stops.
    /// Whether there were any.
    async fn drop_departed(&mut self, source: usize, keys: &BTreeSet<&str>) -> bool {
        let gone: Vec<Origin> = self
            .slots
            .keys()
            .filter(|o| o.source == source && !keys.contains(o.key.as_str()))
            .cloned()
            .collect();
        let changed = !gone.is_empty();
        for origin in gone {
            self.shared.status.not_refused(&self.component(&origin));
            let Some(name) = self.slots.remove(&origin).and_then(|slot| slot.provides) else {
                continue;
            };
            // A shadowed component declaring the same name takes over without a stop (a swap
            // when its kinds are the same); otherwise the plugin stops.
            let heir = self
                .slots
                .iter()
                .filter_map(|(o, s)| Some((o.clone(), s.shadowed.clone()?)))
                .find(|(_, p)| *p.name() == name);
            match heir {
                Some((heir, plugin)) => {
                    let settings = self.config.plugin(&name).clone();
                    self.install(heir, plugin, settings).await;
                }
                None => self.remove(&name).await,
            }
        }
        changed
    }

    /// Sorts the components of `source` into the plugins of those whose settled version they
    /// still are, and the new versions to load. Bytes already loading at their key are
    /// neither; a key back to its settled version drops the newer load still under way.
    fn sort_components(
        &mut self,
        source: usize,
        components: Vec<Component>,
    ) -> (Vec<PluginName>, Vec<(Origin, Component)>) {
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
                _ => new.push((origin, component)),
            }
        }
        (unchanged, new)
    }
}
