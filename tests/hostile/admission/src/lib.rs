//! Test plugin `admission-probe`: reconciles ConfigMaps (doing nothing) and reviews them
//! (validating and mutating, on create and update). What a review does is chosen by the
//! reviewed ConfigMap's `data.do`, so one component proves each rule of the admission
//! boundary (`host/runtime/tests/runtime/admission.rs`, and the end-to-end suite):
//!
//! - `admit` (or no `data.do`): admits; `mutate` adds the label `probe.wasmop.dev/mutated`
//!   with the probe's version as its value (`0.1.0`; `tests/hostile/admission-v2` is 0.2.0).
//! - `deny`: refuses with `data.message` (control characters and all), reason `Invalid`, 422.
//! - `loop`: computes forever (the deadline ends it).
//! - `bomb`: allocates until the memory cap stops it.
//! - `panic`: panics.
//! - `write`: tries to create a ConfigMap and emit an Event (reviews may only read), then
//!   admits.
//! - `read`: reads the ConfigMap `probe-source` in its namespace and admits with its
//!   `data.value` as a warning.
//! - `bad-code`: refuses with HTTP code 200.
//! - `bad-reason`: refuses with a reason that is not CamelCase.
//! - `warnings`: admits with 100 warnings of 10,000 characters with escape sequences.
//! - `rename` (mutate): returns the object under another name.
//!
//! `data.in` (`validate` or `mutate`) confines the misbehaviour to that review; the other
//! admits (as for `admit`). Without it, both reviews do what `data.do` says.

/// This build's version: what `describe` says and what the mutation's label holds.
const VERSION: &str = "0.1.0";

include!("probe.rs");
