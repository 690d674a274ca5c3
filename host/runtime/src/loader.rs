//! Loading a plugin version: check the bytes are a component of a compatible
//! `wasmop:plugin` world, compile it (or take the cached artefact), call `describe` once,
//! derive its grants, and keep an `InstancePre` for fast per-call instantiation. With tiered
//! loading, a version without an artefact is compiled by Winch and its Cranelift compilation
//! starts in the background ([`super::tiered`]).

mod contract;
mod dev;
pub(crate) mod image;

pub use self::contract::ContractVersion;
pub(crate) use self::contract::{WIT_0_1, WIT_0_2};
use self::contract::{check_framing, check_world};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::Engine;
use wasmtime::component::Component;

use super::admission::AdmissionInfo;
use super::call::PluginShared;
use super::contract::PluginPre;
use super::describe::{Declaration, DeclarationError, describe};
use super::outcome::Outcome;
use super::tiered::{Code, CodeCell, promote_later};
use super::wasi::WasiPool;
use super::{Compiler, LoadOptions, PluginInner, Runtime};
use wasmop_core::plugin::{ComponentBytes, Digest};
use wasmop_core::policy::{Grants, PolicyError};

/// Why a plugin cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are a zstd frame that does not decompress to a component.
    #[error(transparent)]
    Unpack(#[from] super::packed::UnpackError),
    /// The bytes are not WebAssembly.
    #[error("not a WebAssembly file: it does not start with the `\\0asm` magic number")]
    NotWasm,
    /// The bytes end inside a section.
    #[error(
        "truncated WebAssembly file: a section at byte {offset} needs {needed} bytes but the file has {len}"
    )]
    Truncated {
        /// Where the cut section starts.
        offset: usize,
        /// The bytes the section needs.
        needed: usize,
        /// The file's length.
        len: usize,
    },
    /// A core module instead of a component.
    #[error(
        "a core WebAssembly module, not a component: build the plugin for `wasm32-wasip2` or \
         with `cargo component build`"
    )]
    CoreModule,
    /// An unknown binary version or layer.
    #[error("unsupported WebAssembly binary version {0:#010x}")]
    UnknownBinaryVersion(u32),
    /// Compilation failed (invalid wasm inside a well-framed file).
    #[error("invalid WebAssembly component")]
    Compile(#[source] wasmtime::Error),
    /// A component of another world.
    #[error(
        "not a wasmop plugin: the component exports neither `wasmop:plugin/reconciler` nor \
         `wasmop:plugin/admission` (it exports: {exports})"
    )]
    OtherWorld {
        /// What it exports, comma-separated.
        exports: String,
    },
    /// Built against an incompatible version of the contract.
    #[error(
        "built against wasmop:plugin@{found} (`{item}`), but this host implements \
         {supported}; rebuild the plugin against a compatible SDK"
    )]
    IncompatibleVersion {
        /// The version the component uses.
        found: String,
        /// The versions this host implements (`wasmop:plugin@0.2.0 and wasmop:plugin@0.1.0`).
        supported: String,
        /// The import or export that named it.
        item: String,
    },
    /// Built against two versions of the contract at once.
    #[error(
        "the component names two versions of wasmop:plugin (`{first}` and `{second}`); \
         a plugin is built against one: rebuild it with one SDK"
    )]
    MixedVersions {
        /// The first item naming one version.
        first: String,
        /// An item naming another.
        second: String,
    },
    /// Required exports are missing or have the wrong types.
    #[error("the component's `wasmop:plugin` reconciler or admission export is incomplete")]
    MissingExports(#[source] wasmtime::Error),
    /// Imports the host does not provide.
    #[error("the component imports what wasmop does not provide: {imports}")]
    UnsatisfiableImports {
        /// The imports, comma-separated.
        imports: String,
    },
    /// Imports exist but do not type-check against the host's.
    #[error("the component's imports do not match what wasmop provides")]
    ImportMismatch(#[source] wasmtime::Error),
    /// `describe` did not return normally.
    #[error("`describe` failed: {0}")]
    Describe(Outcome),
    /// The declaration is invalid.
    #[error("the plugin's declaration is invalid")]
    Declaration(#[from] DeclarationError),
    /// The policy refuses the plugin.
    #[error("the policy refuses the plugin")]
    Policy(#[from] PolicyError),
    /// The plugin's settings are not a JSON object.
    #[error("the plugin's settings must be a JSON object, not {0}")]
    SettingsNotAnObject(&'static str),
    /// The plugin's limits do not fit the runtime.
    #[error("the plugin's limits do not fit the runtime: {0}")]
    Limits(String),
    /// A `wasmop dev` build carries more sources than a dev build may.
    #[error(
        "the `wasmop dev` build carries {size} bytes of sources, over the {max} a dev build may \
         carry; keep data out of the project's modules"
    )]
    DevSources {
        /// The size of the sources.
        size: usize,
        /// The bound ([`dev::MAX_SOURCES`]).
        max: usize,
    },
    /// Compilation ran on a blocking thread that panicked or was cancelled.
    #[error("the compilation task failed")]
    Task(#[source] tokio::task::JoinError),
    /// No artefact of the component was found, and it is bigger than the runtime compiles
    /// ([`super::RuntimeConfig::max_compile_bytes`]).
    #[error(
        "the component is {size} bytes and has no artefact here, and this host compiles \
         components of at most {} (`maxCompileBytes`): compiling takes many times a \
         component's size in memory. Compile it ahead with `wasmop compile --config <this \
         host's config file> --out DIR` and put DIR's files into the host's \
         `precompiledDirectory`",
        super::outcome::mib(*limit)
    )]
    TooBigToCompile {
        /// The component's size in bytes.
        size: usize,
        /// The bound, in bytes.
        limit: u64,
    },
}

/// How loading went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadStats {
    /// The component's size in bytes.
    pub size: usize,
    /// Time to compile (and, with an artefact cache, to store the artefact and map it back),
    /// or to load the cached artefact.
    pub compile_time: Duration,
    /// Whether the artefact was loaded rather than compiled here (from the cache, or from
    /// the precompiled directory).
    pub from_cache: bool,
    /// Whether it came from the precompiled directory (`wasmop compile`).
    pub precompiled: bool,
    /// The compiler whose code it was loaded with: Winch for a tiered load without an
    /// artefact (Cranelift's code replaces it later: [`super::Plugin::compiler`] tells which
    /// runs now), otherwise the runtime's compiler.
    pub compiler: Compiler,
    /// Whether the code runs from a mapped artefact file (the cache's or the precompiled
    /// directory's, including one this load just compiled and stored) rather than from
    /// anonymous memory: its pages are the page cache's, shared, and dropped when idle.
    pub mapped: bool,
}

