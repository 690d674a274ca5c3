//! Tiered loading: a version with no compiled artefact is compiled by Winch, the baseline
//! compiler (several times faster than Cranelift, for slower code), and serves at once;
//! Cranelift then compiles it in the background, writes the artefact cache, and replaces the
//! Winch code of that same version. The second tier is not a new version: the registry, its
//! metrics and Events never see it.
//!
//! # Guarantees
//! - A call runs on the code that was current when it started, start to end (each call holds
//!   its [`Code`]); the replacement only changes what the next calls get.
//! - The Cranelift code replaces the Winch code of the same [`CodeCell`], that is of the same
//!   digest loaded by the same load: it can never put one version in the place of another.
//! - A version nobody holds any more (replaced and not kept for rollback, or removed) is
//!   not compiled again, or its late result is dropped ([`TieringStats::discarded`]).
//! - One background compilation at a time: after a burst of new versions, the serving path
//!   competes with at most one Cranelift compilation (which, like every compilation of the
//!   main engine, may use several threads; its threads are not given a lower OS priority).
//! - The Winch engine has the main engine's settings (epoch interruption, fuel, limits,
//!   backtraces) with the on-demand allocator; it is built on the first tiered load only, and
//!   the epoch ticker ticks it too.
//!
//! # Cancellation
//! Compilation cannot be interrupted: a background compilation whose version is dropped runs
//! to its end and its result is discarded.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, PoisonError, RwLock, Weak};
use std::time::{Duration, Instant};

use wasmtime::Engine;
use wasmtime::component::{Component, Linker};

use super::call::CallState;
use super::contract::PluginPre;
use super::loader::ContractVersion;
use super::{Compiler, Runtime, RuntimeConfig};
use wasmop_core::plugin::{Digest, PluginName};

/// Whether Winch can compile for the machine the host runs on.
pub(crate) const WINCH_SUPPORTED: bool = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));

/// The code one call runs: an `InstancePre` and the engine it belongs to.
pub(crate) struct Code {
    /// The engine the code was compiled by (a store must come from it).
    pub engine: Engine,
    /// The pre-linked component.
    pub pre: PluginPre,
    /// Which compiler made it.
    pub compiler: Compiler,
}

/// The current code of one loaded version, shared by every [`super::Plugin`] made of that
/// load (`with_options` copies share it). Read once per call; written once, at the tier-up.
pub(crate) struct CodeCell {
    current: RwLock<Arc<Code>>,
}

impl CodeCell {
    /// A cell holding `code`.
    pub(crate) fn new(code: Code) -> Arc<Self> {
        Arc::new(Self {
            current: RwLock::new(Arc::new(code)),
        })
    }

    /// The code the next call runs. The lock is held only to clone the pointer.
    pub(crate) fn current(&self) -> Arc<Code> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn replace(&self, code: Code) {
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(code);
    }
}

/// The Winch engine and its linker.
pub(crate) struct Baseline {
    /// The engine (Winch, on-demand allocation, otherwise the main engine's settings).
    pub engine: Engine,
    /// The host's imports, linked for that engine.
    pub linker: Linker<CallState>,
}

/// How background compilations went, since the runtime started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TieringStats {
    /// Background compilations started and not yet ended.
    pub pending: u64,
    /// Versions whose Winch code was replaced by Cranelift code.
    pub promoted: u64,
    /// Versions dropped before their Cranelift code was ready: not compiled, or the result
    /// thrown away.
    pub discarded: u64,
    /// Background compilations that failed (the version stays on Winch code).
    pub failed: u64,
}

