//! Precompiled artefacts on disk, so a restart skips compilation.
//!
//! Layout: `<dir>/<engine>/<digest>.cwasm` plus `<digest>.cwasm.crc32`, where `<engine>`
//! is a hash of wasmtime's compatibility hash (its version, target and every setting that
//! changes generated code) and `<digest>` the component's sha256. An artefact is written to a
//! temporary file and renamed into place, after its checksum file (its length and CRC-32).
//! Before loading, both are verified: a corrupt, truncated or mismatched entry is logged,
//! removed and rebuilt, never loaded. An entry written by an older wasmop (a `.sha256`
//! checksum file) is a miss like any other: it is removed and rebuilt.
//!
//! The checksum guards against damage (a full disk, a crash, a bad copy), not against
//! tampering: whoever can write the directory can run native code in the host anyway (see
//! [`read_verified`]). So it is a CRC-32 (crc32fast: several GB/s with the CPU's carry-less
//! multiply) rather than sha256, which took half the start-up time of a host with many cached
//! plugins.
//!
//! All functions here block; callers run them on tokio's blocking pool.

use std::ffi::OsString;
use std::hash::{Hash, Hasher};
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::heap::Compiled;
use wasmop_core::plugin::Digest;

/// Why an artefact could not be stored (loading never fails: a bad entry is a miss, see
/// [`Unusable`]).
#[derive(Debug, thiserror::Error)]
pub(crate) enum CacheError {
    /// The component could not be serialized.
    #[error("cannot serialize the compiled component")]
    Serialize(#[source] wasmtime::Error),
    /// The cache directory or file could not be written.
    #[error("cannot write the artefact cache entry {path}")]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Feeds `Hash` output into sha256, so the engine's hash is stable across runs and Rust
/// versions (unlike `DefaultHasher`).
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// A directory of artefacts for one engine configuration.
#[derive(Debug, Clone)]
pub(crate) struct ArtefactCache {
    dir: PathBuf,
    /// Whether artefacts are mapped (the default) or read into memory (see [`Self::map`]).
    map: bool,
}

impl ArtefactCache {
    /// The cache under `root` for `engine`.
    pub(crate) fn new(root: &Path, engine: &Engine) -> Self {
        let mut h = Sha256Hasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut h);
        let engine_hash = h.0.finalize();
        let name: String = engine_hash[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Self {
            dir: root.join(name),
            map: true,
        }
    }

    /// Whether loaded artefacts are mapped from their files (`true`, the default: their code
    /// lives in the shared page cache) or read into anonymous memory (`false`, with the perf
    /// map: `perf` resolves code through `/tmp/perf-<pid>.map` only in anonymous mappings,
    /// and names a file-backed mapping's samples by file offset).
    pub(crate) fn map(mut self, map: bool) -> Self {
        self.map = map;
        self
    }

    /// Whether loaded artefacts are mapped from their files.
    pub(crate) fn maps(&self) -> bool {
        self.map
    }

    fn path(&self, digest: &Digest) -> PathBuf {
        self.dir.join(format!("{digest}.cwasm"))
    }

    /// The cached artefact for `digest`, if there is a sound one. A bad entry is logged,
    /// removed and reported as a miss.
    pub(crate) fn load(&self, engine: &Engine, digest: &Digest) -> Option<Component> {
        let artefact = self.path(digest);
        match read_verified(engine, &artefact, self.map) {
            Ok(found) => found,
            Err(unusable) => {
                let old = matches!(unusable, Unusable::OldFormat);
                let reason = wasmop_core::chain(&unusable);
                if old {
                    tracing::info!(path = %artefact.display(), %reason, "cached artefact not used; recompiling");
                } else {
                    tracing::warn!(path = %artefact.display(), %reason, "cached artefact not used; discarding and recompiling");
                }
                self.discard(&artefact);
                None
            }
        }
    }

    /// Stores the artefact of `compiled`.
    pub(crate) fn store(&self, digest: &Digest, compiled: &Compiled) -> Result<(), CacheError> {
        let bytes = compiled.artefact().map_err(CacheError::Serialize)?;
        write_with_checksum(&self.dir, &self.path(digest), &bytes)
            .map_err(|(path, source)| CacheError::Write { path, source })
    }

    /// Stores the artefact of `compiled`, just compiled, and returns the component mapped
    /// from the stored file, with `true`: its code and memory images then live in the page
    /// cache, shared by every instance and droppable when idle
    /// ([`super::loader::image::release`]), rather than in the anonymous memory compiling
    /// left them in (an 18.7 MB CPython component: a 35 MB artefact). When the artefact
    /// cannot be written or read back, the reason is logged and `compiled` is loaded from
    /// memory, with `false`: the plugin still runs. The error is `compiled`'s own: it does
    /// not fit `engine`.
    pub(crate) fn store_and_map(
        &self,
        engine: &Engine,
        digest: &Digest,
        compiled: Compiled,
    ) -> wasmtime::Result<(Component, bool)> {
        if let Err(e) = self.store(digest, &compiled) {
            tracing::warn!(error = %wasmop_core::chain(&e), "cannot cache the compiled plugin; it will be compiled again next time");
            return Ok((compiled.load(engine)?, false));
        }
        if !self.map {
            return Ok((compiled.load(engine)?, false));
        }
        match self.load(engine, digest) {
            Some(mapped) => Ok((mapped, true)),
            // `load` logged why (and removed the entry).
            None => Ok((compiled.load(engine)?, false)),
        }
    }

    fn discard(&self, artefact: &Path) {
        let paths = [
            artefact.to_owned(),
            checksum_path(artefact),
            old_checksum_path(artefact),
        ];
        for path in paths {
            if let Err(e) = std::fs::remove_file(&path)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(path = %path.display(), error = %e, "cannot remove bad cache entry");
            }
        }
    }
}

/// Why an artefact on disk is not used (the caller compiles instead: never an error).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unusable {
    /// Only a sha256 checksum file, as older wasmop versions wrote.
    #[error("it was written by an older wasmop (a sha256 checksum file, not a CRC-32 one)")]
    OldFormat,
    /// The checksum file cannot be read.
    #[error("cannot read its checksum file")]
    ReadChecksum(#[source] std::io::Error),
    /// The checksum file does not hold `crc32 <hex> <length>`.
    #[error("its checksum file is damaged")]
    BadChecksumFile,
    /// The artefact cannot be read.
    #[error("cannot read it")]
    Read(#[source] std::io::Error),
    /// Its length is not the one recorded.
    #[error("it is truncated or damaged ({actual} bytes, {expected} recorded)")]
    Length {
        /// The length recorded with it.
        expected: u64,
        /// Its length now.
        actual: u64,
    },
    /// Its CRC-32 is not the one recorded.
    #[error("it is corrupt (checksum mismatch)")]
    Mismatch,
    /// wasmtime refuses it: another wasmtime version, architecture, CPU features or setting.
    #[error("it does not fit this engine")]
    Engine(#[source] wasmtime::Error),
}

/// The checksum file of `artefact`: `<artefact>.crc32`.
pub(super) fn checksum_path(artefact: &Path) -> PathBuf {
    sibling(artefact, ".crc32")
}

/// The checksum file older wasmop versions wrote: `<artefact>.sha256`.
pub(super) fn old_checksum_path(artefact: &Path) -> PathBuf {
    sibling(artefact, ".sha256")
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(suffix);
    PathBuf::from(name)
}

/// What a checksum file records: the artefact's length and CRC-32, as `crc32 <8 hex> <len>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Checksum {
    crc: u32,
    len: u64,
}

impl Checksum {
    fn of(bytes: &[u8]) -> Self {
        Self {
            crc: crc32fast::hash(bytes),
            len: bytes.len() as u64,
        }
    }

    fn render(self) -> String {
        format!("crc32 {:08x} {}\n", self.crc, self.len)
    }

    fn parse(text: &str) -> Option<Self> {
        let mut words = text.split_ascii_whitespace();
        let (Some("crc32"), Some(crc), Some(len), None) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            return None;
        };
        if crc.len() != 8 {
            return None;
        }
        Some(Self {
            crc: u32::from_str_radix(crc, 16).ok()?,
            len: len.parse().ok()?,
        })
    }
}

/// Reads an artefact that [`write_with_checksum`] wrote into a directory wasmop trusts (its
/// cache, or the operator's precompiled directory): `Ok(None)` when there is none, `Err` with
/// the reason when it is damaged, was written by an older wasmop, or does not fit `engine`.
pub(super) fn read_verified(
    engine: &Engine,
    artefact: &Path,
    map: bool,
) -> Result<Option<Component>, Unusable> {
    let expected = match std::fs::read_to_string(checksum_path(artefact)) {
        Ok(text) => Checksum::parse(&text).ok_or(Unusable::BadChecksumFile)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return if old_checksum_path(artefact).exists() {
                Err(Unusable::OldFormat)
            } else {
                Ok(None)
            };
        }
        Err(e) => return Err(Unusable::ReadChecksum(e)),
    };
    // Mapped, the file is checked through a small buffer; read into memory, on the bytes read.
    let (actual, bytes) = if map {
        (file_checksum(artefact, expected.len)?, None)
    } else {
        let bytes = std::fs::read(artefact).map_err(Unusable::Read)?;
        (Checksum::of(&bytes), Some(bytes))
    };
    if actual.len != expected.len {
        return Err(Unusable::Length {
            expected: expected.len,
            actual: actual.len,
        });
    }
    if actual.crc != expected.crc {
        return Err(Unusable::Mismatch);
    }
    // SAFETY: `deserialize_file` maps the file and runs its code, so it must be an artefact
    // wasmtime produced. It is one wasmop wrote (`Component::serialize` for the cache,
    // `Engine::precompile_component` in `wasmop compile`) into a directory the operator
    // trusts, as documented on `RuntimeConfig::cache_dir` and `RuntimeConfig::precompiled_dir`
    // (whoever can write there can run native code in the host), and its length and CRC-32
    // were just checked against the checksum file written with it, so a truncated or damaged
    // file never gets here. wasmtime also checks the header and that the artefact was
    // compiled for this architecture, these CPU features and these engine settings, and errs
    // otherwise.
    // Read into memory instead (`map` false), the bytes just checked are the ones loaded.
    #[allow(unsafe_code)]
    let loaded = match bytes {
        None => unsafe { Component::deserialize_file(engine, artefact) },
        Some(bytes) => unsafe { Component::deserialize(engine, &bytes) },
    };
    loaded.map(Some).map_err(Unusable::Engine)
}

