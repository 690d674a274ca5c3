//! The one place the `wasmop:plugin` world becomes Rust: wasmtime's `bindgen!` over `wit/`.
//! Every import is async (host calls reach the cluster) and trappable (the outer error is a
//! trap: a breached limit or a host bug; the inner `kube-error` is for the guest to handle).

wasmtime::component::bindgen!({
    world: "plugin",
    path: "../../wit",
    imports: { default: async | trappable },
    exports: { default: async },
});
