//! `wasmop-go-preinit` on small modules written for each promise: the start-up's state is
//! captured and `_initialize` is gone, WASI is there with no authority and deterministic
//! clocks and random bytes (so a build is reproducible), and an init function that fails,
//! calls the host or never returns is an error that names the module and the cause.
//!
//! The Go plugins themselves are pre-initialised by every Go test (`tests/go`), which runs
//! their golden cases on the result. (This test also makes the test suite's build produce
//! the binary, with the features the rest of the workspace gives wasmtime: see
//! guest-sdk/go/build.)

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use wasmtime::{Engine, Instance, Linker, Module, Store};

/// A module like a Go reactor's: WASI preview 1 imports, a contract import, one memory and a
/// mutable global, and an `_initialize` whose body is `init`.
fn reactor(init: &str) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module
            (import "wasi_snapshot_preview1" "random_get" (func $random (param i32 i32) (result i32)))
            (import "wasi_snapshot_preview1" "clock_time_get" (func $clock (param i32 i64 i32) (result i32)))
            (import "wasi_snapshot_preview1" "environ_sizes_get" (func $environ (param i32 i32) (result i32)))
            (import "wasi_snapshot_preview1" "args_sizes_get" (func $args (param i32 i32) (result i32)))
            (import "wasi_snapshot_preview1" "fd_prestat_get" (func $prestat (param i32 i32) (result i32)))
            (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
            (import "wasmop:plugin/log@0.2.0" "write" (func $log (param i32 i32 i32)))
            (memory (export "memory") 1)
            (global $state (mut i32) (i32.const 0))
            (data (i32.const 256) "started\n")
            (data (i32.const 512) "\1b[2J\0dbuild ok\0a")
            (func (export "_initialize") {init})
            (func (export "state") (result i32) global.get $state)
            (func (export "load") (param i32) (result i64) local.get 0 i64.load))"#
    ))
    .unwrap()
}

/// The start-up of a Go reactor in small: randomness, the clock, the environment, the
/// arguments and the preopens asked for and kept in memory, and the global set.
const START_UP: &str = r#"
    (drop (call $random (i32.const 16) (i32.const 8)))
    (drop (call $clock (i32.const 1) (i64.const 1) (i32.const 32)))
    (drop (call $clock (i32.const 1) (i64.const 1) (i32.const 40)))
    (drop (call $clock (i32.const 0) (i64.const 1) (i32.const 48)))
    (drop (call $environ (i32.const 64) (i32.const 68)))
    (drop (call $args (i32.const 72) (i32.const 76)))
    (i64.store (i32.const 80) (i64.extend_i32_u (call $prestat (i32.const 3) (i32.const 88))))
    (global.set $state (i32.const 42))"#;

/// Runs the tool on `module` (written to a fresh directory); its exit status, stderr, what it
/// wrote and the input's path.
fn preinit(module: &[u8]) -> (bool, String, Option<Vec<u8>>, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("core.wasm");
    let output = dir.path().join("preinit.wasm");
    std::fs::write(&input, module).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_wasmop-go-preinit"))
        .arg(&input)
        .arg(&output)
        .output()
        .unwrap();
    let written = std::fs::read(&output).ok();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        written,
        input,
    )
}

/// Instantiates a pre-initialised module with every import a trap: nothing may run again.
fn instantiate(wasm: &[u8]) -> (Store<()>, Instance) {
    let engine = Engine::default();
    let module = Module::new(&engine, wasm).unwrap();
    let mut linker = Linker::new(&engine);
    linker.define_unknown_imports_as_traps(&module).unwrap();
    let mut store = Store::new(&engine, ());
    let instance = linker.instantiate(&mut store, &module).unwrap();
    (store, instance)
}

fn load(store: &mut Store<()>, instance: &Instance, at: i32) -> i64 {
    let load = instance
        .get_typed_func::<i32, i64>(&mut *store, "load")
        .unwrap();
    load.call(store, at).unwrap()
}

#[test]
fn the_start_up_state_is_kept_and_initialize_is_gone() {
    let module = reactor(START_UP);
    let (ok, stderr, written, _) = preinit(&module);
    assert!(ok, "{stderr}");
    let wasm = written.unwrap();
    let exports: Vec<String> = Module::new(&Engine::default(), &wasm)
        .unwrap()
        .exports()
        .map(|e| e.name().to_owned())
        .collect();
    assert!(
        !exports.iter().any(|e| e == "_initialize"),
        "{exports:?}: a component made from it must not run the start-up again"
    );
    let (mut store, instance) = instantiate(&wasm);
    let state = instance
        .get_typed_func::<(), i32>(&mut store, "state")
        .unwrap();
    assert_eq!(state.call(&mut store, ()).unwrap(), 42);
    // Random bytes were given (from the module's hash: see the next two tests).
    assert_ne!(load(&mut store, &instance, 16), 0);
    // The monotonic clock advances a microsecond per reading, from zero; the wall clock
    // stands at the Unix epoch.
    assert_eq!(load(&mut store, &instance, 32), 0);
    assert_eq!(load(&mut store, &instance, 40), 1_000);
    assert_eq!(load(&mut store, &instance, 48), 0);
    // No environment, no arguments, no preopened directory (EBADF, 8).
    assert_eq!(load(&mut store, &instance, 64), 0);
    assert_eq!(load(&mut store, &instance, 72), 0);
    assert_eq!(load(&mut store, &instance, 80), 8);
}