/// Numbers the writes of this process, so that each has a temporary file of its own: two
/// writes of one artefact at once (two runtimes in one process, as in a test binary, or two
/// loads of one component) shared the process's one name, and one could rename the file the
/// other was still writing.
static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Writes `bytes` to `artefact` in `dir` (created if missing) through a temporary file of its
/// own and a rename, after its checksum file, so a reader never sees a half-written artefact
/// with a valid checksum. Removes an older wasmop's checksum file of the same artefact. On
/// failure, the path that could not be written (and no temporary file left behind).
pub(super) fn write_with_checksum(
    dir: &Path,
    artefact: &Path,
    bytes: &[u8],
) -> Result<(), (PathBuf, std::io::Error)> {
    fn fail(path: &Path) -> impl FnOnce(std::io::Error) -> (PathBuf, std::io::Error) + '_ {
        move |e| (path.to_owned(), e)
    }
    std::fs::create_dir_all(dir).map_err(fail(dir))?;
    let name = artefact
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.tmp-{}-{write}", std::process::id()));
    let checksum = checksum_path(artefact);
    let written = std::fs::write(&tmp, bytes)
        .map_err(fail(&tmp))
        .and_then(|()| {
            std::fs::write(&checksum, Checksum::of(bytes).render()).map_err(fail(&checksum))
        })
        .and_then(|()| std::fs::rename(&tmp, artefact).map_err(fail(artefact)));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    let old = old_checksum_path(artefact);
    match std::fs::remove_file(&old) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err((old, e)),
        _ => Ok(()),
    }
}

/// The length and CRC-32 of the file at `path`, read through a small buffer (not mapped: the
/// page cache holds it, not this process). When its length is not `expected_len`, the CRC is
/// not computed (0): the file is damaged whatever it holds.
fn file_checksum(path: &Path, expected_len: u64) -> Result<Checksum, Unusable> {
    let mut file = std::fs::File::open(path).map_err(Unusable::Read)?;
    let len = file.metadata().map_err(Unusable::Read)?.len();
    if len != expected_len {
        return Ok(Checksum { crc: 0, len });
    }
    let mut hasher = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = file.read(&mut buf).map_err(Unusable::Read)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let len = hasher.total_len();
    Ok(Checksum {
        crc: hasher.finalize(),
        len,
    })
}

#[cfg(test)]
mod tests;
