//! The runtime's tests, as one test binary with a module per concern (one link step instead
//! of one per file, as wasmtime's `tests/all`): real components (built from `tests/hostile/*`
//! and `plugins/rust/*` by `wasmop-test-guests`) against the in-memory cluster. Outcomes and
//! counts only, never timings.
//!
//! Run one concern with its module path as the filter, e.g.
//! `cargo test -p wasmop-runtime --test runtime -- tiering::`.

mod admission;
mod boundary;
mod cache;
mod calls;
mod contract;
mod demotion;
mod describe;
mod hostile;
mod limits;
mod loading;
mod stdin;
mod support;
mod tiering;
