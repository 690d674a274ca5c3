//! wasmop, the binary: the command line, the host's configuration, and the wiring of
//! `wasmop run`. The work itself lives in the library crates (see `ARCHITECTURE.md`):
//! `wasmop-core` (identity, policy, the `Cluster` trait), `wasmop-runtime` (everything
//! wasmtime), `wasmop-offline` (`wasmop test`'s in-memory cluster and harness) and
//! `wasmop-controller` (watches, the API client, the work loop, Events, leader election,
//! sources, status, metrics). No crate depends on this one.
//!
//! - [`cli`] is the `wasmop` command line.
//! - [`config`] reads the configuration (file, flags, environment), validates it, and
//!   converts it into each consumer's own settings type.
//! - `registry` keeps the live set of plugins: atomic swaps, last good version, rollback,
//!   one controller per plugin.
//! - `host` wires `wasmop run` together; `http` is the small HTTP server behind
//!   `health` (`/healthz`, `/readyz`, `/status`) and `/metrics`; `shutdown` is the
//!   graceful shutdown sequence.
//! - `admission` serves the plugins' admission webhooks over HTTPS, with the certificates
//!   the host issues itself, and registers them with the API server.

pub(crate) mod admission;
pub mod cli;
pub mod config;
pub(crate) mod health;
pub(crate) mod host;
pub(crate) mod http;
pub(crate) mod kubeclient;
pub(crate) mod registry;
pub(crate) mod shutdown;
