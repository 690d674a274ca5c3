//! How a [`super::Runtime`] is set up: the instance allocator, the compiler, tiered loading,
//! the artefact directories and the default per-call [`Limits`].

use std::path::PathBuf;
use std::time::Duration;

/// Which instance allocator to use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AllocatorChoice {
    /// Probe the pooling allocator at start-up and fall back to on-demand if it fails.
    #[default]
    Auto,
    /// The pooling allocator, or fail.
    Pooling,
    /// On-demand allocation with small reservations: slower instantiation, little address
    /// space. For tools that run one call (`wasmop test`) and for small machines.
    OnDemand,
}

/// Which wasmtime compiler turns plugins into machine code (and which made the code a
/// version runs now: see [`Plugin::compiler`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Compiler {
    /// Cranelift, the optimising compiler: the fastest code, hundreds of ms to compile a
    /// plugin of a few hundred KB.
    #[default]
    Cranelift,
    /// Winch, wasmtime's baseline (single-pass) compiler: compiles several times faster,
    /// for slower code. x86_64 and aarch64 only.
    Winch,
}

/// Per-call limits. Every size a guest controls is capped here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Linear memory per instance. 64 MiB by default: a Rust guest with serde_json working
    /// on Kubernetes objects (at most 1.5 MiB each in etcd) needs a few MiB.
    pub memory: u64,
    /// Wall-clock time per call, host calls included. 10 s by default: far above any sane
    /// reconcile, short enough that a stuck plugin does not hold a worker for long.
    pub deadline: Duration,
    /// Optional fuel (roughly, wasm instructions) per call, for deterministic CPU bounds.
    pub fuel: Option<u64>,
    /// Bytes a guest may pass to the host in one call, over all host calls (objects,
    /// patches, log lines, event fields). 16 MiB by default: etcd caps an object at 1.5 MiB,
    /// so ten maximal writes fit, and a guest cannot make the host buffer gigabytes.
    pub host_bytes: u64,
    /// `kube` and `events` calls per reconcile. 1000 by default: more is a loop, not a
    /// controller, and would take the API server's client rate limits minutes to serve.
    pub host_calls: u32,
    /// Log lines forwarded per call; more are counted and dropped. 200 by default, so a log
    /// flood cannot drown the host's logs.
    pub log_lines: u32,
    /// Bytes kept of one log line (and of one line of stdout/stderr). 4 KiB by default.
    pub log_line_bytes: usize,
    /// Bytes of stdout and of stderr captured per call; the rest is dropped. 64 KiB: enough
    /// for a panic message and backtrace.
    pub output_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory: 64 << 20,
            deadline: Duration::from_secs(10),
            fuel: None,
            host_bytes: 16 << 20,
            host_calls: 1000,
            log_lines: 200,
            log_line_bytes: 4 << 10,
            output_bytes: 64 << 10,
        }
    }
}

/// The default [`RuntimeConfig::describe_deadline`].
pub const DEFAULT_DESCRIBE_DEADLINE: Duration = Duration::from_secs(1);

