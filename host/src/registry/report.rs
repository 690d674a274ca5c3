//! What the registry reports: reload results (the metric's labels), why a version was
//! rejected, and the Warning Events about a source.

use k8s_openapi::api::core::v1::ObjectReference;

use super::{Origin, Registry};
use wasmop_controller::events::Record;
use wasmop_controller::source::Source;
use wasmop_core::cluster::EventType;
use wasmop_core::plugin::PluginName;
use wasmop_core::policy::PluginRefused;
use wasmop_runtime::LoadError;

/// What a reload did, as counted by `wasmop_plugin_reloads_total{result}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReloadResult {
    /// A new version runs.
    Loaded,
    /// The source changed but the plugin's bytes did not.
    Unchanged,
    /// A new version was refused; the last good one (if any) keeps running.
    Rejected,
    /// The plugin left its source and was stopped.
    Removed,
    /// A failing version was replaced by the version it had replaced.
    RolledBack,
}

impl ReloadResult {
    /// Its metric label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            ReloadResult::Loaded => "loaded",
            ReloadResult::Unchanged => "unchanged",
            ReloadResult::Rejected => "rejected",
            ReloadResult::Removed => "removed",
            ReloadResult::RolledBack => "rolled-back",
        }
    }
}

/// Why a version was rejected.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Rejection {
    /// It is not a loadable plugin (not a component, another world, `describe` trapped...).
    #[error("`{key}` in {location} cannot be loaded")]
    Load {
        /// Its key.
        key: String,
        /// Its source.
        location: String,
        /// Why.
        #[source]
        error: LoadError,
    },
    /// It asks for permissions the host config does not grant.
    #[error("`{key}` in {location} is refused")]
    Refused {
        /// Its key.
        key: String,
        /// Its source.
        location: String,
        /// Why.
        #[source]
        error: PluginRefused,
    },
    /// Its settings in the host config cannot be applied to it.
    #[error("`{key}` in {location}: plugin `{plugin}` cannot run with its settings")]
    Settings {
        /// Its key.
        key: String,
        /// Its source.
        location: String,
        /// The plugin.
        plugin: PluginName,
        /// Why.
        #[source]
        error: LoadError,
    },
    /// It only serves admission, and none of its webhooks would be served here.
    #[error(
        "`{key}` in {location} is refused: plugin `{plugin}` has no reconciler (it serves \
         admission only), and {why}, so it would do nothing"
    )]
    Idle {
        /// Its key.
        key: String,
        /// Its source.
        location: String,
        /// The plugin.
        plugin: PluginName,
        /// Why its webhooks are not served.
        why: String,
    },
    /// Another component with precedence already provides this plugin name.
    #[error(
        "`{key}` in {location} is refused: plugin `{plugin}` already comes from `{first_key}` in \
         {first_source}, which takes precedence"
    )]
    Duplicate {
        /// Its key.
        key: String,
        /// Its source.
        location: String,
        /// The plugin.
        plugin: PluginName,
        /// The key of the component that runs.
        first_key: String,
        /// Its source.
        first_source: String,
    },
}

impl Registry {
    pub(super) async fn reject(
        &self,
        origin: &Origin,
        plugin: Option<&str>,
        rejection: &Rejection,
    ) {
        let label = plugin.unwrap_or("unknown");
        self.count(label, ReloadResult::Rejected);
        let keeps = plugin
            .and_then(|p| PluginName::new(p).ok())
            .and_then(|p| self.live.get(&p))
            .map(|l| l.running.current());
        let note = match &keeps {
            Some(p) => format!(
                "{}; version {} ({}) keeps running",
                wasmop_core::chain(rejection),
                p.version(),
                p.digest().short()
            ),
            None => wasmop_core::chain(rejection),
        };
        tracing::error!(plugin = label, key = origin.key, error = %note, "plugin version rejected");
        if keeps.is_some() {
            self.shared
                .status
                .error(label, format!("new version rejected: {note}"));
        } else {
            // Nothing of it runs: `/status` lists the component itself.
            self.shared
                .status
                .refused(&self.component(origin), note.clone());
        }
        self.event(origin.source, label, "PluginRejected", "Load", note)
            .await;
    }

    /// How `/status` names the component at `origin`: `<key> in <source>`.
    pub(super) fn component(&self, origin: &Origin) -> String {
        format!("{} in {}", origin.key, self.sources[origin.source])
    }

    /// A Warning Event on the object of source number `source`.
    pub(super) async fn event(
        &self,
        source: usize,
        plugin: &str,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let Some(regarding) = self.source_object(source) else {
            return;
        };
        let record = Record {
            regarding,
            event_type: EventType::Warning,
            reason: reason.into(),
            action: action.into(),
            note,
        };
        // Written in the background: a failure is logged and counted by the sink.
        self.shared.events.publish(plugin, record).await;
    }

    /// The object a source's Events are about: its ConfigMap, or the host's own Pod.
    pub(super) fn source_object(&self, source: usize) -> Option<ObjectReference> {
        match &self.sources[source] {
            Source::ConfigMap { namespace, name } => Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("ConfigMap".into()),
                namespace: Some(namespace.clone()),
                name: Some(name.clone()),
                ..ObjectReference::default()
            }),
            Source::Directory(_) => {
                let name = std::env::var("POD_NAME").ok().filter(|n| !n.is_empty())?;
                let namespace = std::env::var("POD_NAMESPACE")
                    .ok()
                    .filter(|n| !n.is_empty())?;
                Some(ObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    namespace: Some(namespace),
                    name: Some(name),
                    ..ObjectReference::default()
                })
            }
        }
    }
}
