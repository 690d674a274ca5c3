//! The host side of the `wasmop:plugin` imports: one thin file per WIT interface, each
//! converting between WIT and host types and delegating to [`super::call::HostContext`]
//! (budgets and grants) and the [`wasmop_core::cluster::Cluster`]. Those files implement the
//! current contract (0.3); `v0_2.rs` and `v0_1.rs` serve the imports of plugins built against
//! the frozen contracts through them.

/// The `events`, `log` and `config` imports of a frozen contract version (`$old`, whose
/// values' conversions are `$conv`), served by the 0.3 host calls: the three interfaces are
/// the same in every version, so one definition serves each.
macro_rules! unchanged_imports {
    ($old:ident, $conv:ident) => {
        impl crate::bindings::$old::wasmop::plugin::events::Host for crate::call::CallState {
            async fn emit(
                &mut self,
                e: crate::bindings::$old::wasmop::plugin::events::Event,
            ) -> HostResult<()> {
                use crate::bindings::v0_3::wasmop::plugin::events as new;
                use crate::bindings::$old::wasmop::plugin::events as old;
                let event = new::Event {
                    regarding: crate::contract::$conv::up::object_ref(e.regarding),
                    event_type: match e.event_type {
                        old::EventType::Normal => new::EventType::Normal,
                        old::EventType::Warning => new::EventType::Warning,
                    },
                    reason: e.reason,
                    action: e.action,
                    note: e.note,
                };
                answer(new::Host::emit(self, event).await)
            }
        }

        impl crate::bindings::$old::wasmop::plugin::log::Host for crate::call::CallState {
            async fn log(
                &mut self,
                level: crate::bindings::$old::wasmop::plugin::log::Level,
                message: String,
            ) -> wasmtime::Result<()> {
                use crate::bindings::v0_3::wasmop::plugin::log::{self as new, Level as N};
                use crate::bindings::$old::wasmop::plugin::log::Level as O;
                let level = match level {
                    O::Trace => N::Trace,
                    O::Debug => N::Debug,
                    O::Info => N::Info,
                    O::Warn => N::Warn,
                    O::Error => N::Error,
                };
                new::Host::log(self, level, message).await
            }
        }

        impl crate::bindings::$old::wasmop::plugin::config::Host for crate::call::CallState {
            async fn get(&mut self) -> wasmtime::Result<String> {
                crate::bindings::v0_3::wasmop::plugin::config::Host::get(self).await
            }
        }
    };
}

mod config;
mod events;
mod kube;
mod log;
mod v0_1;
mod v0_2;

use super::bindings::v0_3::wasmop::plugin as wit;
use super::call::CallState;
use wasmop_core::cluster::{ClusterError, GroupVersionKind, ObjectRef, names};

impl wit::types::Host for CallState {}
impl wit::plugin_info::Host for CallState {}

pub(crate) use wasmop_core::cluster::json_text;

/// A host object reference as the WIT record.
pub(crate) fn to_wit_ref(r: &ObjectRef) -> wit::types::ObjectRef {
    wit::types::ObjectRef {
        kind: wit::types::Gvk {
            group: r.kind.group.clone(),
            version: r.kind.version.clone(),
            kind: r.kind.kind.clone(),
        },
        namespace: r.namespace.clone(),
        name: r.name.clone(),
    }
}

/// A kind the guest passed, each part checked by its grammar; `field` names it in the
/// `invalid` error (`kind`).
fn from_wit_gvk(field: &str, g: wit::types::Gvk) -> Result<GroupVersionKind, ClusterError> {
    names::check_gvk(field, &g.group, &g.version, &g.kind).map_err(invalid)?;
    Ok(GroupVersionKind::gvk(&g.group, &g.version, &g.kind))
}

/// A reference the guest passed, each part checked by its grammar, so that nothing built from
/// it (a request path, a grant check, a log line) can name anything but one object; `field`
/// names it in the `invalid` error (`target`, `regarding`).
fn from_wit_ref(field: &str, r: wit::types::ObjectRef) -> Result<ObjectRef, ClusterError> {
    let kind = GroupVersionKind::gvk(&r.kind.group, &r.kind.version, &r.kind.kind);
    ObjectRef::checked(field, kind, r.namespace, r.name).map_err(invalid)
}

/// A refused identifier as the `invalid` error the guest sees, with its causes.
fn invalid(e: impl std::error::Error) -> ClusterError {
    ClusterError::Invalid(wasmop_core::chain(&e))
}

/// Bytes the guest passed in a reference (charged against the per-call cap).
fn ref_len(r: &wit::types::ObjectRef) -> usize {
    r.kind.group.len()
        + r.kind.version.len()
        + r.kind.kind.len()
        + r.namespace.as_ref().map_or(0, String::len)
        + r.name.len()
}

fn to_wit_error(e: ClusterError) -> wit::types::KubeError {
    use wit::types::KubeError as K;
    match e {
        ClusterError::NotFound(m) => K::NotFound(m),
        ClusterError::Conflict(m) => K::Conflict(m),
        ClusterError::AlreadyExists(m) => K::AlreadyExists(m),
        ClusterError::Forbidden(m) => K::Forbidden(m),
        ClusterError::Denied(m) => K::Denied(m),
        ClusterError::Invalid(m) => K::Invalid(m),
        ClusterError::Unavailable(m) => K::Unavailable(m),
        ClusterError::Other(m) => K::Other(m),
    }
}