/// How the runtime is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// Calls that may run at once, over all plugins; sizes the pooling allocator. 64 by
    /// default: a controller's worker count, well within a 47-bit address space.
    pub concurrency: u32,
    /// Default limits for plugins loaded without their own.
    pub limits: Limits,
    /// Where precompiled artefacts are cached; `None` disables the cache.
    pub cache_dir: Option<PathBuf>,
    /// A read-only directory of artefacts made by `wasmop compile`, tried after the cache.
    pub precompiled_dir: Option<PathBuf>,
    /// The largest component this runtime compiles itself; `None` (the default) compiles any.
    /// A bigger one loads only from an artefact (the cache's or the precompiled directory's)
    /// and is otherwise refused ([`crate::LoadError::TooBigToCompile`]): compiling takes many
    /// times a component's size in memory (an 18 MiB CPython component about 420 MiB at the
    /// peak), which a small node's memory limit would answer by killing the host.
    pub max_compile_bytes: Option<u64>,
    /// The instance allocator.
    pub allocator: AllocatorChoice,
    /// A fixed wall-clock time plugins see, for reproducible offline runs (conditions carry
    /// `lastTransitionTime`); `None` gives them the real time.
    pub fixed_clock: Option<std::time::SystemTime>,
    /// How often the epoch advances while calls run: 10 ms, the granularity of deadlines and
    /// of `demote_after`, and how long a busy guest computes on a host worker before it
    /// yields to other tasks. A guest that keeps computing is moved off the host's workers
    /// after `demote_after` anyway, so a finer tick protects little and costs a wake-up of
    /// the ticker thread per tick for as long as any call runs (1 ms ticks were ~5% of the
    /// host's CPU in a 1,000-object storm, `perf record`). The ticker sleeps while no call runs.
    pub epoch_tick: Duration,
    /// Whether the engine meters fuel, so that plugins may have fuel budgets. Also on when the
    /// default `limits` have a budget. Metering costs every call a little (a counter update
    /// per basic block) and changes the generated code, so it is off unless some plugin needs
    /// it; plugins without a budget then run with all the fuel there is.
    pub consume_fuel: bool,
    /// The compiler. Cranelift by default; artefacts made by one do not fit the other.
    pub compiler: Compiler,
    /// Tiered loading: a version with no artefact (cache or precompiled directory) is compiled
    /// by Winch and serves at once, and Cranelift's code replaces it when the background
    /// compilation ends. Off by default (tools that load a plugin once gain nothing); `wasmop
    /// run` takes it from the host config. Only with the Cranelift compiler, on x86_64 and
    /// aarch64.
    pub tiered: bool,
    /// After how much computing a call is demoted: moved off the host's tokio workers to the
    /// low-priority lane, whose threads run at nice 19 (see the `lane` module).
    /// Counted in slices of guest code of one epoch tick each, so time spent waiting (for a
    /// host call, for a worker) does not count. Off by default (a tool that runs one call
    /// has nothing to protect); `wasmop run` takes it from the host config (50 ms).
    pub demote_after: Option<Duration>,
    /// Wall-clock time `describe` gets at load, instead of the call deadline. 1 s by default: a
    /// real `describe` returns a literal record in microseconds, and a component that starts
    /// an interpreter first (CPython) takes tens of ms; a `describe` that loops is refused
    /// after this instead of the call deadline, so it cannot hold a load up for long.
    pub describe_deadline: Duration,
    /// Whether the engine tells `perf` where the plugins' compiled functions are: a line per
    /// function in `/tmp/perf-<pid>.map` as each version's code is loaded (compiled or from
    /// an artefact), so that `perf record` / `perf report` name a plugin's functions instead
    /// of showing anonymous addresses. The names come from the component's name section (a
    /// plugin whose symbols were stripped shows `wasm-function[N]`). Changes no generated
    /// code; off by default.
    pub perf_map: bool,
    /// Whether a component may carry the sources of a `wasmop dev` build: a custom section
    /// `wasmop-dev-sources` at its end, which the runtime cuts off before compiling (so that
    /// every edit of the sources reuses the compiled interpreter) and gives each of the
    /// version's calls as its stdin (see the loader's `dev` module). Only `wasmop dev` turns
    /// it on; elsewhere such a section is left in the component, which wasmtime ignores, and
    /// calls get an empty stdin as always.
    pub dev_sources: bool,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            concurrency: 64,
            limits: Limits::default(),
            cache_dir: None,
            precompiled_dir: None,
            max_compile_bytes: None,
            allocator: AllocatorChoice::Auto,
            fixed_clock: None,
            epoch_tick: Duration::from_millis(10),
            consume_fuel: false,
            compiler: Compiler::Cranelift,
            tiered: false,
            demote_after: None,
            describe_deadline: DEFAULT_DESCRIBE_DEADLINE,
            perf_map: false,
            dev_sources: false,
        }
    }
}

