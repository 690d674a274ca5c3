//! The plugin runtime: everything wasmtime. One [`Runtime`] holds the engine, the linker and
//! the artefact cache (and, for tiered loading, a Winch engine); [`Runtime::load`] turns
//! component bytes into a [`Plugin`], whose [`Plugin::call`] runs one [`Call`] in a fresh,
//! limited instance and reports its [`Outcome`].
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
mod lane;
mod loader;
mod outcome;
pub mod precompiled;
mod request;
mod settings;
mod tiered;
mod wasi;

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use wasmtime::Engine;
use wasmtime::component::Linker;

pub use self::cache::CacheError;
use self::call::CallState;
pub use self::describe::{
    DeclarationError, MAX_OWNS, MAX_PERMISSION_NAMESPACES, MAX_PERMISSIONS, MAX_VERBS,
    MAX_VERSION_LEN, MAX_WATCHES,
};
pub use self::engine::{AllocatorMode, EngineError};
pub use self::loader::{LoadError, LoadStats};
pub use self::outcome::{Action, Budget, Denials, LimitKind, Outcome, PluginErrorKind, Usage};
pub use self::request::{Call, CallReport, Entry, Request, RequestObject};
pub use self::settings::{
    AllocatorChoice, Compiler, DEFAULT_DESCRIBE_DEADLINE, Limits, RuntimeConfig,
};
pub use self::tiered::TieringStats;
use wasmop_core::cluster::Cluster;
use wasmop_core::plugin::{ComponentBytes, Digest, PluginInfo};
use wasmop_core::policy::{Grants, Policy};

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
    /// `describe` calls that may run at once: half the instance slots (at least one), so
    /// that plugins arriving together, looping or not, leave reconciles the other half.
    describing: tokio::sync::Semaphore,
    /// Loads that compile (or map an artefact) at once: one per CPU keeps every core busy
    /// while bounding the memory of cold compilations. `describe` runs outside it.
    compiling: tokio::sync::Semaphore,
    linker: Linker<CallState>,
    mode: AllocatorMode,
    cache: Option<cache::ArtefactCache>,
    /// Compilations started by [`Runtime::compile_ahead`].
    ahead: ahead::Ahead,
    /// The Winch engine and the background compilations of tiered loading.
    tiering: tiered::Tiering,
    config: RuntimeConfig,
    ticker: engine::EpochTicker,
    /// Where long-running calls are demoted to (when `config.demote_after` is set).
    lane: lane::Lane,
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
        let tiering = tiered::Tiering::new(&config);
        let ticker =
            engine::EpochTicker::start(engine.clone(), tiering.ticked_engine(), config.epoch_tick)
                .map_err(RuntimeError::Ticker)?;
        Ok(Self {
            inner: Arc::new(RuntimeInner {
                engine,
                slots: Arc::new(tokio::sync::Semaphore::new(config.concurrency as usize)),
                describing: tokio::sync::Semaphore::new((config.concurrency as usize / 2).max(1)),
                compiling: tokio::sync::Semaphore::new(
                    std::thread::available_parallelism().map_or(1, usize::from),
                ),
                linker,
                mode,
                cache,
                ahead: ahead::Ahead::default(),
                tiering,
                config,
                ticker,
                lane: lane::Lane::new(),
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
    ///
    /// The bytes come with their digest when the caller has hashed them already
    /// ([`ComponentBytes`]), or as a `Vec<u8>` that is hashed here.
    pub async fn load(
        &self,
        bytes: impl Into<ComponentBytes>,
        options: LoadOptions,
    ) -> Result<Plugin, LoadError> {
        loader::load(self, bytes.into(), options).await
    }

    /// Starts compiling `bytes` (or loading its artefact) in the background, so that a
    /// [`load`](Self::load) of the same bytes soon after finds the work done or under way. For
    /// a source that sees a new version before it has settled; bytes that are not a whole
    /// component are ignored (the load reports them). Must be called within a tokio runtime.
    pub fn compile_ahead(&self, bytes: impl Into<ComponentBytes>) {
        loader::compile_ahead(self, bytes.into());
    }

    /// Forgets compilations started ahead that no load took: call it once a source's settled
    /// content has been loaded.
    pub fn discard_ahead(&self) {
        self.inner.ahead.clear();
    }

    /// How many compilations started ahead are kept. A test hook (feature `test-hooks`).
    #[cfg(feature = "test-hooks")]
    pub fn compiling_ahead(&self) -> usize {
        self.inner.ahead.len()
    }

    /// How tiered loading's background compilations went (all zero when it is off).
    pub fn tiering(&self) -> TieringStats {
        self.inner.tiering.stats()
    }

    /// Demoted calls still running on the low-priority lane (see
    /// [`RuntimeConfig::demote_after`]); a cancelled call's task leaves it at the guest's next
    /// epoch yield. A test hook (feature `test-hooks`).
    #[cfg(feature = "test-hooks")]
    pub fn demoted_running(&self) -> usize {
        self.inner.lane.running()
    }

    /// Waits until no background Cranelift compilation of tiered loading is under way. A
    /// test hook (feature `test-hooks`).
    #[cfg(feature = "test-hooks")]
    pub async fn tiering_settled(&self) {
        self.inner.tiering.settled().await;
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
    /// The code calls run: Winch's until tiered loading replaces it with Cranelift's.
    code: Arc<tiered::CodeCell>,
    stats: LoadStats,
    /// Whether this version's last finished call computed for the runtime's `demoteAfter`:
    /// its next calls then start on the low-priority lane, until one of them finishes
    /// sooner.
    computes_long: std::sync::atomic::AtomicBool,
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

    /// Which compiler made the code the next call runs: Winch for a version loaded tiered
    /// until its Cranelift code has replaced it, Cranelift otherwise.
    pub fn compiler(&self) -> Compiler {
        self.inner.code.current().compiler
    }

    /// Whether this version's next call starts on the low-priority lane: its last finished
    /// call computed for the runtime's `demoteAfter`. Cleared by a call that finishes sooner.
    pub fn starts_demoted(&self) -> bool {
        self.inner
            .computes_long
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Runs one call (`reconcile` or `cleanup`, see [`Call`]) in a fresh instance under the
    /// version's limits, and reports how it ended and what it used. Waits for a free
    /// instance slot first when `concurrency` calls are already running (the wait does not
    /// count against the call's deadline).
    ///
    /// Never fails: whatever the guest does, the call ends in exactly one [`Outcome`].
    ///
    /// # Cancellation
    /// Dropping the future drops the instance; writes the plugin already made stay made.
    pub async fn call(&self, cluster: Arc<dyn Cluster>, call: Call) -> CallReport {
        dispatch::call(&self.inner, cluster, call).await
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
