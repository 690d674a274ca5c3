//! Calling `describe` once at load, under its own short deadline and outside the limit on
//! concurrent loads, and turning the WIT `info` record into a validated [`PluginInfo`]
//! ([`declared`]) and the `admission-info` record into an [`AdmissionInfo`] ([`admission`]).
//!
//! # Why describe cannot hold up other loads
//! A `describe` that loops would otherwise hold a load's place for the call deadline (10 s
//! by default) while healthy plugins wait behind it. So `describe` gets
//! [`RuntimeConfig::describe_deadline`](super::RuntimeConfig::describe_deadline) (1 s by
//! default) instead of the call deadline, does not count against the loads that
//! compile at once (see `loader`), and describes together take at most half the instance
//! slots, so reconciles keep the other half however many plugins arrive at once.

mod admission;
mod declared;

pub use self::declared::DeclarationError;

use super::admission::AdmissionInfo;
use super::call::{CallState, PluginShared};
use super::contract::PluginPre;
use super::dispatch::{failure, new_store};
use super::loader::LoadError;
use super::outcome::Outcome;
use super::{Limits, Runtime};
use wasmop_core::plugin::{PluginInfo, PluginName};
use wasmop_core::policy::Grants;

/// Calls `describe` in a fresh instance of `pre` (compiled by `engine`: the main one, or the
/// Winch engine of a tiered load) and validates what it returns: the reconciler's `info`
/// when the component exports `reconciler`, the admission half's declaration when it exports
/// `admission`, and the name and version they share.
pub(crate) async fn describe(
    runtime: &Runtime,
    engine: &wasmtime::Engine,
    pre: &PluginPre,
    limits: &Limits,
    dev_sources: Option<bytes::Bytes>,
) -> Result<Declaration, LoadError> {
    let Ok(_describing) = runtime.inner.describing.acquire().await else {
        unreachable!("the describe semaphore is never closed");
    };
    let Ok(_slot) = runtime.inner.slots.acquire().await else {
        unreachable!("the instance-slot semaphore is never closed");
    };
    let deadline = runtime.inner.config.describe_deadline;
    // The epoch callback and the error report use describe's deadline, not the call's.
    let limits = &Limits {
        deadline,
        ..limits.clone()
    };
    // A placeholder name for log tags until the plugin has said its own.
    let Ok(placeholder) = PluginName::new("loading") else {
        unreachable!("`loading` is a plugin name");
    };
    let shared = PluginShared {
        plugin: placeholder,
        grants: Grants::none(),
        config_json: "{}".into(),
        limits: limits.clone(),
        dev_sources,
    };
    let state = CallState::from_parts(
        runtime.inner.config.fixed_clock,
        std::sync::Arc::new(shared),
        None,
        None,
    );
    let metered = runtime.inner.config.fuel_enabled();
    // Epochs advance (deadline, yields) while `describe` may run guest code.
    let _ticking = runtime.inner.ticker.ticking();
    let mut store = new_store(engine, state, metered, limits.fuel).map_err(|e| {
        LoadError::Describe(Outcome::Trap {
            message: format!("{e:#}"),
            backtrace: vec![],
        })
    })?;
    let result = tokio::time::timeout(deadline, pre.describe(&mut store)).await;
    let state = store.data();
    let printed = state.output.take();
    let described = match result {
        Err(_) => {
            return Err(LoadError::Describe(Outcome::Timeout(
                super::outcome::Budget::WallClock(deadline),
            )));
        }
        Ok(Err(e)) => return Err(LoadError::Describe(failure(&e, state, &printed, limits))),
        Ok(Ok(described)) => described,
    };
    let reconciler = described.info.map(declared::convert_info).transpose()?;
    let (name, version) = match (&reconciler, &described.admission) {
        (Some(info), _) => (info.name.clone(), info.version.clone()),
        (None, Some(a)) => (admission::identity(a)?, a.version.clone()),
        (None, None) => unreachable!("a component exports `reconciler` or `admission`"),
    };
    let admission = described
        .admission
        .map(|a| admission::convert_admission(a, reconciler.as_ref()))
        .transpose()?;
    Ok(Declaration {
        name,
        version,
        reconciler,
        admission,
    })
}

/// What a version declared in `describe`, validated: its name and version, and its
/// halves (at least one).
/// `A` is how the admission declaration is held (shared, once the version is loaded).
pub(crate) struct Declaration<A = AdmissionInfo> {
    /// The plugin's name.
    pub(crate) name: PluginName,
    /// Its own version string.
    pub(crate) version: String,
    /// What its reconciler declared; `None` for a plugin that only serves admission.
    pub(crate) reconciler: Option<PluginInfo>,
    /// What its admission half declared, when it exports `admission`.
    pub(crate) admission: Option<A>,
}
