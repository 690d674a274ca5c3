//! The artefact cache's tests: storing, loading, discarding, and how a loaded artefact is mapped.

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
