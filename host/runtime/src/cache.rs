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
mod tests {
    use super::*;

    /// The smallest component: the header alone.
    const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\0\x01\0";

    struct Fixture {
        _dir: tempfile::TempDir,
        engine: Engine,
        cache: ArtefactCache,
        digest: Digest,
        artefact: PathBuf,
    }

    fn stored() -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = Engine::default();
        let cache = ArtefactCache::new(dir.path(), &engine);
        let digest = Digest::of(EMPTY_COMPONENT);
        let component = Component::new(&engine, EMPTY_COMPONENT).expect("compiles");
        cache.store(&digest, &component.into()).expect("stored");
        let artefact = cache.path(&digest);
        Fixture {
            _dir: dir,
            engine,
            cache,
            digest,
            artefact,
        }
    }

    impl Fixture {
        fn load(&self) -> Option<Component> {
            self.cache.load(&self.engine, &self.digest)
        }

        /// After a miss: nothing of the entry is left, and storing it again makes a hit.
        fn assert_discarded_then_rebuilt(&self) {
            assert!(!self.artefact.exists(), "the artefact is removed");
            assert!(!checksum_path(&self.artefact).exists());
            assert!(!old_checksum_path(&self.artefact).exists());
            let component = Component::new(&self.engine, EMPTY_COMPONENT).expect("compiles");
            self.cache
                .store(&self.digest, &component.into())
                .expect("stored");
            assert!(self.load().is_some(), "the rebuilt entry is used");
        }
    }

    /// A mapped artefact is mapped a page at a time (vendor/README.md, 6): registered so
    /// that the kernel does not fault around in it (`uw` among its mappings' `VmFlags`),
    /// though its length, as almost every artefact's, ends inside a page (the registration
    /// takes whole pages only, and a length passed as the file's was refused with `EINVAL`,
    /// leaving every artefact's code and images to the fault-around); and advised not to
    /// take the page cache's 2 MiB folios whole (`nh`), which the kernel otherwise maps with
    /// one entry each in a mapping aligned as an artefact's is.
    #[test]
    #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
    fn a_mapped_artefact_is_mapped_page_by_page() {
        let fixture = stored();
        let len = std::fs::metadata(&fixture.artefact)
            .expect("artefact")
            .len();
        assert_ne!(
            len % 4096,
            0,
            "the artefact's length must end inside a page"
        );
        let component = fixture.load().expect("the artefact is loaded");
        let path = fixture.artefact.to_str().expect("utf-8 path").to_owned();
        let mapped: Vec<_> = crate::smaps::mappings()
            .into_iter()
            .filter(|m| m.header.ends_with(&path))
            .collect();
        assert!(!mapped.is_empty(), "{path} is not mapped");
        crate::smaps::assert_mapped_page_by_page(&mapped);
        drop(component);
    }

    /// Writes of one artefact at once in one process each go through a temporary file of
    /// their own: every one succeeds, the artefact left is whole and verifies, and no
    /// temporary file is left behind.
    #[test]
    fn writes_of_one_artefact_at_once_each_succeed_and_leave_it_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let artefact = dir.path().join("abc.cwasm");
        let bytes: Vec<u8> = (0..4u32 << 20).map(|i| (i % 251) as u8).collect();
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    write_with_checksum(dir.path(), &artefact, &bytes)
                        .unwrap_or_else(|(path, e)| panic!("{}: {e}", path.display()));
                });
            }
        });
        assert_eq!(std::fs::read(&artefact).expect("the artefact"), bytes);
        let expected = std::fs::read_to_string(checksum_path(&artefact)).expect("its checksum");
        let expected = Checksum::parse(&expected).expect("a checksum");
        assert_eq!(
            file_checksum(&artefact, expected.len).expect("read"),
            expected
        );
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .expect("the directory")
            .map(|e| e.expect("an entry").file_name())
            .filter(|n| n.to_string_lossy().contains(".tmp-"))
            .collect();
        assert!(left.is_empty(), "temporary files left: {left:?}");
    }

    /// A big component, compiled apart, is written as the scratch engine serialized it (not
    /// loaded and serialized again) and comes back mapped, in the main engine.
    #[test]
    fn a_component_compiled_apart_is_stored_as_it_is_and_mapped_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = Engine::default();
        let cache = ArtefactCache::new(dir.path(), &engine);
        let (bytes, compiled) = crate::heap::big_compiled_apart(&engine);
        let digest = Digest::of(&bytes);
        let serialized = compiled.artefact().expect("serialized").into_owned();
        let (component, mapped) = cache
            .store_and_map(&engine, &digest, compiled)
            .expect("stored");
        assert!(mapped, "the stored artefact is mapped back");
        assert!(Engine::same(component.engine(), &engine));
        let written = std::fs::read(cache.path(&digest)).expect("artefact");
        assert!(
            written == serialized,
            "the scratch engine's bytes are written"
        );
    }

    /// When the artefact cannot be written, the component compiled apart is loaded from
    /// memory and runs: the cache is an optimisation, never a reason to fail a load.
    #[test]
    fn a_component_that_cannot_be_stored_is_loaded_from_memory() {
        let dir = tempfile::tempdir().expect("tempdir");
        // The cache's root is a file, so its directory cannot be made.
        let root = dir.path().join("not-a-directory");
        std::fs::write(&root, "").expect("write");
        let engine = Engine::default();
        let cache = ArtefactCache::new(&root, &engine);
        let (bytes, compiled) = crate::heap::big_compiled_apart(&engine);
        let (component, mapped) = cache
            .store_and_map(&engine, &Digest::of(&bytes), compiled)
            .expect("loaded from memory");
        assert!(!mapped);
        assert!(Engine::same(component.engine(), &engine));
    }

    #[test]
    fn a_stored_artefact_loads_with_its_crc32_checksum_file() {
        let f = stored();
        let text = std::fs::read_to_string(checksum_path(&f.artefact)).expect("checksum file");
        let len = std::fs::metadata(&f.artefact).expect("artefact").len();
        assert!(text.starts_with("crc32 ") && text.trim_end().ends_with(&format!(" {len}")));
        assert!(f.load().is_some());
    }

    #[test]
    fn a_corrupt_artefact_is_a_miss_and_is_rebuilt() {
        let f = stored();
        let mut bytes = std::fs::read(&f.artefact).expect("artefact");
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0xff;
        std::fs::write(&f.artefact, bytes).expect("write");
        assert!(f.load().is_none());
        f.assert_discarded_then_rebuilt();
    }

    #[test]
    fn a_truncated_artefact_is_a_miss_and_is_rebuilt() {
        let f = stored();
        let bytes = std::fs::read(&f.artefact).expect("artefact");
        std::fs::write(&f.artefact, &bytes[..bytes.len() - 1]).expect("write");
        assert!(matches!(
            read_verified(&f.engine, &f.artefact, true),
            Err(Unusable::Length { .. })
        ));
        assert!(f.load().is_none());
        f.assert_discarded_then_rebuilt();
    }

    #[test]
    fn an_older_wasmops_sha256_checksum_file_is_a_miss_and_is_rebuilt() {
        let f = stored();
        std::fs::remove_file(checksum_path(&f.artefact)).expect("remove");
        std::fs::write(old_checksum_path(&f.artefact), "ab".repeat(32)).expect("write");
        assert!(matches!(
            read_verified(&f.engine, &f.artefact, true),
            Err(Unusable::OldFormat)
        ));
        assert!(f.load().is_none());
        f.assert_discarded_then_rebuilt();
    }

    #[test]
    fn storing_removes_an_older_wasmops_checksum_file() {
        let f = stored();
        std::fs::write(old_checksum_path(&f.artefact), "ab".repeat(32)).expect("write");
        let component = Component::new(&f.engine, EMPTY_COMPONENT).expect("compiles");
        f.cache.store(&f.digest, &component.into()).expect("stored");
        assert!(!old_checksum_path(&f.artefact).exists());
        assert!(f.load().is_some());
    }

    #[test]
    fn an_artefact_without_a_checksum_file_is_a_miss() {
        let f = stored();
        std::fs::remove_file(checksum_path(&f.artefact)).expect("remove");
        assert!(matches!(
            read_verified(&f.engine, &f.artefact, true),
            Ok(None)
        ));
        assert!(f.load().is_none());
        let component = Component::new(&f.engine, EMPTY_COMPONENT).expect("compiles");
        f.cache.store(&f.digest, &component.into()).expect("stored");
        assert!(f.load().is_some(), "the rebuilt entry is used");
    }

    #[test]
    fn a_damaged_checksum_file_is_a_miss_and_is_rebuilt() {
        let f = stored();
        std::fs::write(checksum_path(&f.artefact), "crc32 nothex 12\n").expect("write");
        assert!(matches!(
            read_verified(&f.engine, &f.artefact, true),
            Err(Unusable::BadChecksumFile)
        ));
        assert!(f.load().is_none());
        f.assert_discarded_then_rebuilt();
    }

    #[test]
    fn a_missing_entry_is_a_plain_miss() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = Engine::default();
        let cache = ArtefactCache::new(dir.path(), &engine);
        assert!(cache.load(&engine, &Digest::of(b"other")).is_none());
    }

    #[test]
    fn checksum_text_round_trips_and_rejects_other_formats() {
        let sum = Checksum::of(b"artefact bytes");
        assert_eq!(Checksum::parse(&sum.render()), Some(sum));
        for bad in [
            "",
            "crc32 0000000 3",
            "crc32 00000000",
            "sha256 00000000 3",
            "crc32 00000000 3 x",
        ] {
            assert_eq!(Checksum::parse(bad), None, "{bad:?}");
        }
        assert_eq!(
            Checksum::parse(&"ab".repeat(32)),
            None,
            "an old sha256 file"
        );
    }
}