impl RuntimeConfig {
    /// Sets how many calls may run at once.
    #[must_use]
    pub fn concurrency(mut self, n: u32) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// Sets the default per-call limits.
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Caches precompiled artefacts in `dir` (created if missing). Loading from the cache
    /// skips compilation (hundreds of ms) at the price of trusting that directory: anyone who
    /// can write there can run native code in the host.
    #[must_use]
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Loads artefacts that `wasmop compile` made (for this architecture) from `dir` when the
    /// cache has none, instead of compiling. Like the cache, it is trusted: anyone who can
    /// write there can run native code in the host. Artefacts that do not fit this engine are
    /// skipped (and the plugin compiled).
    #[must_use]
    pub fn precompiled_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.precompiled_dir = Some(dir.into());
        self
    }

    /// Compiles components of at most `bytes` (`None`: any); see
    /// [`RuntimeConfig::max_compile_bytes`](Self#structfield.max_compile_bytes).
    #[must_use]
    pub fn max_compile_bytes(mut self, bytes: Option<u64>) -> Self {
        self.max_compile_bytes = bytes;
        self
    }

    /// Shows plugins a fixed wall-clock time (their monotonic clock still runs).
    #[must_use]
    pub fn fixed_clock(mut self, at: std::time::SystemTime) -> Self {
        self.fixed_clock = Some(at);
        self
    }

    /// Chooses the instance allocator.
    #[must_use]
    pub fn allocator(mut self, allocator: AllocatorChoice) -> Self {
        self.allocator = allocator;
        self
    }

    /// Meters fuel in the engine, so that plugins loaded with a fuel budget can run. Costs
    /// every call a little and changes the compiled code (artefacts made without it do not
    /// fit, and are recompiled).
    #[must_use]
    pub fn consume_fuel(mut self, on: bool) -> Self {
        self.consume_fuel = on;
        self
    }

    /// Chooses the compiler.
    #[must_use]
    pub fn compiler(mut self, compiler: Compiler) -> Self {
        self.compiler = compiler;
        self
    }

    /// Loads versions that have no artefact on Winch code first and on Cranelift code once it
    /// is compiled in the background: a cold load takes a fraction of the time, and its calls
    /// run slower until the Cranelift code takes over (see [`Runtime::tiering`]).
    #[must_use]
    pub fn tiered(mut self, on: bool) -> Self {
        self.tiered = on;
        self
    }

    /// Demotes calls whose guest code has computed for `after` to the low-priority lane
    /// (`None`: never). Shorter protects the host and healthy plugins sooner from a spinning
    /// one; longer keeps ordinary reconciles, which compute for well under a millisecond, far
    /// from it. Either way a demoted call keeps every limit and finishes whenever there is
    /// CPU to spare.
    #[must_use]
    pub fn demote_after(mut self, after: Option<Duration>) -> Self {
        self.demote_after = after;
        self
    }

    /// Sets how long `describe` may run at load (see [`Self::describe_deadline`]).
    pub fn describe_deadline(mut self, deadline: Duration) -> Self {
        self.describe_deadline = deadline;
        self
    }

    /// Writes `/tmp/perf-<pid>.map` for `perf` (see [`Self::perf_map`]).
    #[must_use]
    pub fn perf_map(mut self, on: bool) -> Self {
        self.perf_map = on;
        self
    }

    /// Lets components carry the sources of a `wasmop dev` build (see [`Self::dev_sources`]).
    #[must_use]
    pub fn dev_sources(mut self, on: bool) -> Self {
        self.dev_sources = on;
        self
    }

    /// Whether artefacts (cached or precompiled) are mapped from their files: not with the
    /// perf map, which `perf` reads only for code in anonymous memory.
    pub fn maps_artefacts(&self) -> bool {
        !self.perf_map
    }

    /// Whether the engine meters fuel: asked for, or implied by a default fuel budget.
    pub fn fuel_enabled(&self) -> bool {
        self.consume_fuel || self.limits.fuel.is_some()
    }
}
