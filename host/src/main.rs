//! The `wasmop` binary.
fn main() {}
