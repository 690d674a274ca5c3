//! The wasmtime [`Engine`]s: the main one (Cranelift, or Winch as configured) with the pooling
//! allocator when the machine can reserve its address space, on-demand allocation with small
//! reservations when it cannot; the Winch engine of tiered loading (on-demand); and the epoch
//! ticker thread that drives both engines' epoch interruption.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig,
    ProfilingStrategy, Strategy,
};

use super::tiered::Baseline;
use super::{AllocatorChoice, Compiler, RuntimeConfig};

/// Core instances one component may create. A Rust component built by `wit-component` has a
/// handful (the main module plus adapter and shim modules); 16 leaves room for composed
/// components while bounding the bookkeeping a hostile component can make the host do.
pub(crate) const MAX_CORE_INSTANCES_PER_COMPONENT: u32 = 16;
/// Linear memories per component: one for the guest, and room for an adapter's.
pub(crate) const MAX_MEMORIES_PER_COMPONENT: u32 = 4;
/// Tables per component: the guest's indirect-call table plus shim tables.
pub(crate) const MAX_TABLES_PER_COMPONENT: u32 = 16;
/// Elements per table. Rust guests with large dependency trees have tables of a few thousand
/// entries; 100 000 is far above that and still only ~800 KB per table slot.
pub(crate) const MAX_TABLE_ELEMENTS: usize = 100_000;
/// Bytes of linear memory the pooling allocator keeps resident (and resets in place) between
/// instances, when the kernel has `PAGEMAP_SCAN` (Linux 6.7+): one `ioctl` finds the pages
/// the guest dirtied and only those are reset, up to this many bytes, so a reused slot takes
/// no page faults for them. 4 MiB holds what a call of a pre-initialised CPython dirties
/// (about 1.9 MiB for a Database reconcile) with room to spare; a Rust or Go call dirties far
/// less. It is also what an idle warm slot may hold.
///
/// Measured with `cargo bench -p wasmop-runtime --bench dispatch`, the Python
/// `database-config` (mean of 2,500 calls): 1.06 ms at 4 MiB, 1.09 ms at 2 MiB, 1.74 ms at
/// 1 MiB, with ~0, ~0 and ~250 page faults per call. The wasmtime patch in vendor/ is what
/// lets the scan reach past the guest's first 32 runs of dirty pages: unpatched, a Python call
/// took ~470 faults and 2.23 ms whatever this was.
const KEEP_RESIDENT_BYTES: usize = 4 << 20;
/// Without `PAGEMAP_SCAN` the first this many bytes of memory are reset with a `memset` on
/// every call, dirtied or not, and the rest released with `madvise`: 1 MiB holds a Rust
/// guest's stack top, data and a reconcile's heap.
///
/// Measured with the dispatch bench (do-nothing guest, median): 9.6 µs with `PAGEMAP_SCAN`;
/// 17.3 µs keeping nothing resident (every page faulted back in on each call); 25.8 µs without
/// `PAGEMAP_SCAN` (this memset); 14.4 µs with no table pages kept.
const MEMSET_RESIDENT_BYTES: usize = 1 << 20;
/// The bytes of each table kept resident between instances (reset by a memset): 64 KiB, 8,192
/// function references, which holds a Rust guest's tables; measured with the lines above
/// (14.4 µs per do-nothing call keeping none, 9.6 µs keeping these).
const TABLE_KEEP_RESIDENT_BYTES: usize = 64 << 10;
/// The guard after a linear memory in on-demand mode: small, since the memory reservation
/// is small and bounds checks are explicit there anyway.
const ON_DEMAND_GUARD_BYTES: u64 = 64 << 10;
/// Wasm frames kept in a trap's backtrace: enough to see where a guest failed, short enough
/// for a log line.
const BACKTRACE_FRAMES: usize = 12;

/// Which instance allocator the engine uses, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllocatorMode {
    /// Pre-reserved slots, reused between calls.
    Pooling {
        /// Concurrent instances the pool holds.
        slots: u32,
    },
    /// Memory allocated per instance.
    OnDemand {
        /// Why pooling is not used.
        reason: String,
    },
}

impl std::fmt::Display for AllocatorMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AllocatorMode::Pooling { slots } => write!(f, "pooling allocator with {slots} slots"),
            AllocatorMode::OnDemand { reason } => write!(f, "on-demand allocator ({reason})"),
        }
    }
}

/// Why no engine could be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot configure the wasmtime engine ({mode})")]
pub struct EngineError {
    mode: &'static str,
    #[source]
    source: wasmtime::Error,
}

impl EngineError {
    /// The Winch engine's linker could not be populated (a host bug).
    pub(crate) fn linker(source: wasmtime::Error) -> Self {
        Self {
            mode: "linking the host's imports for Winch",
            source,
        }
    }
}

