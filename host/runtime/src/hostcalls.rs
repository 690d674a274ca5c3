//! The host side of the `wasmop:plugin` imports: one thin file per WIT interface, each
//! converting between WIT and host types and delegating to [`super::call::HostContext`]
//! (budgets and grants) and the [`wasmop_core::cluster::Cluster`]. Those files implement the
//! current contract (0.3); `v0_2.rs` and `v0_1.rs` serve the imports of plugins built against
//! the frozen contracts through them.

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
