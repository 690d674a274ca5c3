//! The one `wit_bindgen::generate!` for the `wasmop:plugin` world. Nothing else in the SDK
//! touches generated types except the conversions next to the types that wrap them.
//!
//! The generated code is the only `unsafe` in the SDK (canonical-ABI lifting and lowering);
//! `lib.rs` allows it for this module alone. On targets other than wasm32 the imports compile
//! to stubs that panic, which lets doctests and unit tests of pure helpers build natively.

wit_bindgen::generate!({
    world: "plugin",
    path: "../../wit",
    // `wasmop_guest::export!` expands in the plugin's crate and calls this macro by path.
    pub_export_macro: true,
    export_macro_name: "__export_plugin",
    default_bindings_module: "wasmop_guest::__private::bindings",
});
