//! The host side of the `wasmop:plugin` imports: one thin file per WIT interface, each
//! converting between WIT and host types and delegating to [`super::call::HostContext`]
//! (budgets and grants) and the [`crate::cluster::Cluster`].

mod config;
mod events;
mod kube;
mod log;

use super::bindings::wasmop::plugin as wit;
use super::call::CallState;
use crate::cluster::{ClusterError, GroupVersionKind, ObjectRef};

impl wit::types::Host for CallState {}
impl wit::plugin_info::Host for CallState {}

pub use crate::cluster::json_text;

/// A host object reference as the WIT record.
pub fn to_wit_ref(r: &ObjectRef) -> wit::types::ObjectRef {
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

fn from_wit_gvk(g: wit::types::Gvk) -> GroupVersionKind {
    GroupVersionKind::gvk(&g.group, &g.version, &g.kind)
}

fn from_wit_ref(r: wit::types::ObjectRef) -> ObjectRef {
    ObjectRef::new(from_wit_gvk(r.kind), r.namespace, r.name)
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
        ClusterError::Forbidden(m) => K::Forbidden(m),
        ClusterError::Denied(m) => K::Denied(m),
        ClusterError::Invalid(m) => K::Invalid(m),
        ClusterError::Unavailable(m) => K::Unavailable(m),
        ClusterError::Other(m) => K::Other(m),
    }
}
