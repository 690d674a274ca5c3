//! The one wasmtime [`Engine`]: Cranelift, epoch interruption driven by a ticker thread, and
//! the pooling allocator when the machine can reserve its address space, on-demand allocation
//! with small reservations when it cannot.

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig,
};

use super::{AllocatorChoice, RuntimeConfig};

/// Core instances one component may create. A Rust component built by `wit-component` has a
/// handful (the main module plus adapter and shim modules); 16 leaves room for composed
/// components while bounding the bookkeeping a hostile component can make the host do.
pub const MAX_CORE_INSTANCES_PER_COMPONENT: u32 = 16;
/// Linear memories per component: one for the guest, and room for an adapter's.
pub const MAX_MEMORIES_PER_COMPONENT: u32 = 4;
/// Tables per component: the guest's indirect-call table plus shim tables.
pub const MAX_TABLES_PER_COMPONENT: u32 = 16;
/// Elements per table. Rust guests with large dependency trees have tables of a few thousand
/// entries; 100 000 is far above that and still only ~800 KB per table slot.
pub const MAX_TABLE_ELEMENTS: usize = 100_000;
/// Bytes of linear memory the pooling allocator keeps resident (and resets in place) between
/// instances. With `pagemap_scan` (Linux 6.7+) one `ioctl` finds the pages the guest dirtied
/// and only those are reset, up to this many bytes; without it, this many bytes from the start
/// of memory are reset with a memset. Either way a reused slot takes no page faults for them.
/// 1 MiB per concurrent slot holds a Rust guest's stack top, data and a reconcile's heap.
///
/// Measured with `cargo bench -p wasmop --bench dispatch` (do-nothing guest, median): 9.6 µs
/// as configured; 17.3 µs keeping nothing resident (every page faulted back in on each call);
/// 25.8 µs without `pagemap_scan` (a 1 MiB memset per call); 14.4 µs with no table pages kept.
const KEEP_RESIDENT_BYTES: usize = 1 << 20;
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

fn base_config(config: &RuntimeConfig) -> Config {
    let mut c = Config::new();
    c.wasm_component_model(true)
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
    c
}

fn pooling(config: &RuntimeConfig) -> Config {
    let slots = config.concurrency;
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
        .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
        .table_keep_resident(KEEP_RESIDENT_BYTES / 16)
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
pub fn for_target(
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

/// Builds the engine as `config.allocator` asks, probing the pooling allocator first in
/// `Auto` mode: reserving the pool's address space is what fails on small machines.
pub fn build(config: &RuntimeConfig) -> Result<(Engine, AllocatorMode), EngineError> {
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

/// Advances the engine's epoch every tick on a plain thread (it only sleeps and increments
/// an atomic, so it needs no async runtime). Stops when dropped.
pub struct EpochTicker {
    stop: Arc<AtomicBool>,
}

impl EpochTicker {
    /// Starts ticking.
    pub fn start(engine: Engine, tick: Duration) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("wasmop-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    engine.increment_epoch();
                }
            })?;
        Ok(Self { stop })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
