//! The plugin runtime: everything wasmtime. One [`Runtime`] holds the engine, the linker and
//! the artefact cache; [`Runtime::load`] turns component bytes into a [`Plugin`], whose
//! [`Plugin::reconcile`] runs one call in a fresh, limited instance and returns an [`Outcome`].
//!
//! Callers (the CLI, the offline harness, the controller) never see wasmtime types.
//!
//! # Guarantees
//! - No state survives between calls: each call gets a new store and instance.
//! - Every call ends in exactly one [`Outcome`], whatever the guest does; the host and other
//!   plugins keep running.
//! - Compilation and artefact-cache I/O run on tokio's blocking pool, never on async threads.

mod ahead;
mod bindings;
mod cache;
mod call;
mod describe;
mod dispatch;
mod engine;
mod hostcalls;
mod loader;
mod outcome;
pub mod precompiled;
mod wasi;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use wasmtime::Engine;
use wasmtime::component::Linker;

pub use self::cache::CacheError;
use self::call::CallState;
pub use self::describe::DeclarationError;
pub use self::engine::{AllocatorMode, EngineError};
pub use self::loader::{LoadError, LoadStats};
pub use self::outcome::{Action, Budget, LimitKind, Outcome, PluginErrorKind, Usage};
use crate::cluster::{Cluster, ObjectRef};
use crate::plugin::{Digest, PluginInfo};
use crate::policy::{Grants, Policy};

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

/// Which wasmtime compiler turns plugins into machine code.
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
    /// The instance allocator.
    pub allocator: AllocatorChoice,
    /// A fixed wall-clock time plugins see, for reproducible offline runs (conditions carry
    /// `lastTransitionTime`); `None` gives them the real time.
    pub fixed_clock: Option<std::time::SystemTime>,
    /// How often the epoch advances while calls run. 1 ms: how long a busy guest computes before
    /// it yields its worker thread to other tasks (other plugins' calls, the host's own API
    /// traffic), so a plugin spinning at its deadline delays the others by at most about a
    /// tick per turn; also the granularity of deadlines. A tick costs one atomic increment,
    /// and the ticker sleeps while no call runs.
    pub epoch_tick: Duration,
    /// Whether the engine meters fuel, so that plugins may have fuel budgets. Also on when the
    /// default `limits` have a budget. Metering costs every call a little (a counter update
    /// per basic block) and changes the generated code, so it is off unless some plugin needs
    /// it; plugins without a budget then run with all the fuel there is.
    pub consume_fuel: bool,
    /// The compiler. Cranelift by default; artefacts made by one do not fit the other.
    pub compiler: Compiler,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            concurrency: 64,
            limits: Limits::default(),
            cache_dir: None,
            precompiled_dir: None,
            allocator: AllocatorChoice::Auto,
            fixed_clock: None,
            epoch_tick: Duration::from_millis(1),
            consume_fuel: false,
            compiler: Compiler::Cranelift,
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

    /// Whether the engine meters fuel: asked for, or implied by a default fuel budget.
    pub fn fuel_enabled(&self) -> bool {
        self.consume_fuel || self.limits.fuel.is_some()
    }
}

/// Why the runtime cannot start.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The engine could not be configured.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The linker could not be populated (a host bug).
    #[error("cannot link the host's imports")]
    Linker(#[source] wasmtime::Error),
    /// The epoch ticker thread could not start.
    #[error("cannot start the epoch ticker thread")]
    Ticker(#[source] std::io::Error),
}

struct RuntimeInner {
    engine: Engine,
    /// One permit per instance that may exist at once: the pooling allocator has exactly
    /// `concurrency` slots, and a call that found none free would fail instead of waiting.
    slots: Arc<tokio::sync::Semaphore>,
    linker: Linker<CallState>,
    mode: AllocatorMode,
    cache: Option<cache::ArtefactCache>,
    /// Compilations started by [`Runtime::compile_ahead`].
    ahead: ahead::Ahead,
    config: RuntimeConfig,
    ticker: engine::EpochTicker,
}

/// The plugin runtime. Cheap to clone; share one per process.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<RuntimeInner>,
}

