//! Deciding what a loaded version becomes: refused (a load error, a grant the policy does
//! not allow, settings it cannot take), a duplicate shadowed by a component with precedence,
//! or a version to install with its settings.

use super::{Origin, Registry, Rejection, Slot};
use wasmop_controller::{AdmissionSettings, PluginSettings};
use wasmop_core::plugin::{Digest, PluginName};
use wasmop_core::policy::{ExtraPermissions, Policy};
use wasmop_core::policy::{check_grants, check_reviews};
use wasmop_runtime::admission::{AdmissionInfo, Registration, ReviewKind};
use wasmop_runtime::{LoadError, LoadOptions, Plugin};

impl Registry {
    /// Runs the new version found at `origin` (loaded with the default options as `probe`)
    /// if it is good.
    pub(super) async fn offer(
        &mut self,
        origin: Origin,
        digest: Digest,
        probe: Result<Plugin, LoadError>,
    ) {
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
        let name = plugin.name().clone();
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

    /// The plugin and its settings from `probe`, the version loaded with the default
    /// options: the settings depend on the name, which only `describe` tells, so they are
    /// applied afterwards (no second compilation).
    pub(super) fn settle(
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
        let name = probe.name().clone();
        let settings = self.config.plugin(&name).clone();
        // The operator's grants do not cover what the version asks for.
        let refused = |error| {
            let rejection = Rejection::Refused {
                key: key(),
                location: source(),
                error,
            };
            Box::new((Some(name.clone()), rejection))
        };
        check_grants(
            probe.declared(),
            &settings.grants,
            &self.config.sensitive_kinds(),
        )
        .map_err(refused)?;
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
        // Webhooks the host will serve may only review kinds the plugin may read.
        if let Some(admission) = plugin.admission()
            && self.config.admission.is_some()
        {
            let registrations = served(admission, &settings.admission);
            let kinds = registrations
                .iter()
                .flat_map(|r| &r.rules)
                .map(|r| (r.kind.group.as_str(), r.kind.kind.as_str()));
            check_reviews(&name, kinds, plugin.grants(), &settings.grants).map_err(refused)?;
        }
        // A plugin without a reconciler runs only as webhooks: without one served, it would
        // load and do nothing, which the operator should hear about.
        if plugin.reconciler().is_none() {
            let why = if self.config.admission.is_none() {
                Some(
                    "this host does not serve admission (its config has no `admission` section)"
                        .to_owned(),
                )
            } else if plugin
                .admission()
                .is_some_and(|a| served(a, &settings.admission).is_empty())
            {
                Some(format!(
                    "its webhooks are turned off under `plugins.{name}.admission`"
                ))
            } else {
                None
            };
            if let Some(why) = why {
                let rejection = Rejection::Idle {
                    key: key(),
                    location: source(),
                    plugin: name.clone(),
                    why,
                };
                return Err(Box::new((Some(name.clone()), rejection)));
            }
        }
        Ok((plugin, settings))
    }
}

/// Why a loaded version is not run: the plugin's name when `describe` told it, and the
/// rejection to report (boxed by [`Registry::settle`]: it is large, and the cold path).
type Refused = (Option<PluginName>, Rejection);

/// The registrations of `admission` that the operator's `settings` let the host serve.
fn served<'a>(admission: &'a AdmissionInfo, settings: &AdmissionSettings) -> Vec<&'a Registration> {
    [ReviewKind::Validate, ReviewKind::Mutate]
        .into_iter()
        .filter(|k| settings.serves(*k))
        .filter_map(|k| admission.registration(k))
        .collect()
}
