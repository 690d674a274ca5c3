//! Artefacts compiled ahead of time, possibly on another machine and for another
//! architecture (`wasmop compile --target`), read from a directory the operator provides
//! (baked into an image, say), so that a host on a small board never compiles a plugin it was
//! shipped with.
//!
//! Layout: `<dir>/<digest>.<mode>.cwasm` plus `<digest>.<mode>.cwasm.sha256`, where `<digest>`
//! is the component's sha256 and `<mode>` the allocator the artefact was compiled for
//! (`pooling` or `on-demand`: their linear-memory settings change the generated code). A
//! directory holds the artefacts of one architecture. The host takes its own mode's file,
//! checks the checksum, and lets wasmtime check that the artefact fits its engine
//! (architecture, CPU features, every setting that changes code). A file that is missing,
//! corrupt or made for another engine is skipped with a log line and the plugin is compiled
//! as usual: a stale artefact costs time, never correctness.
//!
//! All functions here block; callers run them on tokio's blocking pool.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::RuntimeConfig;
use super::engine::{self, AllocatorMode};
use crate::plugin::Digest;

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
    pub const ALL: [ArtefactMode; 2] = [ArtefactMode::Pooling, ArtefactMode::OnDemand];

    /// The mode of an engine built with `mode`.
    pub fn of(mode: &AllocatorMode) -> Self {
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

fn paths(dir: &Path, digest: &Digest, mode: ArtefactMode) -> (PathBuf, PathBuf) {
    let artefact = dir.join(format!("{digest}.{}.cwasm", mode.label()));
    let checksum = dir.join(format!("{digest}.{}.cwasm.sha256", mode.label()));
    (artefact, checksum)
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
    let write = |path: &Path, source| PrecompileError::Write {
        path: path.to_owned(),
        source,
    };
    std::fs::create_dir_all(out).map_err(|e| write(out, e))?;
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
        let (file, checksum) = paths(out, digest, mode);
        let sum: String = Sha256::digest(&artefact)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let tmp = out.join(format!(
            ".{digest}.{}.tmp-{}",
            mode.label(),
            std::process::id()
        ));
        std::fs::write(&tmp, &artefact).map_err(|e| write(&tmp, e))?;
        std::fs::write(&checksum, sum).map_err(|e| write(&checksum, e))?;
        std::fs::rename(&tmp, &file).map_err(|e| write(&file, e))?;
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
pub fn load(dir: &Path, engine: &Engine, digest: &Digest, mode: ArtefactMode) -> Option<Component> {
    let (artefact, checksum) = paths(dir, digest, mode);
    let expected = match std::fs::read_to_string(&checksum) {
        Ok(s) => s.trim().to_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(path = %checksum.display(), error = %e, "cannot read the precompiled artefact's checksum; compiling the plugin");
            return None;
        }
    };
    match super::cache::file_sha256(&artefact) {
        Ok(actual) if actual == expected => {}
        Ok(_) => {
            tracing::warn!(path = %artefact.display(), "precompiled artefact is corrupt (checksum mismatch); compiling the plugin");
            return None;
        }
        Err(e) => {
            tracing::warn!(path = %artefact.display(), error = %e, "cannot read the precompiled artefact; compiling the plugin");
            return None;
        }
    }
    // SAFETY: `deserialize_file` maps the file and runs its code, so it must be an artefact
    // wasmtime produced. It is one that `wasmop compile` wrote with
    // `Engine::precompile_component`: the directory is the operator's `precompiledDirectory`,
    // trusted like the artefact cache (whoever can write there can run native code in the
    // host, as documented on `RuntimeConfig::precompiled_dir`), and the file's sha256 was just
    // checked against the checksum written with it, so a truncated or damaged file never gets
    // here. wasmtime also checks the header and that the artefact was compiled for this
    // architecture, these CPU features and these engine settings, and errs otherwise.
    #[allow(unsafe_code)]
    let loaded = unsafe { Component::deserialize_file(engine, &artefact) };
    match loaded {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::warn!(path = %artefact.display(), error = %format!("{e:#}"), "precompiled artefact does not fit this engine; compiling the plugin");
            None
        }
    }
}
