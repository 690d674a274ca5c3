//! `reload-probe` version 4, whose reconcile traps (a broken build), for the rollback tests
//! (see `reload-v1/src/probe.rs`).

const VERSION: &str = "4";
const OWNS: &[(&str, &str, &str)] = &[];
const TRAPS: bool = true;

include!("../../reload-v1/src/probe.rs");