/// The tiering state of a runtime.
pub(crate) struct Tiering {
    /// Whether loads are tiered (asked for, and Winch supports this machine).
    enabled: bool,
    /// The Winch engine, once a tiered load needed it; `None` inside if it could not be
    /// built (logged once; loads then compile with Cranelift). Shared with the epoch ticker.
    baseline: Arc<OnceLock<Option<Baseline>>>,
    /// One background compilation at a time.
    turn: tokio::sync::Semaphore,
    pending: tokio::sync::watch::Sender<u64>,
    promoted: AtomicU64,
    discarded: AtomicU64,
    failed: AtomicU64,
    /// The Winch code of the last version whose Cranelift compilation is under way, for a
    /// load of the same bytes meanwhile (a `wasmop dev` edit reuses its runner's code): it
    /// takes that code instead of compiling it again. Kept by `promote_later`, forgotten when
    /// that compilation ends, so no Winch code outlives its use.
    recent: std::sync::Mutex<Option<(Digest, Component)>>,
}

impl Tiering {
    /// The tiering state for `config`; logs when tiering is asked for on a machine Winch does
    /// not support.
    pub(crate) fn new(config: &RuntimeConfig) -> Self {
        if config.tiered && !WINCH_SUPPORTED {
            tracing::info!(
                arch = std::env::consts::ARCH,
                "tiered compilation is off: Winch compiles for x86_64 and aarch64 only; plugins are compiled with Cranelift"
            );
        }
        Self {
            enabled: config.tiered && WINCH_SUPPORTED && config.compiler == Compiler::Cranelift,
            baseline: Arc::new(OnceLock::new()),
            turn: tokio::sync::Semaphore::new(1),
            pending: tokio::sync::watch::channel(0).0,
            promoted: AtomicU64::new(0),
            discarded: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            recent: std::sync::Mutex::new(None),
        }
    }

    /// The Winch code of `digest`, when it is the last one compiled and its Cranelift
    /// compilation has not ended.
    pub(crate) fn recent_baseline(&self, digest: &Digest) -> Option<Component> {
        let recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        recent
            .as_ref()
            .filter(|(d, _)| d == digest)
            .map(|(_, c)| c.clone())
    }

    /// Keeps `component`, the Winch code of `digest`, until its Cranelift compilation ends.
    fn remember_baseline(&self, digest: Digest, component: &Component) {
        *self.recent.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((digest, component.clone()));
    }

    /// Forgets the Winch code of `digest`, if it is the one kept.
    fn forget_baseline(&self, digest: &Digest) {
        let mut recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        if recent.as_ref().is_some_and(|(d, _)| d == digest) {
            *recent = None;
        }
    }

    /// The Winch engine for the epoch ticker, set once a tiered load has built it.
    pub(crate) fn ticked_engine(&self) -> Arc<OnceLock<Option<Baseline>>> {
        Arc::clone(&self.baseline)
    }

    /// The Winch engine, built on first use; `None` when loads are not tiered (or it could
    /// not be built).
    pub(crate) fn baseline(&self, config: &RuntimeConfig) -> Option<&Baseline> {
        if !self.enabled {
            return None;
        }
        self.baseline
            .get_or_init(|| {
                let built = super::engine::build_baseline(config).and_then(|engine| {
                    let linker = super::call::linker(&engine)
                        .map_err(super::engine::EngineError::linker)?;
                    Ok(Baseline { engine, linker })
                });
                match built {
                    Ok(baseline) => {
                        tracing::info!("Winch engine ready: new plugin versions run on Winch code until Cranelift has compiled them");
                        Some(baseline)
                    }
                    Err(e) => {
                        tracing::warn!(error = %wasmop_core::chain(&e), "cannot build the Winch engine; tiered compilation is off");
                        None
                    }
                }
            })
            .as_ref()
    }

    /// The counters.
    pub(crate) fn stats(&self) -> TieringStats {
        TieringStats {
            pending: *self.pending.borrow(),
            promoted: self.promoted.load(Ordering::Relaxed),
            discarded: self.discarded.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
        }
    }

    /// Waits until no background compilation is under way (for tests).
    #[cfg(feature = "test-hooks")]
    pub(crate) async fn settled(&self) {
        let mut pending = self.pending.subscribe();
        // The sender lives as long as `self`, so this cannot fail.
        let _ = pending.wait_for(|n| *n == 0).await;
    }
}

