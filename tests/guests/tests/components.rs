//! The example plugins are real components exporting `wasmop:plugin/reconciler@0.3.0`, or
//! `wasmop:plugin/admission@0.3.0`, or both, as plain `cargo build --target wasm32-wasip2` makes
//! them (what `build.rs` does), and as `cargo component build` makes them.

use std::path::{Path, PathBuf};
use std::process::Command;

use wasmop_test_guests::{GuestKind, all};
use wasmparser::{Encoding, Parser, Payload, Validator, WasmFeatures};

/// The interface a plugin that reconciles exports.
const RECONCILER: &str = "wasmop:plugin/reconciler@0.3.0";
/// The interface a plugin that serves admission exports, beside the reconciler or alone.
const ADMISSION: &str = "wasmop:plugin/admission@0.3.0";

/// What `plugin` must export, sorted: `database-config` also serves admission, and
/// `required-labels` serves admission only.
fn expected_exports(plugin: &str) -> Vec<&'static str> {
    match plugin {
        "database-config" => vec![ADMISSION, RECONCILER],
        "required-labels" => vec![ADMISSION],
        _ => vec![RECONCILER],
    }
}

fn sorted(mut exports: Vec<String>) -> Vec<String> {
    exports.sort();
    exports
}

/// Validates `bytes` as a component and returns the names it exports at the top level.
fn component_exports(path: &Path) -> Vec<String> {
    let bytes =
        std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    Validator::new_with_features(WasmFeatures::all())
        .validate_all(&bytes)
        .unwrap_or_else(|e| panic!("{} is not valid wasm: {e}", path.display()));
    let mut depth = 0usize;
    let mut exports = Vec::new();
    for payload in Parser::new(0).parse_all(&bytes) {
        match payload.unwrap_or_else(|e| panic!("cannot parse {}: {e}", path.display())) {
            Payload::Version { encoding, .. } => {
                if depth == 0 {
                    assert_eq!(
                        encoding,
                        Encoding::Component,
                        "{} is a core module, not a component",
                        path.display()
                    );
                }
                depth += 1;
            }
            Payload::End(_) => depth -= 1,
            Payload::ComponentExportSection(reader) if depth == 1 => {
                for export in reader {
                    exports.push(export.expect("validated above").name.name.to_owned());
                }
            }
            _ => {}
        }
    }
    exports
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn every_example_plugin_is_a_component_exporting_what_it_serves() {
    let plugins: Vec<_> = all()
        .iter()
        .filter(|g| g.kind == GuestKind::Plugin)
        .collect();
    let names: Vec<_> = plugins.iter().map(|g| g.name).collect();
    for expected in [
        "configmap-mirror",
        "database-config",
        "namespace-defaults",
        "required-labels",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} was not built; built: {names:?}"
        );
    }
    for plugin in plugins {
        let exports = sorted(component_exports(plugin.path()));
        assert_eq!(
            exports,
            expected_exports(plugin.name),
            "exports of {}",
            plugin.name
        );
    }
}

/// `cargo component build` (which `./dev setup` installs) builds for wasm32-wasip1 and adapts
/// the module to a component; the SDK must work that way too.
#[test]
fn sdk_plugin_builds_with_cargo_component() {
    let workspace = workspace();
    let target_dir = workspace.join("target/cargo-component");
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command
        .current_dir(&workspace)
        .args([
            "component",
            "build",
            "--profile",
            "wasm",
            "-p",
            "database-config",
            "--target-dir",
        ])
        .arg(&target_dir);
    // Settings of the outer cargo or the developer's shell that would redirect this build.
    for var in [
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_TARGET_DIR",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_MAKEFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        command.env_remove(var);
    }
    let output = command.output().expect("cargo runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("no such command: `component`"),
        "cargo-component is not installed; run `./dev setup` (or `cargo install --locked cargo-component`)"
    );
    assert!(
        output.status.success(),
        "cargo component build failed:\n{stderr}"
    );

    let component = target_dir.join("wasm32-wasip1/wasm/database_config.wasm");
    assert_eq!(
        sorted(component_exports(&component)),
        expected_exports("database-config")
    );
}
