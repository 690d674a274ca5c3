//! wasmop-controller: everything that talks to the API server, and the work loop that turns
//! its changes into plugin calls.
//!
//! - [`watches`]: one shared watch and cache per kind, however many plugins need it; the
//!   host's own list-watch loop and stack-safe decoder.
//! - [`kubeapi`]: the [`Cluster`](wasmop_core::cluster::Cluster) backed by the API server and those
//!   caches, with discovery.
//! - [`controller`]: one work loop per plugin: queue, per-object serialization, dispatch,
//!   finalizers, backoff, generation filter, resync, fairness; [`PluginSettings`] is what it runs a
//!   plugin with.
//! - [`orphans`]: releases the finalizers of removed plugins.
//! - [`events`]: deduplicated, rate-limited Kubernetes Events.
//! - [`leader`]: leader election over a Lease.
//! - [`source`]: plugin components from directories and ConfigMaps, with change watching.
//! - [`status`]: the per-plugin state `/status`, `/readyz` and `wasmop status` report.
//! - [`metrics`]: the Prometheus registry (`/metrics` is served by the binary).
//!
//! Depends on `wasmop-core` and `wasmop-runtime`; nothing here reads the host's configuration
//! file or flags (each consumer owns its settings type).

pub mod controller;
pub mod events;
pub mod kubeapi;
pub mod leader;
pub mod metrics;
pub mod orphans;
mod settings;
pub mod source;
pub mod status;
pub mod watches;

pub use settings::{AdmissionSettings, PluginSettings};
