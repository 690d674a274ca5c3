//! The kinds a plugin's controller reads, resolved through discovery: its primary kind, the
//! kinds it owns and the kinds it watches. A kind the API server does not serve yet (a
//! missing CRD) is waited for, with backoff, while the plugin reports `waiting-for-kinds`.

use std::time::Duration;

use super::Shared;
use crate::kubeapi::discovery::{Resolved, Resolver};
use crate::metrics::PluginState;
use crate::status::State;
use wasmop_core::cluster::ClusterError;
use wasmop_core::cluster::selector::LabelSelector;
use wasmop_core::plugin::{Mapping, PluginInfo};

/// The first wait before discovery is retried for a missing kind.
const DISCOVERY_RETRY_FIRST: Duration = Duration::from_secs(1);
/// Discovery is retried at least every 30 s: a CRD installed later is picked up within that,
/// at the cost of one discovery request per waiting plugin per 30 s.
const DISCOVERY_RETRY_CAP: Duration = Duration::from_secs(30);

/// Every kind a plugin declares, resolved.
pub(super) struct Kinds {
    /// The kind it reconciles.
    pub(super) primary: Resolved,
    /// The kinds whose objects it owns (their owner references name a primary object).
    pub(super) owned: Vec<Resolved>,
    /// The kinds it watches, each with its label selector and its mapping to primaries.
    pub(super) watched: Vec<(Resolved, Option<LabelSelector>, Mapping)>,
}

/// Resolves every kind of `plugin` once; fails on the first that is not served.
async fn resolve_all(info: &PluginInfo, resolver: &Resolver) -> Result<Kinds, ClusterError> {
    let primary = resolver.resolve(&info.primary).await?;
    let mut owned = Vec::new();
    for k in &info.owns {
        owned.push(resolver.resolve(k).await?);
    }
    let mut watched = Vec::new();
    for w in &info.watches {
        let selector = w
            .selector
            .as_deref()
            .map(LabelSelector::parse)
            .transpose()
            .map_err(|e| ClusterError::Invalid(e.to_string()))?;
        watched.push((
            resolver.resolve(&w.kind).await?,
            selector,
            w.mapping.clone(),
        ));
    }
    Ok(Kinds {
        primary,
        owned,
        watched,
    })
}

/// Waits until every kind of the plugin is served, reporting the wait; `None` when the host
/// shuts down first.
pub(super) async fn wait_for_kinds(info: &PluginInfo, shared: &Shared) -> Option<Kinds> {
    let name = info.name.as_str();
    let mut delay = DISCOVERY_RETRY_FIRST;
    let mut shutdown = shared.shutdown.clone();
    loop {
        match resolve_all(info, &shared.resolver).await {
            Ok(kinds) => return Some(kinds),
            Err(error) => {
                shared
                    .metrics
                    .plugin_state(name, PluginState::WaitingForKinds);
                shared.status.record(name, State::WaitingForKinds, None);
                tracing::warn!(plugin = name, %error, retry_in_s = delay.as_secs(), "plugin waits for its kinds to be served");
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    _ = shutdown.wait_for(|stop| *stop) => return None,
                }
                delay = (delay * 2).min(DISCOVERY_RETRY_CAP);
            }
        }
    }
}
