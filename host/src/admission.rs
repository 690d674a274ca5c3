//! Admission webhooks served by plugins (`wasmop run` with an `admission` section): the
//! HTTPS server ([`serve`]), the certificates it presents ([`certs`]) and the
//! Validating/MutatingWebhookConfigurations that point the API server at it ([`register`]).
//!
//! The registry publishes the plugins that export `admission` as a [`Catalog`] after every
//! change (load, swap, rollback, removal); the server answers each review with the version
//! current when the review arrives, and the registration follows the catalog.
//!
//! # Guarantees
//! - A review runs in a fresh instance under the plugin's limits, with a deadline inside the
//!   webhook's `timeoutSeconds`; reviews over all plugins are bounded by
//!   `admission.concurrency`.
//! - A plugin that cannot answer (a trap, a timeout, out of memory, a broken rule, the host
//!   too busy) is answered by its registration's failure policy: `Fail` denies with a message
//!   naming the plugin and the cause, `Ignore` admits with a warning saying the same; both
//!   are counted (`wasmop_admission_reviews_total{outcome="failed-closed"|"failed-open"}`).
//! - A malformed AdmissionReview is answered 400, a body over `admission.maxRequestBytes`
//!   413, a path the host does not serve 404, another method than POST 405.
//! - Every replica serves (a standby too); the leader alone writes the webhook
//!   configurations. Every replica issues its serving certificate from the one CA kept in a
//!   Secret, and renews it after two thirds of its validity without closing a connection.

pub(crate) mod certs;
pub(crate) mod register;
pub(crate) mod serve;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use wasmop_core::cluster::Cluster;
use wasmop_core::plugin::{Digest, PluginName};
use wasmop_runtime::Plugin;
use wasmop_runtime::admission::{FailurePolicy, Registration, ReviewKind};

/// One plugin that serves admission reviews.
#[derive(Clone)]
pub(crate) struct Webhook {
    /// The version that answers reviews now.
    pub(crate) plugin: Plugin,
    /// The cluster as its host calls see it (confined to its namespaces, counted).
    pub(crate) cluster: Arc<dyn Cluster>,
    /// The namespaces it is confined to (`None`: every namespace); its registrations only
    /// select these.
    pub(crate) namespaces: Option<BTreeSet<String>>,
    /// The operator's failure policy for all its webhooks, replacing the plugin's own
    /// (`plugins.<name>.admission.failurePolicy`).
    pub(crate) failure_policy: Option<FailurePolicy>,
    /// Which of its webhooks are served (`plugins.<name>.admission.validating`/`mutating`).
    pub(crate) serves: ServedKinds,
}

/// Which of a plugin's webhooks the operator lets the host serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ServedKinds {
    /// Its validating webhook.
    pub(crate) validating: bool,
    /// Its mutating webhook.
    pub(crate) mutating: bool,
}

impl Webhook {
    /// What tells one published version from another: a new digest or new settings.
    fn identity(
        &self,
    ) -> (
        Digest,
        Option<&BTreeSet<String>>,
        Option<FailurePolicy>,
        ServedKinds,
    ) {
        (
            self.plugin.digest(),
            self.namespaces.as_ref(),
            self.failure_policy,
            self.serves,
        )
    }

    /// The registration of `kind` that is served: the plugin's, unless the operator left it
    /// out.
    pub(crate) fn registration(&self, kind: ReviewKind) -> Option<&Registration> {
        let served = match kind {
            ReviewKind::Validate => self.serves.validating,
            ReviewKind::Mutate => self.serves.mutating,
        };
        self.plugin
            .admission()
            .and_then(|a| a.registration(kind))
            .filter(|_| served)
    }

    /// The failure policy of its `registration`: the operator's, else the plugin's.
    pub(crate) fn failure_policy(&self, registration: &Registration) -> FailurePolicy {
        self.failure_policy.unwrap_or(registration.failure_policy)
    }
}

/// The plugins that serve admission, by name.
pub(crate) type Catalog = Arc<BTreeMap<PluginName, Webhook>>;

/// Whether two catalogs serve the same versions with the same confinement.
pub(crate) fn same(a: &Catalog, b: &Catalog) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b.iter())
            .all(|((na, wa), (nb, wb))| na == nb && wa.identity() == wb.identity())
}