fn base_config(config: &RuntimeConfig) -> Config {
    let mut c = Config::new();
    c.strategy(match config.compiler {
        Compiler::Cranelift => Strategy::Cranelift,
        Compiler::Winch => Strategy::Winch,
    })
    .wasm_component_model(true)
    .epoch_interruption(true)
    .cranelift_opt_level(OptLevel::Speed)
    // Plugins are synchronous components. Without the component-model-async machinery
    // a Store skips initialising concurrent-task state, which is measurable per call;
    // what it rules out is async WIT functions, streams and futures (WASI 0.3 guests).
    .concurrency_support(false)
    .wasm_backtrace_max_frames(NonZeroUsize::new(BACKTRACE_FRAMES));
    if config.fuel_enabled() {
        c.consume_fuel(true);
    }
    if config.perf_map {
        c.profiler(ProfilingStrategy::PerfMap);
    }
    c
}

fn pooling(config: &RuntimeConfig) -> Config {
    let slots = config.concurrency;
    let keep_resident = if PoolingAllocationConfig::is_pagemap_scan_available() {
        KEEP_RESIDENT_BYTES
    } else {
        MEMSET_RESIDENT_BYTES
    };
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(slots)
        .total_core_instances(slots * MAX_CORE_INSTANCES_PER_COMPONENT)
        .total_memories(slots * MAX_MEMORIES_PER_COMPONENT)
        .total_tables(slots * MAX_TABLES_PER_COMPONENT)
        .total_stacks(slots)
        .max_core_instances_per_component(MAX_CORE_INSTANCES_PER_COMPONENT)
        .max_memories_per_component(MAX_MEMORIES_PER_COMPONENT)
        .max_tables_per_component(MAX_TABLES_PER_COMPONENT)
        .table_elements(MAX_TABLE_ELEMENTS)
        .max_memory_size(usize::try_from(config.limits.memory).unwrap_or(usize::MAX))
        .max_unused_warm_slots(slots)
        .linear_memory_keep_resident(keep_resident)
        .table_keep_resident(TABLE_KEEP_RESIDENT_BYTES)
        // Linux 6.7+ resets only the pages a guest touched; elsewhere it quietly falls back.
        .pagemap_scan(Enabled::Auto);
    let mut c = base_config(config);
    c.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    c
}

fn on_demand(config: &RuntimeConfig) -> Config {
    let mut c = base_config(config);
    // Reserve only what the memory limit allows, so many concurrent instances fit in a small
    // (39-bit) address space; bounds checks become explicit, which costs a little speed.
    c.allocation_strategy(InstanceAllocationStrategy::OnDemand)
        .memory_reservation(config.limits.memory)
        .memory_guard_size(ON_DEMAND_GUARD_BYTES)
        .memory_reservation_for_growth(0);
    c
}

/// An engine that only compiles, for `target`, with every setting that shapes the code of a
/// host configured like `config` whose allocator is `mode` (it never allocates instances).
pub(crate) fn for_target(
    config: &RuntimeConfig,
    mode: super::precompiled::ArtefactMode,
    target: Option<&str>,
) -> wasmtime::Result<Engine> {
    use super::precompiled::ArtefactMode;
    // The pooling allocator changes no code-shaping setting (wasmtime's tunables do not
    // depend on the allocation strategy), so its artefacts come from the base settings.
    let mut c = match mode {
        ArtefactMode::Pooling => base_config(config),
        ArtefactMode::OnDemand => on_demand(config),
    };
    if let Some(target) = target {
        c.target(target)?;
    }
    Engine::new(&c)
}

/// The Winch engine of tiered loading: the settings of the main engine (epoch interruption,
/// fuel, limits, backtraces) with Winch as the compiler and the on-demand allocator, so that it
/// reserves no pool beside the main engine's; its code runs only until Cranelift's replaces it.
pub(crate) fn build_baseline(config: &RuntimeConfig) -> Result<Engine, EngineError> {
    baseline_settings(config).map_err(|source| EngineError {
        mode: "Winch, on-demand allocation",
        source,
    })
}

/// An engine with the settings of [`build_baseline`]'s: what it compiles, that engine loads.
pub(crate) fn baseline_settings(config: &RuntimeConfig) -> wasmtime::Result<Engine> {
    let winch = RuntimeConfig {
        compiler: Compiler::Winch,
        ..config.clone()
    };
    Engine::new(&on_demand(&winch))
}

