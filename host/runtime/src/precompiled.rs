//! Artefacts compiled ahead of time, possibly on another machine and for another
//! architecture (`wasmop compile --target`), read from a directory the operator provides
//! (baked into an image, say), so that a host on a small board never compiles a plugin it was
//! shipped with.
//!
//! Layout: `<dir>/<digest>.<mode>.cwasm` plus `<digest>.<mode>.cwasm.crc32`, where `<digest>`
//! is the component's sha256 and `<mode>` the allocator the artefact was compiled for
//! (`pooling` or `on-demand`: their linear-memory settings change the generated code). A
//! directory holds the artefacts of one architecture. The host takes its own mode's file,
//! checks the checksum, and lets wasmtime check that the artefact fits its engine
//! (architecture, CPU features, every setting that changes code). A file that is missing,
//! corrupt, made for another engine or written by an older `wasmop compile` (a `.sha256`
//! checksum file) is skipped with a log line and the plugin is compiled as usual: a stale
//! artefact costs time, never correctness.
//!
//! All functions here block; callers run them on tokio's blocking pool.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use wasmtime::Engine;
use wasmtime::component::Component;

use super::RuntimeConfig;
use super::engine::{self, AllocatorMode};
use wasmop_core::plugin::Digest;

/// The allocator an artefact was compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArtefactMode {
    /// The pooling allocator (large reservations, no explicit bounds checks).
    Pooling,
    /// On-demand allocation (reservations the size of the memory limit).
    OnDemand,
}

impl ArtefactMode {
    /// Both modes: `wasmop compile` writes an artefact for each, since which one a host gets
    /// depends on its machine (the allocator probe).
    pub(crate) const ALL: [ArtefactMode; 2] = [ArtefactMode::Pooling, ArtefactMode::OnDemand];

    /// The mode of an engine built with `mode`.
    pub(crate) fn of(mode: &AllocatorMode) -> Self {
        match mode {
            AllocatorMode::Pooling { .. } => ArtefactMode::Pooling,
            AllocatorMode::OnDemand { .. } => ArtefactMode::OnDemand,
        }
    }

    /// Its name in file names.
    pub fn label(self) -> &'static str {
        match self {
            ArtefactMode::Pooling => "pooling",
            ArtefactMode::OnDemand => "on-demand",
        }
    }
}

/// Why an artefact could not be compiled or written.
#[derive(Debug, thiserror::Error)]
pub enum PrecompileError {
    /// No engine can be configured for the target.
    #[error("cannot configure a wasm engine for `{target}`")]
    Engine {
        /// The target triple.
        target: String,
        /// Why.
        #[source]
        source: wasmtime::Error,
    },
    /// The component does not compile.
    #[error("cannot compile the component for `{target}`")]
    Compile {
        /// The target triple.
        target: String,
        /// Why.
        #[source]
        source: wasmtime::Error,
    },
    /// The artefact cannot be written.
    #[error("cannot write {}", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// One artefact written by [`compile`].
#[derive(Debug, Clone)]
pub struct Written {
    /// The file.
    pub path: PathBuf,
    /// The allocator it is for.
    pub mode: ArtefactMode,
    /// Its size in bytes.
    pub size: usize,
    /// How long compiling took.
    pub compile_time: Duration,
}

fn path(dir: &Path, digest: &Digest, mode: ArtefactMode) -> PathBuf {
    dir.join(format!("{digest}.{}.cwasm", mode.label()))
}

/// Compiles `bytes` for `target` (a triple such as `aarch64-unknown-linux-musl`; `None`: this
/// machine) with the engine settings of a host configured like `config`, once per allocator
/// mode, and writes the artefacts into `out`. For a named target they use its baseline CPU
/// features, so they load on any machine of that architecture.
pub fn compile(
    config: &RuntimeConfig,
    target: Option<&str>,
    bytes: &[u8],
    digest: &Digest,
    out: &Path,
) -> Result<Vec<Written>, PrecompileError> {
    let mut written = Vec::new();
    for mode in ArtefactMode::ALL {
        let engine =
            engine::for_target(config, mode, target).map_err(|source| PrecompileError::Engine {
                target: target.unwrap_or("this machine").to_owned(),
                source,
            })?;
        let started = Instant::now();
        let artefact =
            engine
                .precompile_component(bytes)
                .map_err(|source| PrecompileError::Compile {
                    target: target.unwrap_or("this machine").to_owned(),
                    source,
                })?;
        let compile_time = started.elapsed();
        let file = path(out, digest, mode);
        super::cache::write_with_checksum(out, &file, &artefact)
            .map_err(|(path, source)| PrecompileError::Write { path, source })?;
        written.push(Written {
            path: file,
            mode,
            size: artefact.len(),
            compile_time,
        });
    }
    Ok(written)
}

/// The precompiled artefact of `digest` in `dir` for `engine` (built in `mode`), if there is
/// one that fits.
pub(crate) fn load(
    dir: &Path,
    engine: &Engine,
    digest: &Digest,
    mode: ArtefactMode,
    map: bool,
) -> Option<Component> {
    let artefact = path(dir, digest, mode);
    match super::cache::read_verified(engine, &artefact, map) {
        Ok(found) => found,
        Err(unusable) => {
            let reason = wasmop_core::chain(&unusable);
            tracing::warn!(path = %artefact.display(), %reason, "precompiled artefact not used (run `wasmop compile` again to replace it); compiling the plugin");
            None
        }
    }
}
