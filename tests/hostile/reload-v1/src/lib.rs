//! `reload-probe` version 1, for the hot-reload tests (see `reload-v1/src/probe.rs`).

const VERSION: &str = "1";
const OWNS: &[(&str, &str, &str)] = &[];
const TRAPS: bool = false;

include!("probe.rs");
