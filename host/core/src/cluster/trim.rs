//! Trimming: what no plugin reads and what costs the most bytes (`managedFields`, the
//! last-applied annotation) goes before an object is cached, handed to a plugin or compared.
//! One rule, applied to typed objects and to JSON alike, so every object a plugin sees has the
//! same shape whichever way it reached the host.

use kube_core::{DynamicObject, ObjectMeta, TypeMeta};
use serde_json::Value;

/// The annotation `kubectl apply` leaves on objects: a full copy of the object, useless to a
/// controller and often the biggest field.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops what no consumer needs and makes the object self-describing.
pub fn trim(obj: &mut DynamicObject, types: &TypeMeta) {
    trim_metadata(&mut obj.metadata);
    if obj.types.is_none() {
        obj.types = Some(types.clone());
    }
}

/// Drops what no plugin reads and what costs the most bytes: `managedFields` and the
/// last-applied annotation (and the annotations map, when that was all it held).
pub fn trim_metadata(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
}

/// [`trim_metadata`]'s rule for an object held as JSON (one read or written through the API, or
/// a request built from a `Value`): the same fields go, so every object a plugin sees has the
/// same shape whichever way it reached the host.
pub fn trim_value(object: &mut Value) {
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    meta.remove("managedFields");
    if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
        annotations.remove(LAST_APPLIED);
        if annotations.is_empty() {
            meta.remove("annotations");
        }
    }
}