/// One background compilation, counted as pending from its start to the end of its task.
struct Pending(Runtime);

impl Pending {
    fn new(runtime: Runtime) -> Self {
        runtime.inner.tiering.pending.send_modify(|n| *n += 1);
        Self(runtime)
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.inner.tiering.pending.send_modify(|n| *n -= 1);
    }
}

/// Starts the background Cranelift compilation of a version loaded on Winch code (`winch`,
/// its `cell`), which replaces that code when done. Until then a load of the same bytes takes
/// `winch` instead of compiling them again. `winch_time` is what the Winch compilation took,
/// for the log line.
#[allow(clippy::too_many_arguments)] // one version's parts, each used once
pub(crate) fn promote_later(
    runtime: &Runtime,
    bytes: Arc<Vec<u8>>,
    digest: Digest,
    winch: &Component,
    plugin: PluginName,
    cell: &Arc<CodeCell>,
    contract: ContractVersion,
    winch_time: Duration,
) {
    runtime.inner.tiering.remember_baseline(digest, winch);
    // Counted from now, so that `settled` cannot miss a compilation about to start.
    let pending = Pending::new(runtime.clone());
    let cell = Arc::downgrade(cell);
    tokio::spawn(async move {
        promote(
            &pending.0, bytes, digest, &plugin, cell, contract, winch_time,
        )
        .await;
        pending.0.inner.tiering.forget_baseline(&digest);
        drop(pending);
    });
}

async fn promote(
    runtime: &Runtime,
    bytes: Arc<Vec<u8>>,
    digest: Digest,
    plugin: &PluginName,
    cell: Weak<CodeCell>,
    contract: ContractVersion,
    winch_time: Duration,
) {
    let tiering = &runtime.inner.tiering;
    // Never fails: the semaphore lives as long as the runtime and is never closed.
    let Ok(_turn) = tiering.turn.acquire().await else {
        unreachable!("the tiering semaphore is never closed");
    };
    if cell.strong_count() == 0 {
        tiering.discarded.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(%plugin, digest = %digest.short(), "version dropped before its Cranelift compilation started; not compiled");
        return;
    }
    let rt = runtime.clone();
    let compiled = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        // Another load of the same bytes may have compiled them while this one waited.
        let cached = rt.inner.cache.as_ref().and_then(|cache| {
            cache
                .load(&rt.inner.engine, &digest)
                .map(|c| (c, cache.maps()))
        });
        let (component, mapped) = match cached {
            Some(found) => found,
            None => super::loader::compile_and_store(&rt, &digest, bytes.as_slice())?,
        };
        let took = started.elapsed();
        let pre = PluginPre::new(contract, rt.inner.linker.instantiate_pre(&component)?)?;
        if mapped {
            super::loader::image::release(&component);
        }
        Ok::<_, wasmtime::Error>((pre, took))
    })
    .await;
    let (pre, cranelift_time) = match compiled {
        Ok(Ok(done)) => done,
        Ok(Err(error)) => {
            tiering.failed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%plugin, digest = %digest.short(), error = %format!("{error:#}"), "the background Cranelift compilation failed; the version keeps running on Winch code");
            return;
        }
        Err(error) => {
            tiering.failed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%plugin, digest = %digest.short(), error = %error, "the background Cranelift compilation task failed; the version keeps running on Winch code");
            return;
        }
    };
    let Some(cell) = cell.upgrade() else {
        tiering.discarded.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(%plugin, digest = %digest.short(), "version dropped while Cranelift compiled it; result discarded");
        return;
    };
    cell.replace(Code {
        engine: runtime.inner.engine.clone(),
        pre,
        compiler: Compiler::Cranelift,
    });
    tiering.promoted.fetch_add(1, Ordering::Relaxed);
    tracing::info!(
        %plugin,
        digest = %digest.short(),
        winch_ms = winch_time.as_millis() as u64,
        cranelift_ms = cranelift_time.as_millis() as u64,
        "plugin now runs on Cranelift code (it ran on Winch code since it was loaded)"
    );
}
