//! wasmop-core: the vocabulary every other wasmop crate shares, and nothing that runs.
//!
//! - [`plugin`]: who a plugin is (its validated name, its content digest, what it declares)
//!   and [`plugin::text`], the one escaper for what a plugin says.
//! - [`policy`]: what a plugin's declarations and the operator's policy grant it, the check
//!   every host call passes, and the load-time check of what it asks for.
//! - [`cluster`]: the [`Cluster`](cluster::Cluster) trait, the only way plugin code reaches Kubernetes; the
//!   grammar of every identifier a plugin hands in ([`cluster::names`]), label selectors,
//!   object text and trimming.
//! - [`error`]: the error-chain renderer.
//!
//! Depends on kube-core and k8s-openapi for the API's types, never on a client.

pub mod cluster;
pub mod error;
pub mod plugin;
pub mod policy;

pub use error::chain;
pub use plugin::{Digest, PluginName};
