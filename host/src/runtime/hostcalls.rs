//! The host side of the `wasmop:plugin` imports: one thin file per WIT interface, each
//! converting between WIT and host types and delegating to [`super::call::HostContext`]
//! (budgets and grants) and the [`crate::cluster::Cluster`].

mod config;
mod events;
mod kube;
mod log;

use serde_json::Value;

use super::bindings::wasmop::plugin as wit;
use super::call::CallState;
use crate::cluster::{ClusterError, GroupVersionKind, ObjectRef};

impl wit::types::Host for CallState {}
impl wit::plugin_info::Host for CallState {}

/// Room reserved for an object's JSON text: a typical object fits without the buffer
/// growing (and being copied) several times on the way.
const JSON_TEXT_CAPACITY: usize = 4 << 10;

/// `value` as the JSON text objects cross the boundary in. Written straight into a buffer:
/// `Value`'s `Display` goes through `fmt` adapters that cost about twice as much.
pub fn json_text(value: &Value) -> String {
    let mut text = Vec::with_capacity(JSON_TEXT_CAPACITY);
    match serde_json::to_writer(&mut text, value).map(|()| String::from_utf8(text)) {
        Ok(Ok(text)) => text,
        // Neither happens: a `Value` always serializes, and serde_json writes UTF-8.
        _ => value.to_string(),
    }
}

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
