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

/// The `admission-plugin` world, for its `admission` export alone: every import is the one
/// above (`with`), so the two share one set of import bindings. A plugin that reviews
/// admission requests invokes this world's export macro beside (or instead of) the one
/// above; each emits its world's exports as a custom section in the plugin's crate, and
/// wit-component merges them into the component's world.
pub mod admission {
    wit_bindgen::generate!({
        world: "admission-plugin",
        path: "../../wit",
        with: {
            "wasmop:plugin/types@0.3.0": crate::bindings::wasmop::plugin::types,
            "wasmop:plugin/plugin-info@0.3.0": crate::bindings::wasmop::plugin::plugin_info,
            "wasmop:plugin/kube@0.3.0": crate::bindings::wasmop::plugin::kube,
            "wasmop:plugin/events@0.3.0": crate::bindings::wasmop::plugin::events,
            "wasmop:plugin/log@0.3.0": crate::bindings::wasmop::plugin::log,
            "wasmop:plugin/config@0.3.0": crate::bindings::wasmop::plugin::config,
        },
        pub_export_macro: true,
        export_macro_name: "__export_admission_plugin",
        default_bindings_module: "wasmop_guest::__private::bindings::admission",
    });
}
