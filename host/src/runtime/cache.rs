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

    /// The cached artefact for `digest`, if there is a sound one.
    pub fn load(&self, engine: &Engine, digest: &Digest) -> Option<Component> {
        let (artefact, checksum) = self.paths(digest);
        let expected = match std::fs::read_to_string(&checksum) {
            Ok(s) => s.trim().to_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(path = %checksum.display(), error = %e, "cannot read artefact checksum; recompiling");
                return None;
            }
        };
        match file_sha256(&artefact) {
            Ok(actual) if actual == expected => {}
            Ok(_) => {
                tracing::warn!(path = %artefact.display(), "cached artefact is corrupt (checksum mismatch); discarding and recompiling");
                self.discard(digest);
                return None;
            }
            Err(e) => {
                tracing::warn!(path = %artefact.display(), error = %e, "cannot read cached artefact; recompiling");
                self.discard(digest);
                return None;
            }
        }
        // SAFETY: `deserialize_file` maps the file and runs its code, so it must be an
        // artefact wasmtime produced for this engine. It is: the file lives in wasmop's own
        // cache directory under this engine's compatibility hash, was written by `store`
        // below from `Component::serialize`, and its sha256 was just checked against the
        // checksum written with it, so a truncated or bit-flipped file never gets here. The
        // remaining trust is in the directory's permissions, as documented on
        // `RuntimeConfig::cache_dir`. wasmtime additionally checks the header and engine
        // settings and returns an error on mismatch.
        #[allow(unsafe_code)]
        let loaded = unsafe { Component::deserialize_file(engine, &artefact) };
        match loaded {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(path = %artefact.display(), error = %format!("{e:#}"), "cached artefact does not fit this engine; discarding and recompiling");
                self.discard(digest);
                None
            }
        }
    }

    /// Stores the artefact of `component`.
    pub fn store(&self, digest: &Digest, component: &Component) -> Result<(), CacheError> {
        let bytes = component.serialize().map_err(CacheError::Serialize)?;
        let write = |path: &Path, source| CacheError::Write {
            path: path.to_owned(),
            source,
        };
        std::fs::create_dir_all(&self.dir).map_err(|e| write(&self.dir, e))?;
        let (artefact, checksum) = self.paths(digest);
        let tmp = self
            .dir
            .join(format!("{digest}.cwasm.tmp-{}", std::process::id()));
        let sum: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        std::fs::write(&tmp, &bytes).map_err(|e| write(&tmp, e))?;
        std::fs::write(&checksum, sum).map_err(|e| write(&checksum, e))?;
        std::fs::rename(&tmp, &artefact).map_err(|e| write(&artefact, e))?;
        Ok(())
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

pub(super) fn file_sha256(path: &Path) -> std::io::Result<String> {
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
