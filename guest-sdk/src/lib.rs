//! The wasmop guest SDK.