/// Builds the engine as `config.allocator` asks, probing the pooling allocator first in
/// `Auto` mode: reserving the pool's address space is what fails on small machines.
pub(crate) fn build(config: &RuntimeConfig) -> Result<(Engine, AllocatorMode), EngineError> {
    let try_on_demand = |reason: String| {
        Engine::new(&on_demand(config))
            .map(|e| (e, AllocatorMode::OnDemand { reason }))
            .map_err(|source| EngineError {
                mode: "on-demand allocation",
                source,
            })
    };
    let built = match config.allocator {
        AllocatorChoice::OnDemand => try_on_demand("chosen in the configuration".into())?,
        AllocatorChoice::Pooling => Engine::new(&pooling(config))
            .map(|e| {
                let slots = config.concurrency;
                (e, AllocatorMode::Pooling { slots })
            })
            .map_err(|source| EngineError {
                mode: "pooling allocation",
                source,
            })?,
        AllocatorChoice::Auto => match Engine::new(&pooling(config)) {
            Ok(e) => {
                let slots = config.concurrency;
                (e, AllocatorMode::Pooling { slots })
            }
            Err(e) => try_on_demand(format!("the pooling allocator's probe failed: {e:#}"))?,
        },
    };
    match &built.1 {
        AllocatorMode::OnDemand { .. } if config.allocator == AllocatorChoice::Auto => {
            tracing::warn!(allocator = %built.1, "wasm engine ready, without the pooling allocator: instantiation is slower");
        }
        mode => tracing::info!(allocator = %mode, "wasm engine ready"),
    }
    Ok(built)
}

/// Advances the engines' epochs every tick on a plain thread (it only sleeps and increments
/// an atomic, so it needs no async runtime) while any call is running, and sleeps without
/// waking while none is: an idle host does not wake up a thousand times a second. Stops when
/// dropped.
pub(crate) struct EpochTicker {
    shared: Arc<TickerShared>,
}

struct TickerShared {
    /// Calls running now (each holds a [`Ticking`]).
    running: Mutex<usize>,
    /// Wakes the parked ticker when the first call starts, or when the ticker stops.
    wake: Condvar,
    stop: AtomicBool,
}

impl EpochTicker {
    /// Starts the ticker thread; it ticks only while some call holds a [`Ticking`]. It ticks
    /// `engine`, and the Winch engine once `baseline` holds one.
    pub(crate) fn start(
        engine: Engine,
        baseline: Arc<OnceLock<Option<Baseline>>>,
        tick: Duration,
    ) -> std::io::Result<Self> {
        Self::start_with(tick, move || {
            engine.increment_epoch();
            if let Some(Some(baseline)) = baseline.get() {
                baseline.engine.increment_epoch();
            }
        })
    }

    /// The ticker, calling `on_tick` for each tick.
    fn start_with(tick: Duration, on_tick: impl Fn() + Send + 'static) -> std::io::Result<Self> {
        let shared = Arc::new(TickerShared {
            running: Mutex::new(0),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let ticker = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("wasmop-epoch".into())
            .spawn(move || {
                loop {
                    {
                        let mut running = ticker.running.lock().unwrap_or_else(|e| e.into_inner());
                        while *running == 0 && !ticker.stop.load(Ordering::Relaxed) {
                            running = ticker.wake.wait(running).unwrap_or_else(|e| e.into_inner());
                        }
                    }
                    if ticker.stop.load(Ordering::Relaxed) {
                        break;
                    }
                    std::thread::sleep(tick);
                    on_tick();
                }
            })?;
        Ok(Self { shared })
    }

    /// Keeps the epoch advancing until the returned guard is dropped: hold one for as long as
    /// guest code of a call may run, or its deadline and its yields would never come.
    pub(crate) fn ticking(&self) -> Ticking {
        let mut running = self
            .shared
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *running += 1;
        if *running == 1 {
            self.shared.wake.notify_one();
        }
        Ticking {
            shared: Arc::clone(&self.shared),
        }
    }
}

/// A running call's hold on the epoch ticker (see [`EpochTicker::ticking`]).
pub(crate) struct Ticking {
    shared: Arc<TickerShared>,
}

impl Drop for Ticking {
    fn drop(&mut self) {
        let mut running = self
            .shared
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *running -= 1;
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        let _running = self
            .shared
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        self.shared.wake.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    fn counting() -> (EpochTicker, Arc<AtomicUsize>) {
        let ticks = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&ticks);
        let ticker = EpochTicker::start_with(Duration::from_millis(1), move || {
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .expect("ticker thread");
        (ticker, ticks)
    }

    #[test]
    fn the_ticker_ticks_only_while_a_call_holds_it() {
        let (ticker, ticks) = counting();
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(ticks.load(Ordering::SeqCst), 0, "no call ran: no tick");

        let first = ticker.ticking();
        let second = ticker.ticking();
        while ticks.load(Ordering::SeqCst) < 3 {
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(first);
        let seen = ticks.load(Ordering::SeqCst);
        while ticks.load(Ordering::SeqCst) < seen + 3 {
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(second);
        // At most the tick already under way after the last call ended, then none.
        std::thread::sleep(Duration::from_millis(10));
        let parked = ticks.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(ticks.load(Ordering::SeqCst), parked, "idle again: no tick");

        let _again = ticker.ticking();
        while ticks.load(Ordering::SeqCst) == parked {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

#[cfg(test)]
mod slots;
