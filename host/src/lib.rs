//! wasmop: a Kubernetes controller host that runs reconcile logic as sandboxed WebAssembly
//! components.
//!
//! The crate is organised along the data flow of one reconcile:
//! - [`runtime`] owns everything wasmtime: the engine, loading and validating components, the
//!   precompiled-artefact cache, and dispatching one call into a fresh, limited instance.
//! - [`policy`] turns what a plugin declares (and what the operator allows) into the grants
//!   every host call is checked against.
//! - [`cluster`] is the only way the runtime reaches Kubernetes: a trait with an in-memory
//!   implementation for offline runs and tests.
//! - [`offline`] is the harness behind `wasmop test` and plugin crates' own `cargo test`.
//! - [`cli`] is the `wasmop` command line.

pub mod cli;
pub mod cluster;
pub mod offline;
pub mod plugin;
pub mod policy;
pub mod runtime;

pub use cluster::{Cluster, ClusterError, ObjectRef};
pub use plugin::{Digest, PluginName};
pub use runtime::{Outcome, Plugin, Runtime, RuntimeConfig};