fn compile(
    runtime: &Runtime,
    bytes: &[u8],
    digest: &Digest,
) -> Result<(Component, LoadStats), LoadError> {
    let inner = &runtime.inner;
    let started = Instant::now();
    if let Some(cache) = &inner.cache
        && let Some(component) = cache.load(&inner.engine, digest)
    {
        let stats = LoadStats {
            size: bytes.len(),
            compile_time: started.elapsed(),
            from_cache: true,
            precompiled: false,
            compiler: inner.config.compiler,
            mapped: cache.maps(),
        };
        return Ok((component, stats));
    }
    if let Some(dir) = &inner.config.precompiled_dir
        && let Some(component) = super::precompiled::load(
            dir,
            &inner.engine,
            digest,
            super::precompiled::ArtefactMode::of(&inner.mode),
            inner.config.maps_artefacts(),
        )
    {
        let stats = LoadStats {
            size: bytes.len(),
            compile_time: started.elapsed(),
            from_cache: true,
            precompiled: true,
            compiler: inner.config.compiler,
            mapped: inner.config.maps_artefacts(),
        };
        return Ok((component, stats));
    }
    // No artefact: compiled here, if the runtime compiles components this big.
    if let Some(limit) = inner.config.max_compile_bytes
        && bytes.len() as u64 > limit
    {
        return Err(LoadError::TooBigToCompile {
            size: bytes.len(),
            limit,
        });
    }
    // Tiered: Winch now, and no artefact (artefacts are Cranelift's; the background
    // compilation writes it). What Winch cannot compile (an instruction it does not
    // implement, or bytes that are not valid at all) goes to Cranelift, whose verdict counts:
    // a version Cranelift accepts is never refused because of Winch.
    if let Some(baseline) = inner.tiering.baseline(&inner.config) {
        let winch = |component| {
            let stats = LoadStats {
                size: bytes.len(),
                compile_time: started.elapsed(),
                from_cache: false,
                precompiled: false,
                compiler: Compiler::Winch,
                mapped: false,
            };
            Ok((component, stats))
        };
        if let Some(component) = inner.tiering.recent_baseline(digest) {
            return winch(component);
        }
        match inner
            .compile_gate
            .compile(&baseline.engine, || runtime.scratch_baseline(), bytes)
            .and_then(|compiled| compiled.load(&baseline.engine))
        {
            Ok(component) => return winch(component),
            Err(error) => {
                tracing::debug!(digest = %digest.short(), error = %format!("{error:#}"), "Winch cannot compile this version; compiling it with Cranelift");
            }
        }
    }
    let (component, mapped) =
        compile_and_store(runtime, digest, bytes).map_err(LoadError::Compile)?;
    let compile_time = started.elapsed();
    let stats = LoadStats {
        size: bytes.len(),
        compile_time,
        from_cache: false,
        precompiled: false,
        compiler: inner.config.compiler,
        mapped,
    };
    Ok((component, stats))
}

