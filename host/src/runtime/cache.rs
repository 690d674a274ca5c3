//! Precompiled artefacts on disk, so a restart skips compilation.
//!
//! Layout: `<dir>/<engine>/<digest>.cwasm` plus `<digest>.cwasm.sha256`, where `<engine>`
//! is a hash of wasmtime's compatibility hash (its version, target and every setting that
//! changes generated code) and `<digest>` the component's sha256. An artefact is written to a
//! temporary file and renamed into place, after its checksum file. Before loading, its
//! checksum is verified: a corrupt, truncated or mismatched entry is logged, removed and
//! rebuilt, never loaded.
//!
//! All functions here block; callers run them on tokio's blocking pool.

use std::hash::{Hash, Hasher};
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::plugin::Digest;

/// Why an artefact could not be stored (loading never fails: a bad entry is a miss).
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
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
pub struct ArtefactCache {
    dir: PathBuf,
}

impl ArtefactCache {
    /// The cache under `root` for `engine`.
    pub fn new(root: &Path, engine: &Engine) -> Self {
        let mut h = Sha256Hasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut h);
        let engine_hash = h.0.finalize();
        let name: String = engine_hash[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Self {
            dir: root.join(name),
        }
    }

    fn paths(&self, digest: &Digest) -> (PathBuf, PathBuf) {
        let artefact = self.dir.join(format!("{digest}.cwasm"));
        let checksum = self.dir.join(format!("{digest}.cwasm.sha256"));
        (artefact, checksum)
    }

    /// The cached artefact for `digest`, if there is a sound one. A bad entry is logged,
    /// removed and reported as a miss.
    pub fn load(&self, engine: &Engine, digest: &Digest) -> Option<Component> {
        let (artefact, checksum) = self.paths(digest);
        match read_verified(engine, &artefact, &checksum) {
            Ok(found) => found,
            Err(reason) => {
                tracing::warn!(path = %artefact.display(), %reason, "cached artefact not used; discarding and recompiling");
                self.discard(digest);
                None
            }
        }
    }

    /// Stores the artefact of `component`.
    pub fn store(&self, digest: &Digest, component: &Component) -> Result<(), CacheError> {
        let bytes = component.serialize().map_err(CacheError::Serialize)?;
        let (artefact, checksum) = self.paths(digest);
        write_with_checksum(&self.dir, &artefact, &checksum, &bytes)
            .map_err(|(path, source)| CacheError::Write { path, source })
    }

    fn discard(&self, digest: &Digest) {
        let (artefact, checksum) = self.paths(digest);
        for path in [artefact, checksum] {
            if let Err(e) = std::fs::remove_file(&path)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(path = %path.display(), error = %e, "cannot remove bad cache entry");
            }
        }
    }
}

/// Reads an artefact that [`write_with_checksum`] wrote into a directory wasmop trusts (its
/// cache, or the operator's precompiled directory): `Ok(None)` when there is none, `Err` with
/// the reason when it is damaged or does not fit `engine`.
pub(super) fn read_verified(
    engine: &Engine,
    artefact: &Path,
    checksum: &Path,
) -> Result<Option<Component>, String> {
    let expected = match std::fs::read_to_string(checksum) {
        Ok(s) => s.trim().to_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read its checksum file: {e}")),
    };
    match file_sha256(artefact) {
        Ok(actual) if actual == expected => {}
        Ok(_) => return Err("it is corrupt (checksum mismatch)".into()),
        Err(e) => return Err(format!("cannot read it: {e}")),
    }
    // SAFETY: `deserialize_file` maps the file and runs its code, so it must be an artefact
    // wasmtime produced. It is one wasmop wrote (`Component::serialize` for the cache,
    // `Engine::precompile_component` in `wasmop compile`) into a directory the operator
    // trusts, as documented on `RuntimeConfig::cache_dir` and `RuntimeConfig::precompiled_dir`
    // (whoever can write there can run native code in the host), and its sha256 was just
    // checked against the checksum written with it, so a truncated or damaged file never gets
    // here. wasmtime also checks the header and that the artefact was compiled for this
    // architecture, these CPU features and these engine settings, and errs otherwise.
    #[allow(unsafe_code)]
    let loaded = unsafe { Component::deserialize_file(engine, artefact) };
    loaded
        .map(Some)
        .map_err(|e| format!("it does not fit this engine: {e:#}"))
}

/// Writes `bytes` to `artefact` in `dir` (created if missing) through a temporary file and a
/// rename, after its sha256 to `checksum`, so a reader never sees a half-written artefact with
/// a valid checksum. On failure, the path that could not be written.
pub(super) fn write_with_checksum(
    dir: &Path,
    artefact: &Path,
    checksum: &Path,
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
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let sum: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    std::fs::write(&tmp, bytes).map_err(fail(&tmp))?;
    std::fs::write(checksum, sum).map_err(fail(checksum))?;
    std::fs::rename(&tmp, artefact).map_err(fail(artefact))?;
    Ok(())
}

fn file_sha256(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}