impl Runtime {
    /// Builds the engine (probing the pooling allocator), the linker, and starts the epoch
    /// ticker.
    pub fn new(config: RuntimeConfig) -> Result<Self, RuntimeError> {
        let (engine, mode) = engine::build(&config)?;
        let linker = call::linker(&engine).map_err(RuntimeError::Linker)?;
        let cache = config
            .cache_dir
            .as_deref()
            .map(|dir| cache::ArtefactCache::new(dir, &engine));
        let ticker = engine::EpochTicker::start(engine.clone(), config.epoch_tick)
            .map_err(RuntimeError::Ticker)?;
        Ok(Self {
            inner: Arc::new(RuntimeInner {
                engine,
                slots: Arc::new(tokio::sync::Semaphore::new(config.concurrency as usize)),
                linker,
                mode,
                cache,
                ahead: ahead::Ahead::default(),
                config,
                ticker,
            }),
        })
    }

    /// Which allocator is in use, and why.
    pub fn allocator(&self) -> &AllocatorMode {
        &self.inner.mode
    }

    /// The configuration the runtime was built with.
    pub fn config(&self) -> &RuntimeConfig {
        &self.inner.config
    }

    /// Loads a plugin from component bytes: validates it against the `wasmop:plugin` world,
    /// compiles it (or loads the cached artefact), calls `describe` once, derives its grants
    /// and prepares it for fast instantiation.
    ///
    /// # Errors
    /// A [`LoadError`] saying what is wrong with the bytes (not wasm, truncated, a core
    /// module, another world, an incompatible version, missing exports, unsatisfiable
    /// imports), that `describe` failed or returned something invalid, or that the policy
    /// refuses what the plugin asks for.
    pub async fn load(&self, bytes: Vec<u8>, options: LoadOptions) -> Result<Plugin, LoadError> {
        loader::load(self, bytes, options).await
    }

    /// Starts compiling `bytes` (or loading its artefact) in the background, so that a
    /// [`load`](Self::load) of the same bytes soon after finds the work done or under way. For
    /// a source that sees a new version before it has settled; bytes that are not a whole
    /// component are ignored (the load reports them). Must be called within a tokio runtime.
    pub fn compile_ahead(&self, bytes: Vec<u8>) {
        loader::compile_ahead(self, bytes);
    }

    /// Forgets compilations started ahead that no load took: call it once a source's settled
    /// content has been loaded.
    pub fn discard_ahead(&self) {
        self.inner.ahead.clear();
    }

    /// How many compilations started ahead are kept (for tests).
    pub fn compiling_ahead(&self) -> usize {
        self.inner.ahead.len()
    }

    /// Reads `path` (without blocking the async runtime) and [`load`](Self::load)s it.
    pub async fn load_file(&self, path: &Path, options: LoadOptions) -> Result<Plugin, LoadError> {
        let bytes = tokio::fs::read(path)
            .await
            .map_err(|source| LoadError::Read {
                path: path.to_owned(),
                source,
            })?;
        self.load(bytes, options).await
    }
}

/// What the operator says about one plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadOptions {
    /// The policy its grants are derived under.
    pub policy: Policy,
    /// Its settings, returned by the `config.get` host call. Must be a JSON object.
    pub config: Value,
    /// Its limits; `None` uses the runtime's defaults. The memory limit cannot exceed the
    /// runtime's (the pooling allocator's slots are sized by it).
    pub limits: Option<Limits>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            policy: Policy::default(),
            config: Value::Object(Default::default()),
            limits: None,
        }
    }
}

/// One unit of work for a plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Which object.
    pub target: ObjectRef,
    /// The object as the host last saw it.
    pub object: RequestObject,
}

/// The object of a [`Request`], as a value or as the JSON text the plugin will get.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestObject {
    /// A value: trimmed (no `managedFields`, no last-applied annotation) and written as JSON
    /// text for the call.
    Value(Value),
    /// JSON text of an object already trimmed, passed to the plugin as it is: the controller
    /// writes its cached objects (trimmed when cached) straight to text, which spares
    /// building a `Value` that the call would only write out and drop.
    Text(String),
}

