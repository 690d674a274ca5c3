//! The end-to-end suites of `wasmop run` against a real kube-apiserver + etcd, as one test
//! binary with a module per concern (as wasmtime's `tests/all`): one link instead of one per
//! suite, and one control plane for all of them.
//!
//! Sharing is safe because every test has its own namespace (`TestEnv::start`), its own host
//! process confined to it, its own Lease (where it elects a leader) and its own audit user; the cluster-scoped objects the
//! suites install (the `Target` CRD, the test plugins' ClusterRole) are applied idempotently
//! and never removed. Three suites keep their own binary, each saying why in its header:
//! `e2e_restart.rs` (stops the API server), `e2e_crd_later.rs` (needs the `Target` CRD absent
//! when it starts) and `e2e_poison.rs` (its deep objects would slow every other test's lists).
//!
//! Run one module with a filter: `cargo test -p wasmop --test e2e reload::`.

#![allow(clippy::unwrap_used)]

#[path = "../harness/mod.rs"]
mod harness;

mod admission;
mod boundary;
mod contract;
mod database;
mod describe;
mod events;
mod fairness;
mod go;
mod ops;
mod python;
mod reload;
mod run;
mod scaffold;
