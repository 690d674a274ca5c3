//! Test plugin `admission-probe`, version 0.2.0: the probe of `tests/hostile/admission`
//! (its source is included), whose mutation labels objects `probe.wasmop.dev/mutated: 0.2.0`,
//! so that a test sees which version answered a review across a hot reload.

/// This build's version: what `describe` says and what the mutation's label holds.
const VERSION: &str = "0.2.0";

include!("../../admission/src/probe.rs");
