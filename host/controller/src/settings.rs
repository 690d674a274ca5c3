//! What the operator allows one plugin, validated: the settings the controller runs a plugin
//! with. The host's configuration (`wasmop::config`) converts its file, flags and environment
//! into one of these per plugin; nothing here knows where the values came from.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;
use wasmop_core::plugin::Permission;
use wasmop_runtime::Limits;

/// What the operator allows one plugin, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginSettings {
    /// Namespaces the plugin is confined to; `None` means every namespace.
    pub namespaces: Option<BTreeSet<String>>,
    /// Permissions granted beyond its primary, owned and watched kinds.
    pub grants: Vec<Permission>,
    /// Per-call limits.
    pub limits: Limits,
    /// Reconciles of this plugin that may run at once.
    pub concurrency: u16,
    /// The plugin's own settings (a JSON object).
    pub config: Value,
    /// Traps, timeouts or out-of-memory outcomes with no success between (over all objects;
    /// other failures neither count nor reset the count) after which a version is reported
    /// as failing; `0` never reports.
    pub failure_threshold: u32,
    /// Whether a failing version that replaced another is rolled back to it.
    pub rollback: bool,
    /// The shortest requeue-after honoured: a plugin's shorter one is raised to it.
    pub min_requeue_after: Duration,
    /// The per-object rate limit of reconciles; `None`: none.
    pub object_rate: Option<crate::controller::throttle::ObjectRate>,
    /// What the operator allows the plugin's admission webhooks.
    pub admission: AdmissionSettings,
}

/// What the operator allows a plugin's admission webhooks (`plugins.<name>.admission`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionSettings {
    /// Whether the host serves and registers them (default: yes, when the host serves
    /// admission at all).
    pub enabled: bool,
    /// Whether its validating webhook is served (default: yes).
    pub validating: bool,
    /// Whether its mutating webhook is served (default: yes).
    pub mutating: bool,
    /// A failure policy that replaces the one the plugin declares, for all its webhooks:
    /// `Ignore` keeps a plugin that cannot answer from refusing anything.
    pub failure_policy: Option<wasmop_runtime::admission::FailurePolicy>,
}

impl AdmissionSettings {
    /// Whether the webhook of `kind` is served.
    pub fn serves(&self, kind: wasmop_runtime::admission::ReviewKind) -> bool {
        use wasmop_runtime::admission::ReviewKind;
        self.enabled
            && match kind {
                ReviewKind::Validate => self.validating,
                ReviewKind::Mutate => self.mutating,
            }
    }
}

impl Default for AdmissionSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            validating: true,
            mutating: true,
            failure_policy: None,
        }
    }
}
