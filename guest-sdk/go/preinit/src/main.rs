//! Pre-initialises a Go plugin's core module, for `guest-sdk/go/build`:
//!
//! ```text
//! wasmop-go-preinit IN.wasm OUT.wasm
//! ```
//!
//! A Go module built with `-buildmode=c-shared` for `wasip1` exports `_initialize`, which
//! starts the Go runtime (heap, scheduler, GC, the module data) and runs every package's init
//! functions, the plugin's `Register` among them; a component made from it runs that on every
//! instantiation, so on every call, since the host makes a fresh instance per call. This tool
//! runs `_initialize` once, here, and writes a module whose memory and globals are the state
//! it left (wasmtime's pre-initialiser, `wasmtime-wizer`), without the `_initialize` export:
//! each call's instance then starts from that state, mapped copy-on-write by the host.
//!
//! The start-up runs under WASI with no authority, as the host runs plugins: no arguments,
//! environment, preopened directories, sockets or stdin; stdout and stderr are shown on this
//! tool's stderr. Its clocks and random bytes are deterministic, so the same module always
//! pre-initialises to the same bytes (a rebuild of unchanged sources is the same plugin
//! version): the wall clock stands at the Unix epoch, the monotonic clock advances a
//! microsecond per reading, and the random bytes repeat the module's sha256. What follows for
//! a plugin (the seeds of Go's runtime generator and of its maps are the same in every call)
//! is documented in guest-sdk/go/README.md.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use sha2::{Digest as _, Sha256};
use wasmop_core::plugin::text::Escaped;
use wasmtime::{Config, Engine, Instance, Linker, Module, Store, Strategy, Val};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtxBuilder};
use wasmtime_wizer::{InstanceState, SnapshotVal, ValType, Wizer};

/// Output the start-up may print and this tool shows: a Go init function that prints is
/// unusual, and a runaway one must not fill the disk of a build.
const OUTPUT_CAP: usize = 64 << 10;

/// The start-up's fuel: Go's runtime and the example plugins' init functions take under a
/// million units (788,000 for `database-config`), so a thousand times that leaves room for
/// heavy init functions while an init function that never returns is stopped within seconds
/// with a clear error instead of hanging the build.
const FUEL: u64 = 1_000_000_000;

fn main() -> ExitCode {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [input, output] = args.as_slice() else {
        eprintln!("usage: wasmop-go-preinit IN.wasm OUT.wasm");
        return ExitCode::from(2);
    };
    match run(input, output) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "wasmop-go-preinit: cannot pre-initialise {}: {e:#}",
                input.display()
            );
            ExitCode::FAILURE
        }
    }
}

fn run(input: &std::path::Path, output: &std::path::Path) -> anyhow::Result<()> {
    let wasm = std::fs::read(input).with_context(|| format!("cannot read {}", input.display()))?;
    let snapshot = preinitialise(&wasm)?;
    // Written beside the target and renamed, so a reader never sees half a module.
    let partial = output.with_extension("partial");
    std::fs::write(&partial, &snapshot)
        .and_then(|()| std::fs::rename(&partial, output))
        .with_context(|| format!("cannot write {}", output.display()))
}

/// The store's state: the start-up's WASI context.
struct Host {
    wasi: WasiP1Ctx,
}