/// Compiles `bytes` with the main engine (Cranelift), big components one at a time and apart
/// ([`super::heap`]), and, when the runtime has an artefact cache, stores the artefact and
/// returns the component mapped from it (`true`; see `ArtefactCache::store_and_map`). Used
/// by loads and by the background tier-up alike.
pub(crate) fn compile_and_store(
    runtime: &Runtime,
    digest: &Digest,
    bytes: &[u8],
) -> wasmtime::Result<(Component, bool)> {
    let inner = &runtime.inner;
    let compiled = inner
        .compile_gate
        .compile(&inner.engine, || runtime.scratch_engine(), bytes)?;
    match &inner.cache {
        Some(cache) => cache.store_and_map(&inner.engine, digest, compiled),
        None => Ok((compiled.load(&inner.engine)?, false)),
    }
}

/// Starts compiling `bytes` ahead of its load (see [`super::ahead`]), when they frame a whole
/// component.
pub(crate) fn compile_ahead(runtime: &Runtime, component: ComponentBytes) {
    // Not a compressed one: its digest (the work's key) is known only once it is decompressed,
    // which is the load's to do, off this (the registry's) task.
    if check_framing(component.bytes()).is_err() {
        return;
    }
    // A dev build compiles its runner, without the sources.
    let component = if runtime.inner.config.dev_sources {
        match dev::split(component) {
            Ok((runner, _)) => runner,
            Err(_) => return,
        }
    } else {
        component
    };
    let digest = component.digest();
    let bytes = component.into_bytes();
    let rt = runtime.clone();
    runtime
        .inner
        .ahead
        .start(digest, move || compile(&rt, &bytes, &digest));
}

pub(crate) async fn load(
    runtime: &Runtime,
    component: ComponentBytes,
    options: LoadOptions,
) -> Result<super::Plugin, LoadError> {
    // Whatever this load frees is returned once no other load is under way (`heap::Loads`).
    let _loading = runtime.inner.loads.enter();
    // A compressed component is decompressed first (bounded: see `packed`), on a blocking
    // thread: a Go plugin's takes milliseconds, but a frame made to expand to the bound takes
    // longer than an async thread may be held.
    let component = if super::packed::is_compressed(component.bytes()) {
        tokio::task::spawn_blocking(move || super::packed::unpack(component))
            .await
            .map_err(LoadError::Task)??
    } else {
        component
    };
    check_framing(component.bytes())?;
    let limits = check_options(runtime, &options)?;
    // The version is the whole component; a dev build compiles (and caches) its runner alone.
    let version = component.digest();
    let (component, dev_sources) = if runtime.inner.config.dev_sources {
        dev::split(component)?
    } else {
        (component, None)
    };
    let digest = component.digest();
    // Kept for the background Cranelift compilation of a tiered load.
    let bytes = Arc::new(component.into_bytes());
    // Compilation is CPU-heavy and the cache does file I/O: keep both off the async threads,
    // and only as many at once as there are CPUs. The permit ends before `describe`.
    let Ok(compiling) = runtime.inner.compiling.acquire().await else {
        unreachable!("the compile semaphore is never closed");
    };
    let task = match runtime.inner.ahead.take(&digest) {
        Some(started) => started,
        None => {
            let rt = runtime.clone();
            let bytes = Arc::clone(&bytes);
            tokio::task::spawn_blocking(move || compile(&rt, &bytes, &digest))
        }
    };
    let (component, stats) = task.await.map_err(LoadError::Task)??;
    drop(compiling);
    let inner = &runtime.inner;
    // The main engine's code, or the Winch engine's (a tiered load without an artefact).
    let baseline = !Engine::same(component.engine(), &inner.engine);
    let (engine, linker) = if baseline {
        let Some(b) = inner.tiering.baseline(&inner.config) else {
            unreachable!("Winch code comes from the Winch engine, which was built for it");
        };
        (&b.engine, &b.linker)
    } else {
        (&inner.engine, &inner.linker)
    };
    let contract = check_world(engine, &component)?;
    let instance_pre = linker
        .instantiate_pre(&component)
        .map_err(LoadError::ImportMismatch)?;
    let pre = PluginPre::new(contract, instance_pre).map_err(LoadError::MissingExports)?;
    let declared = describe(runtime, engine, &pre, &limits, dev_sources.clone()).await?;
    if stats.mapped {
        // Mapped from an artefact file: what loading and `describe` touched need not stay
        // resident (see `image`).
        image::release(&component);
    }
    let grants = Grants::new(
        super::declared(
            &declared.name,
            declared.reconciler.as_ref(),
            declared.admission.as_ref(),
        ),
        &options.policy,
    )?;
    let code = CodeCell::new(Code {
        engine: engine.clone(),
        pre,
        compiler: stats.compiler,
    });
    if baseline {
        promote_later(
            runtime,
            bytes,
            digest,
            &component,
            declared.name.clone(),
            &code,
            contract,
            stats.compile_time,
        );
    }
    tracing::info!(plugin = %declared.name, version = %declared.version, digest = %version.short(), from_cache = stats.from_cache, precompiled = stats.precompiled, compile_ms = stats.compile_time.as_millis() as u64, compiler = ?stats.compiler, reconciles = declared.reconciler.is_some(), reviews = declared.admission.is_some(), "plugin loaded");
    Ok(super::Plugin {
        inner: std::sync::Arc::new(plugin_inner(
            runtime,
            PluginShared {
                plugin: declared.name.clone(),
                grants,
                config_json: options.config.to_string(),
                limits,
                dev_sources,
            },
            Declaration {
                name: declared.name,
                version: declared.version,
                reconciler: declared.reconciler,
                admission: declared.admission.map(Arc::new),
            },
            version,
            code,
            stats,
        )),
    })
}

