//! `reload-probe` version 2 (same kinds as version 1, writes 2), for the hot-reload tests (see `reload-v1/src/probe.rs`).

const VERSION: &str = "2";
const OWNS: &[(&str, &str, &str)] = &[];
const TRAPS: bool = false;

include!("../../reload-v1/src/probe.rs");
