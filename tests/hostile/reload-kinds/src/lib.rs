//! `reload-probe` version 3: also owns ConfigMaps (a change of kinds), for the hot-reload tests (see `reload-v1/src/probe.rs`).

const VERSION: &str = "3";
const OWNS: &[(&str, &str, &str)] = &[("", "v1", "ConfigMap")];
const TRAPS: bool = false;

include!("../../reload-v1/src/probe.rs");
