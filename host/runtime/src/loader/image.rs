//! Keeping a mapped artefact's pages out of the host's memory until a call needs them.
//!
//! A component loaded from an artefact (the cache, or the precompiled directory) is a private
//! mapping of the `.cwasm` file. Loading touches much of it — wasmtime reads its metadata and
//! registers its unwind tables, `describe` runs in a fresh instance — and each read fault maps
//! the 64 KiB around it too (the kernel's fault-around), so an idle plugin held about 1.1 MiB
//! of file pages in the host's RSS (1.5 MB artefact of database-config; `/proc/PID/smaps`).
//! After the load, [`release`] drops the pages loading touched (`MADV_DONTNEED`): they stay in
//! the page cache, and a call maps again only the pages it runs. The fault-around itself is
//! off in such a mapping since the vendored wasmtime registers it with a userfaultfd, and the
//! kernel never maps a 2 MiB page-cache folio of it whole (`MADV_NOHUGEPAGE`; vendor/README.md,
//! 6); `MADV_RANDOM`, once meant for it, does not stop it (Linux 6.18) and
//! only turns read-ahead off when a page has to come from the disk again.

use wasmtime::component::Component;

/// Drops the resident pages of `component`'s mapped artefact and turns read-ahead off for it.
/// Only for a component deserialized from a file (`Component::deserialize_file`): the
/// image of a component compiled in this process is anonymous memory, which `MADV_DONTNEED`
/// would zero. Advice the kernel refuses is logged and changes nothing.
pub(crate) fn release(component: &Component) {
    #[cfg(target_os = "linux")]
    {
        use rustix::mm::{Advice, madvise};
        let range = component.image_range();
        let start = range.start.cast::<std::ffi::c_void>().cast_mut();
        let len = range.end.addr() - range.start.addr();
        for advice in [Advice::Random, Advice::LinuxDontNeed] {
            // SAFETY: `start..start + len` is the artefact's mapping, which `component` keeps
            // alive for this call. `MADV_RANDOM` only changes read-ahead. `MADV_DONTNEED` on a
            // private file mapping unmaps its pages; the next access maps the file's bytes
            // again, so it changes no byte the mapping reads as long as no page was written
            // (a written page would revert to the file's content). None was: wasmtime refuses
            // artefacts with relocations outside `.debug_*` sections (which it does not
            // apply), so loading writes nothing into the image, and publishing it made the
            // whole mapping read-only (code read/execute) before this call. The file itself
            // is never changed in place: the cache and `wasmop compile` write a new file and
            // rename it over the old one, and the directories are trusted as documented on
            // `RuntimeConfig::cache_dir` and `RuntimeConfig::precompiled_dir`.
            #[allow(unsafe_code)]
            let advised = unsafe { madvise(start, len, advice) };
            if let Err(error) = advised {
                tracing::debug!(?advice, %error, "cannot advise the kernel about an artefact's pages");
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = component;
}
