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
//! - [`config`] is `wasmop run`'s configuration (file, flags, environment), validated.
//! - [`source`] reads plugin components and watches for new versions; [`registry`] keeps the
//!   live set of plugins (atomic swaps, last good version, per-plugin controllers); [`host`]
//!   wires `wasmop run` together.
//! - [`watches`] runs one shared watch and cache per kind; [`kubeapi`] is the [`Cluster`]
//!   backed by the API server and those caches.
//! - [`controller`] runs one kube-runtime controller per plugin: dispatch, finalizers,
//!   backoff, generation filter, resync; [`orphans`] releases finalizers of removed plugins.
//! - [`events`] writes deduplicated, rate-limited Kubernetes Events; [`metrics`] serves
//!   `/metrics` (over [`http`]).
//! - [`leader`] elects one active host over a Lease; [`health`] serves `/healthz`, `/readyz`
//!   and `/status` from [`status`]; [`shutdown`] is the graceful shutdown sequence.
//! - [`cli`] is the `wasmop` command line; [`plugin::text`] escapes what a plugin said for
//!   logs, terminals and Events.

pub mod cli;
pub mod cluster;
pub mod config;
pub mod controller;
pub mod events;
pub mod health;
pub mod host;
pub mod http;
pub mod kubeapi;
pub mod leader;
pub mod metrics;
pub mod offline;
pub mod orphans;
pub mod plugin;
pub mod policy;
pub mod registry;
pub mod runtime;
pub mod shutdown;
pub mod source;
pub mod status;
pub mod watches;

pub use cluster::{Cluster, ClusterError, ObjectRef};
pub use plugin::{Digest, PluginName};
pub use runtime::{Outcome, Plugin, Runtime, RuntimeConfig};