impl From<Value> for RequestObject {
    fn from(value: Value) -> Self {
        RequestObject::Value(value)
    }
}

impl Request {
    /// A request for `object`, identified by its own `apiVersion`, `kind` and metadata.
    pub fn for_object(object: Value) -> Result<Self, crate::cluster::IdentityError> {
        Ok(Self {
            target: ObjectRef::of(&object)?,
            object: RequestObject::Value(object),
        })
    }
}

pub(crate) struct PluginInner {
    /// Keeps the engine and its epoch ticker alive as long as any version of a plugin is:
    /// without ticks, deadlines would never fire.
    runtime: Arc<RuntimeInner>,
    info: PluginInfo,
    digest: Digest,
    /// Name, grants, settings and limits, shared by every call.
    shared: Arc<call::PluginShared>,
    /// WASI contexts for reuse by this version's calls.
    wasi: wasi::WasiPool,
    pre: bindings::PluginPre<CallState>,
    stats: LoadStats,
}

/// A loaded, validated plugin version, ready to run calls. Cheap to clone; calls on clones
/// run concurrently, each in its own instance.
#[derive(Clone)]
pub struct Plugin {
    inner: Arc<PluginInner>,
}

impl Plugin {
    /// What the plugin declared.
    pub fn info(&self) -> &PluginInfo {
        &self.inner.info
    }

    /// The sha256 of its component bytes.
    pub fn digest(&self) -> Digest {
        self.inner.digest
    }

    /// What it may do.
    pub fn grants(&self) -> &Grants {
        &self.inner.shared.grants
    }

    /// Its per-call limits.
    pub fn limits(&self) -> &Limits {
        &self.inner.shared.limits
    }

    /// This version under other options (policy, settings, limits), without compiling it or
    /// calling `describe` again: how the host applies the settings it finds under the name
    /// `describe` returned.
    ///
    /// # Errors
    /// The [`LoadError`]s of [`Runtime::load`] that depend on the options: settings that are
    /// not an object, limits beyond the runtime's, permissions the policy refuses.
    pub fn with_options(&self, options: LoadOptions) -> Result<Plugin, LoadError> {
        loader::with_options(self, options)
    }

    /// How loading went: size, compile or cache-load time.
    pub fn load_stats(&self) -> &LoadStats {
        &self.inner.stats
    }

    /// Runs `reconcile` for one object in a fresh instance. Waits for a free instance slot
    /// first when `concurrency` calls are already running (the wait does not count against
    /// the call's deadline).
    ///
    /// # Cancellation
    /// Dropping the future drops the instance; writes the plugin already made stay made.
    pub async fn reconcile(&self, cluster: Arc<dyn Cluster>, request: Request) -> Outcome {
        self.reconcile_measured(cluster, request).await.0
    }

    /// [`Plugin::reconcile`], also telling what the call used of its budgets.
    pub async fn reconcile_measured(
        &self,
        cluster: Arc<dyn Cluster>,
        request: Request,
    ) -> (Outcome, Usage) {
        dispatch::call(&self.inner, cluster, request, dispatch::Entry::Reconcile).await
    }

    /// Runs `cleanup` (for an object with the plugin's finalizer that is being deleted).
    pub async fn cleanup(&self, cluster: Arc<dyn Cluster>, request: Request) -> Outcome {
        self.cleanup_measured(cluster, request).await.0
    }

    /// [`Plugin::cleanup`], also telling what the call used of its budgets.
    pub async fn cleanup_measured(
        &self,
        cluster: Arc<dyn Cluster>,
        request: Request,
    ) -> (Outcome, Usage) {
        dispatch::call(&self.inner, cluster, request, dispatch::Entry::Cleanup).await
    }
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("name", &self.inner.info.name)
            .field("digest", &self.inner.digest)
            .finish_non_exhaustive()
    }
}
