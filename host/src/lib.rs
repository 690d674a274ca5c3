//! wasmop: a Kubernetes controller host that runs reconcile logic as sandboxed WebAssembly
//! components.
