//! CustomResourceDefinitions generated from a plugin's Rust types (the `crd` feature).
//!
//! A CRD type is declared with kube's `#[derive(CustomResource)]` on its spec struct, as in
//! any kube-rs controller: the OpenAPI v3 schema comes from the Rust types through schemars
//! (doc comments become descriptions, `#[schemars(range(..), length(..))]` bounds, a Rust
//! enum of unit variants an `enum`), and `#[kube(..)]` adds the names, the status
//! subresource and the printer columns. The derived type is an [`Object`](crate::Object), so
//! the plugin reconciles the very type its CRD is written from.
//!
//! ```ignore
//! use wasmop_guest::crd::CustomResource;
//!
//! #[derive(CustomResource, Serialize, Deserialize, JsonSchema, Clone, Debug)]
//! #[kube(group = "demo.wasmop.dev", version = "v1", kind = "Database", namespaced,
//!        status = "DatabaseStatus", crates(kube_core = "wasmop_guest::kube_core"))]
//! struct DatabaseSpec { /* ... */ }
//! ```
//!
//! The YAML a cluster applies is kept beside the plugin and checked by a test, so it can never
//! drift from the type:
//!
//! ```ignore
//! #[test]
//! fn crd_yaml_is_generated_from_the_types() {
//!     wasmop_guest::check_crd!(Database, "crd.yaml");
//! }
//! ```
//!
//! `WASMOP_BLESS=1 cargo test -p <plugin>` writes the file; a plain run fails when the file
//! differs, naming the command that rewrites it. The derive is re-exported here
//! ([`CustomResource`]); the plugin depends on `schemars`, `k8s-openapi` and `serde_json`
//! itself, because that is where the derives look for them, and names the SDK's kube-core in
//! `crates(..)`: with no `kube` crate in its tree, the plugin's tests cannot reach an API
//! client. Fields of k8s-openapi types other than
//! `ObjectMeta` need k8s-openapi's `schemars` feature; for `status.conditions`,
//! [`conditions`] is the schema kubebuilder writes for `[]metav1.Condition`, without it.

#[cfg(not(target_family = "wasm"))]
mod file;

#[cfg(not(target_family = "wasm"))]
pub use file::{BLESS_VAR, check_file, rendered};

use schemars::{Schema, SchemaGenerator, json_schema};

pub use kube_core::CustomResourceExt;
/// kube's derive of a CRD type from its spec struct. Its generated code names kube-core as
/// `::kube::core` unless told otherwise: add `crates(kube_core = "wasmop_guest::kube_core")` to
/// the `#[kube(..)]` attribute.
pub use kube_derive::CustomResource;

/// The schema of a `Vec<Condition>` field as Kubernetes' conventions (and kubebuilder's
/// generated CRDs for `[]metav1.Condition`) have it: a list-map keyed by `type`, so
/// server-side apply merges one condition at a time, with `status` limited to `True`,
/// `False` and `Unknown` and every field the API requires required.
///
/// ```ignore
/// #[schemars(schema_with = "wasmop_guest::crd::conditions")]
/// #[serde(default)]
/// conditions: Vec<Condition>,
/// ```
pub fn conditions(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "description": "The latest available observations of the object's state.",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["type", "status", "lastTransitionTime", "reason", "message"],
            "properties": {
                "type": {
                    "type": "string",
                    "description": "The condition's type, in CamelCase, e.g. Ready.",
                    "maxLength": 316,
                    "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
                },
                "status": {
                    "type": "string",
                    "description": "The condition's status.",
                    "enum": ["True", "False", "Unknown"],
                },
                "observedGeneration": {
                    "type": "integer",
                    "format": "int64",
                    "minimum": 0,
                    "description": "The metadata.generation the condition was set for.",
                },
                "lastTransitionTime": {
                    "type": "string",
                    "format": "date-time",
                    "description": "When the status last changed.",
                },
                "reason": {
                    "type": "string",
                    "description": "Why the condition last changed, in CamelCase.",
                    "minLength": 1,
                    "maxLength": 1024,
                    "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
                },
                "message": {
                    "type": "string",
                    "description": "What happened, for people.",
                    "maxLength": 32768,
                },
            },
        },
    })
}