#[test]
fn the_same_module_pre_initialises_to_the_same_bytes() {
    let module = reactor(START_UP);
    let first = preinit(&module).2.unwrap();
    let second = preinit(&module).2.unwrap();
    assert!(first == second, "two runs differ");
}

#[test]
fn another_module_gets_other_random_bytes() {
    let random = |module: &[u8]| {
        let wasm = preinit(module).2.unwrap();
        let (mut store, instance) = instantiate(&wasm);
        load(&mut store, &instance, 16)
    };
    let other = format!("{START_UP} (nop)");
    assert_ne!(random(&reactor(START_UP)), random(&reactor(&other)));
}

#[test]
fn what_the_start_up_prints_is_shown() {
    let (ok, stderr, _, _) = preinit(&reactor(
        r#"(i32.store (i32.const 0) (i32.const 256)) (i32.store (i32.const 4) (i32.const 8))
           (drop (call $write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))"#,
    ));
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("the start-up wrote to stdout:\nstarted"),
        "{stderr}"
    );
}

#[test]
fn what_the_start_up_prints_cannot_forge_lines_or_drive_the_terminal() {
    // "\x1b[2J" (clear the screen), then a carriage return and a forged line.
    let (ok, stderr, _, _) = preinit(&reactor(
        r#"(i32.store (i32.const 0) (i32.const 512)) (i32.store (i32.const 4) (i32.const 14))
           (drop (call $write (i32.const 2) (i32.const 0) (i32.const 1) (i32.const 8)))"#,
    ));
    assert!(ok, "{stderr}");
    assert!(
        !stderr.contains('\x1b') && !stderr.contains('\r'),
        "{stderr:?}"
    );
    assert!(
        stderr.contains("the start-up wrote to stderr:\n\\u{1b}[2J\\rbuild ok"),
        "{stderr:?}"
    );
}

/// The tool failed on `module`, saying which file and `cause`, and wrote nothing.
fn fails(module: &[u8], cause: &str) {
    let (ok, stderr, written, input) = preinit(module);
    assert!(!ok, "it succeeded: {stderr}");
    assert!(written.is_none(), "it wrote a module");
    let named = format!(
        "wasmop-go-preinit: cannot pre-initialise {}: ",
        input.display()
    );
    assert!(
        stderr.starts_with(&named) && stderr.contains(cause),
        "{stderr}"
    );
}

#[test]
fn a_failing_start_up_is_an_error_naming_the_module() {
    fails(
        &reactor("unreachable"),
        "its start-up (`_initialize`) failed",
    );
}

#[test]
fn a_start_up_that_calls_the_host_is_an_error_naming_the_import() {
    fails(
        &reactor("(call $log (i32.const 0) (i32.const 0) (i32.const 0))"),
        "wasmop:plugin/log@0.2.0",
    );
}

#[test]
fn a_start_up_that_never_returns_runs_out_of_fuel() {
    fails(
        &reactor("(loop $spin (br $spin))"),
        "did not finish within 1000000000 units of fuel",
    );
}

#[test]
fn a_module_without_initialize_is_an_error() {
    let module = wat::parse_str(r#"(module (memory (export "memory") 1))"#).unwrap();
    fails(&module, "_initialize");
}

#[test]
fn a_missing_input_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("missing.wasm");
    let out = Command::new(env!("CARGO_BIN_EXE_wasmop-go-preinit"))
        .arg(&input)
        .arg(dir.path().join("out.wasm"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("cannot read {}", Path::new(&input).display())),
        "{stderr}"
    );
}

/// A module's data segments: (passive, active).
fn data_segments(wasm: &[u8]) -> (usize, usize) {
    let (mut passive, mut active) = (0, 0);
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        if let wasmparser::Payload::DataSection(segments) = payload.unwrap() {
            for segment in segments {
                match segment.unwrap().kind {
                    wasmparser::DataKind::Passive => passive += 1,
                    wasmparser::DataKind::Active { .. } => active += 1,
                }
            }
        }
    }
    (passive, active)
}

#[test]
fn the_data_segments_the_snapshot_replaced_are_dropped_unless_the_code_can_name_them() {
    // The snapshot holds their bytes; the empty passive segments wizer leaves in their place
    // would cost every instantiation an entry each.
    let wasm = preinit(&reactor(START_UP)).2.unwrap();
    let (passive, active) = data_segments(&wasm);
    assert_eq!(passive, 0, "the empty segments are gone");
    assert!(active >= 1, "the snapshot's memory is there");
    let (mut store, instance) = instantiate(&wasm);
    assert_eq!(
        load(&mut store, &instance, 256),
        i64::from_le_bytes(*b"started\n")
    );
    // Code that names data segments by index keeps them all (wizer refuses `data.drop`, so
    // `memory.init`: of nothing, from a segment that is empty once instantiated).
    let init = "(memory.init 1 (i32.const 0) (i32.const 0) (i32.const 0))";
    let (ok, stderr, written, _) = preinit(&reactor(&format!("{START_UP} {init}")));
    assert!(ok, "{stderr}");
    let wasm = written.unwrap();
    assert_eq!(data_segments(&wasm).0, 2);
    let (mut store, instance) = instantiate(&wasm);
    assert_eq!(
        load(&mut store, &instance, 256),
        i64::from_le_bytes(*b"started\n")
    );
}
