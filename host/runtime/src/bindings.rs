//! The one place the `wasmop:plugin` worlds become Rust: wasmtime's `bindgen!` over `wit/`
//! (the current contract, 0.2) and over `wit/0.1.0/` (the frozen 0.1 contract, which the
//! host keeps loading; see [`crate::contract`]). Every import is async (host calls reach the
//! cluster) and trappable (the outer error is a trap: a breached limit or a host bug; the inner
//! `kube-error` is for the guest to handle).

/// `wasmop:plugin@0.2.0`, the contract new plugins are built against.
pub(crate) mod v0_2 {
    wasmtime::component::bindgen!({
        world: "plugin",
        path: "../../wit",
        imports: { default: async | trappable },
        exports: { default: async },
    });
}

/// `wasmop:plugin@0.1.0`, frozen: components built against it load unchanged.
pub(crate) mod v0_1 {
    wasmtime::component::bindgen!({
        world: "plugin",
        path: "../../wit/0.1.0",
        imports: { default: async | trappable },
        exports: { default: async },
    });
}
