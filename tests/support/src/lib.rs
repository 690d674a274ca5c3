//! Test support for wasmop end-to-end tests.
