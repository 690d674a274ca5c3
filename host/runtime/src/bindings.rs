//! The one place the `wasmop:plugin` worlds become Rust: wasmtime's `bindgen!` over `wit/`
//! (the current contract, 0.3), `wit/0.2.0/` and `wit/0.1.0/` (the frozen contracts the host
//! keeps loading; see [`crate::contract`]). Every import is async (host calls reach the
//! cluster) and trappable (the outer error is a trap: a breached limit or a host bug; the inner
//! `kube-error` is for the guest to handle).
//!
//! 0.3 is bound through its widest world, `plugin-with-admission`: a component may export
//! `reconciler`, `admission` or both, so the contract module finds each export on its own
//! (`GuestIndices` per interface) instead of through the world's all-or-nothing `PluginPre`.

/// `wasmop:plugin@0.3.0`, the contract new plugins are built against.
pub(crate) mod v0_3 {
    wasmtime::component::bindgen!({
        world: "plugin-with-admission",
        path: "../../wit",
        imports: { default: async | trappable },
        exports: { default: async },
    });
}

/// `wasmop:plugin@0.2.0`, frozen: components built against it load unchanged.
pub(crate) mod v0_2 {
    wasmtime::component::bindgen!({
        world: "plugin",
        path: "../../wit/0.2.0",
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