/// The same plugin version under other options: no compilation and no `describe`, only the
/// checks and grants that depend on the options. The host needs this because a plugin's
/// settings are keyed by the name that only `describe` tells.
pub(crate) fn with_options(
    plugin: &super::Plugin,
    options: LoadOptions,
) -> Result<super::Plugin, LoadError> {
    let inner = &plugin.inner;
    let runtime = Runtime {
        inner: inner.runtime.clone(),
    };
    let limits = check_options(&runtime, &options)?;
    let grants = Grants::new(plugin.declared(), &options.policy)?;
    Ok(super::Plugin {
        inner: std::sync::Arc::new(plugin_inner(
            &runtime,
            PluginShared {
                plugin: inner.name.clone(),
                grants,
                config_json: options.config.to_string(),
                limits,
                dev_sources: inner.shared.dev_sources.clone(),
            },
            Declaration {
                name: inner.name.clone(),
                version: inner.version.clone(),
                reconciler: inner.reconciler.clone(),
                admission: inner.admission.clone(),
            },
            inner.digest,
            Arc::clone(&inner.code),
            inner.stats.clone(),
        )),
    })
}

/// A plugin version ready for calls: what its calls share, and an empty pool of WASI
/// contexts for them.
fn plugin_inner(
    runtime: &Runtime,
    shared: PluginShared,
    declared: Declaration<Arc<AdmissionInfo>>,
    digest: Digest,
    code: Arc<CodeCell>,
    stats: LoadStats,
) -> PluginInner {
    let config = &runtime.inner.config;
    let wasi = WasiPool::new(
        shared.limits.output_bytes,
        config.fixed_clock,
        shared.dev_sources.clone(),
        config.concurrency as usize,
    );
    PluginInner {
        runtime: runtime.inner.clone(),
        shared: std::sync::Arc::new(shared),
        name: declared.name,
        version: declared.version,
        reconciler: declared.reconciler,
        admission: declared.admission,
        digest,
        wasi,
        code,
        stats,
        computes_long: std::sync::atomic::AtomicBool::new(false),
    }
}

/// Checks the options that do not depend on the component, and resolves its limits.
fn check_options(runtime: &Runtime, options: &LoadOptions) -> Result<super::Limits, LoadError> {
    let kind = match &options.config {
        serde_json::Value::Object(_) => None,
        serde_json::Value::Null => Some("null"),
        serde_json::Value::Bool(_) => Some("a boolean"),
        serde_json::Value::Number(_) => Some("a number"),
        serde_json::Value::String(_) => Some("a string"),
        serde_json::Value::Array(_) => Some("an array"),
    };
    if let Some(kind) = kind {
        return Err(LoadError::SettingsNotAnObject(kind));
    }
    let limits = options
        .limits
        .clone()
        .unwrap_or_else(|| runtime.inner.config.limits.clone());
    if limits.memory > runtime.inner.config.limits.memory {
        return Err(LoadError::Limits(format!(
            "a memory limit of {} bytes exceeds the runtime's {} bytes",
            limits.memory, runtime.inner.config.limits.memory
        )));
    }
    if limits.fuel.is_some() && !runtime.inner.config.fuel_enabled() {
        return Err(LoadError::Limits(
            "a fuel budget needs a runtime configured with fuel".into(),
        ));
    }
    Ok(limits)
}