/// `wasm` with its `_initialize` run and its state captured.
fn preinitialise(wasm: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut wizer = Wizer::new();
    wizer.init_func("_initialize");
    let (cx, instrumented) = wizer.instrument(wasm).map_err(anyhow::Error::from)?;

    let mut config = Config::new();
    // Winch: compiling a Go module takes it a fraction of Cranelift's time, and the code runs
    // once.
    config.strategy(Strategy::Winch).consume_fuel(true);
    let engine = Engine::new(&config).map_err(anyhow::Error::from)?;
    let module = Module::new(&engine, &instrumented)
        .map_err(anyhow::Error::from)
        .context("the module does not compile")?;

    let stdout = MemoryOutputPipe::new(OUTPUT_CAP);
    let stderr = MemoryOutputPipe::new(OUTPUT_CAP);
    let seed = Sha256::digest(wasm).to_vec();
    let wasi = WasiCtxBuilder::new()
        .stdout(stdout.clone())
        .stderr(stderr.clone())
        .wall_clock(Epoch)
        .monotonic_clock(Ticks::default())
        .secure_random(wasmtime_wasi::Deterministic::new(seed.clone()))
        .insecure_random(wasmtime_wasi::Deterministic::new(seed))
        .insecure_random_seed(0)
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .build_p1();
    let mut store = Store::new(&engine, Host { wasi });
    store.set_fuel(FUEL).map_err(anyhow::Error::from)?;
    let mut linker = Linker::new(&engine);
    wasmtime_wasi::p1::add_to_linker_sync(&mut linker, |host: &mut Host| &mut host.wasi)
        .map_err(anyhow::Error::from)?;
    // Not WASI but the wasmtime adapter's own extension, which wit-bindgen's Go runtime
    // imports to pause the adapter's clock around allocations made for the component model;
    // this clock is deterministic already, so pausing it is nothing to do.
    linker
        .func_wrap(
            "wasi_snapshot_preview1",
            "adapter_monotonic_clock_set_paused",
            |_paused: i32| {},
        )
        .map_err(anyhow::Error::from)?;
    // The contract's imports (`wasmop:plugin/...`, lowered by wit-bindgen): the host is not
    // there at build time, and a call to it from an init function traps, naming it.
    linker
        .define_unknown_imports_as_traps(&module)
        .map_err(anyhow::Error::from)?;
    let instance = linker
        .instantiate(&mut store, &module)
        .map_err(anyhow::Error::from)
        .context("the module cannot be instantiated with WASI preview 1")?;
    let init = instance
        .get_typed_func::<(), ()>(&mut store, "_initialize")
        .map_err(anyhow::Error::from)
        .context(
            "the module has no `_initialize` of type [] -> [] (built without -buildmode=c-shared?)",
        )?;
    let called = init.call(&mut store, ());
    show("stdout", &stdout.contents());
    show("stderr", &stderr.contents());
    if let Err(e) = called {
        if store.get_fuel().is_ok_and(|left| left == 0) {
            bail!(
                "its start-up did not finish within {FUEL} units of fuel (an init function that never returns?)"
            );
        }
        return Err(anyhow::Error::from(e).context("its start-up (`_initialize`) failed"));
    }
    let mut state = State {
        store: &mut store,
        instance,
    };
    let snapshot = futures::executor::block_on(wizer.snapshot(&cx, &mut state))
        .map_err(anyhow::Error::from)?;
    without_empty_passive_data(&snapshot).context("cannot rewrite the pre-initialised module")
}

/// `wasm` without its empty passive data segments, when its code cannot refer to them.
///
/// The snapshot keeps each of the module's active data segments as an empty passive one
/// (their bytes are in the snapshot's memory now), so that the indices `memory.init` and
/// `data.drop` use stay valid. Go's linker writes tens of thousands of data segments (45,723
/// for `database-config`), and every instantiation fills in an entry per passive segment: a
/// seventh of a Go plugin's call (`cargo bench -p wasmop-runtime --bench dispatch`). Wizer
/// refuses `data.drop`, and Go emits no `memory.init`: when the code has neither, no index
/// can be observed and the empty segments go; otherwise the module is kept as it is.
fn without_empty_passive_data(wasm: &[u8]) -> anyhow::Result<Vec<u8>> {
    use wasmparser::{DataKind, Operator, Parser, Payload};
    let mut kept = 0u32;
    let mut empty = 0u32;
    for payload in Parser::new(0).parse_all(wasm) {
        match payload? {
            Payload::CodeSectionEntry(body) => {
                let mut operators = body.get_operators_reader()?;
                while !operators.eof() {
                    if matches!(
                        operators.read()?,
                        Operator::MemoryInit { .. } | Operator::DataDrop { .. }
                    ) {
                        return Ok(wasm.to_vec());
                    }
                }
            }
            Payload::DataSection(segments) => {
                for segment in segments {
                    let segment = segment?;
                    if matches!(segment.kind, DataKind::Passive) && segment.data.is_empty() {
                        empty += 1;
                    } else {
                        kept += 1;
                    }
                }
            }
            _ => {}
        }
    }
    if empty == 0 {
        return Ok(wasm.to_vec());
    }
    let mut module = wasm_encoder::Module::new();
    for payload in Parser::new(0).parse_all(wasm) {
        let payload = payload?;
        match &payload {
            Payload::DataSection(segments) => {
                let mut section = wasm_encoder::DataSection::new();
                for segment in segments.clone() {
                    let segment = segment?;
                    if !(matches!(segment.kind, DataKind::Passive) && segment.data.is_empty()) {
                        section.raw(&wasm[segment.range]);
                    }
                }
                module.section(&section);
            }
            Payload::DataCountSection { .. } => {
                module.section(&wasm_encoder::DataCountSection { count: kept });
            }
            other => {
                if let Some((id, range)) = other.as_section() {
                    module.section(&wasm_encoder::RawSection {
                        id,
                        data: &wasm[range],
                    });
                }
            }
        }
    }
    let rewritten = module.finish();
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(&rewritten)
        .context("the module without its empty data segments does not validate")?;
    Ok(rewritten)
}

/// Shows what the start-up printed on `stream`, if anything, a line at a time, each escaped
/// as the host escapes everything a plugin says (`wasmop_core::plugin::text`): a plugin's
/// init code (or a dependency's) must not be able to rewrite the terminal of whoever builds
/// it. The pipe's cap bounds the amount.
fn show(stream: &str, bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    eprintln!("wasmop-go-preinit: the start-up wrote to {stream}:");
    for line in String::from_utf8_lossy(bytes).lines() {
        eprintln!("{}", Escaped(line));
    }
}

/// The instance after its start-up, as wizer reads it.
struct State<'a> {
    store: &'a mut Store<Host>,
    instance: Instance,
}

impl InstanceState for State<'_> {
    async fn global_get(&mut self, name: &str, _: ValType) -> SnapshotVal {
        let global = self
            .instance
            .get_global(&mut *self.store, name)
            .unwrap_or_else(|| panic!("wizer exported the global {name}"));
        match global.get(&mut *self.store) {
            Val::I32(x) => SnapshotVal::I32(x),
            Val::I64(x) => SnapshotVal::I64(x),
            Val::F32(x) => SnapshotVal::F32(x),
            Val::F64(x) => SnapshotVal::F64(x),
            Val::V128(x) => SnapshotVal::V128(x.as_u128()),
            other => panic!("wizer rejects modules with a global of this type: {other:?}"),
        }
    }

    async fn memory_contents(&mut self, name: &str, contents: impl FnOnce(&[u8]) + Send) {
        let memory = self
            .instance
            .get_memory(&mut *self.store, name)
            .unwrap_or_else(|| panic!("wizer exported the memory {name}"));
        contents(memory.data(&*self.store));
    }
}

/// A wall clock standing at the Unix epoch.
struct Epoch;

impl HostWallClock for Epoch {
    fn resolution(&self) -> std::time::Duration {
        std::time::Duration::from_secs(1)
    }
    fn now(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }
}

/// A monotonic clock that advances a microsecond each time it is read: deterministic, and
/// never standing still for a start-up that waits for time to pass.
#[derive(Default)]
struct Ticks(std::sync::atomic::AtomicU64);

impl HostMonotonicClock for Ticks {
    fn resolution(&self) -> u64 {
        1_000
    }
    fn now(&self) -> u64 {
        self.0
            .fetch_add(1_000, std::sync::atomic::Ordering::Relaxed)
    }
}
