//! Keeping a mapped artefact's pages out of the host's memory until a call needs them.
//!
//! A component loaded from an artefact (the cache, or the precompiled directory) is a private
//! mapping of the `.cwasm` file. Loading touches much of it — wasmtime reads its metadata and
//! registers its unwind tables, `describe` runs in a fresh instance — and each read fault maps
//! the 64 KiB around it too (the kernel's fault-around), so an idle plugin held about 1.1 MiB
//! of file pages in the host's RSS (1.5 MB artefact of database-config; `/proc/PID/smaps`).
//! After the load, [`release`] drops the pages loading touched (`MADV_DONTNEED`): they stay in
//! the page cache, and a call maps again only the pages it runs. The fault-around itself is
//! off in such a mapping since the vendored wasmtime registers it with a userfaultfd
//! (vendor/README.md, 6); `MADV_RANDOM`, once meant for it, does not stop it (Linux 6.18) and
//! only turns read-ahead off when a page has to come from the disk again.

use wasmtime::component::Component;

/// Turns the kernel's fault-around off for the host's own code and read-only data, once per
/// process: each page of the binary is then mapped when the host first runs or reads it, not
/// with the 64 KiB around it. [`Runtime::new`](crate::Runtime::new) calls it; the `wasmop`
/// binary calls it first thing, before the pages its start-up runs are mapped.
///
/// The host runs a thin spread of a large binary (wasmtime's runtime, tokio, kube, rustls,
/// serde; little of Cranelift), and with fault-around the pages next to each one it touched
/// were mapped too: about 16 MiB of code resident at convergence, most of it never run
/// (README, Performance, "Where those pages are"). Mapping page by page took the host's peak
/// RSS converging 1,000 Databases from 31.5–31.9 to 23.8–24.0 MiB with the Rust plugin, for
/// the same CPU. The pages stay in the page cache either way; what changes is how many of
/// them this process maps, which is what its RSS and PSS count and what the kernel must
/// unmap before it can reclaim them. The cost is a minor fault for each page the first time
/// it is used instead of one per 64 KiB.
///
/// The binary's mappings are found in `/proc/self/maps` by the path `/proc/self/exe` names;
/// each one that is not writable is registered as the vendored wasmtime registers artefacts
/// (`wasmtime::_internal::fault_in_pages_one_by_one`, vendor/README.md, 6). Where that is
/// refused (a kernel before 6.7, a seccomp profile that denies `userfaultfd`) nothing
/// changes.
pub fn map_own_code_page_by_page() {
    #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let (Ok(exe), Ok(maps)) = (
                std::fs::read_link("/proc/self/exe"),
                std::fs::read_to_string("/proc/self/maps"),
            ) else {
                tracing::debug!("cannot read this process's mappings; fault-around stays on");
                return;
            };
            let Some(exe) = exe.to_str() else { return };
            for range in read_only_mappings_of(&maps, exe) {
                // SAFETY: the range is one of this process's own mappings, of its binary:
                // registering it for asynchronous write protection write-protects nothing
                // and changes no byte, and the binary's mappings live as long as the process.
                #[allow(unsafe_code)]
                unsafe {
                    wasmtime::_internal::fault_in_pages_one_by_one(
                        std::ptr::without_provenance_mut(range.start),
                        range.end - range.start,
                    );
                }
            }
        });
    }
}

/// The address ranges of `maps` (`/proc/self/maps`) that map the file at `path` and are not
/// writable.
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
fn read_only_mappings_of(maps: &str, path: &str) -> Vec<std::ops::Range<usize>> {
    maps.lines()
        .filter_map(|line| {
            // `start-end perms offset dev inode path`, the path last and possibly with spaces.
            let mut fields = line.splitn(6, ' ');
            let (range, perms) = (fields.next()?, fields.next()?);
            let mapped = fields.nth(3)?.trim_start();
            if mapped != path || perms.as_bytes().get(1) != Some(&b'-') {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            (start < end).then_some(start..end)
        })
        .collect()
}

/// Drops the resident pages of `component`'s mapped artefact and turns read-ahead off for it. Only for a component deserialized from a file (`Component::deserialize_file`): the
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

#[cfg(all(test, target_os = "linux", target_pointer_width = "64"))]
mod tests {
    use super::*;

    #[test]
    fn the_binarys_read_only_mappings_are_found_by_path() {
        let maps = "\
55d0c0000000-55d0c0100000 r--p 00000000 fd:01 42 /usr/bin/wasmop
55d0c0100000-55d0c0900000 r-xp 00100000 fd:01 42 /usr/bin/wasmop
55d0c0900000-55d0c0a00000 rw-p 00900000 fd:01 42 /usr/bin/wasmop
55d0c0a00000-55d0c0b00000 r--p 00000000 fd:01 43 /usr/bin/wasmop-other
7f0000000000-7f0000001000 r-xp 00000000 fd:01 44 /opt/my tools/wasmop
7f0000001000-7f0000002000 rw-p 00000000 00:00 0 
";
        assert_eq!(
            read_only_mappings_of(maps, "/usr/bin/wasmop"),
            vec![
                0x55d0c0000000..0x55d0c0100000,
                0x55d0c0100000..0x55d0c0900000
            ]
        );
        assert_eq!(
            read_only_mappings_of(maps, "/opt/my tools/wasmop"),
            vec![0x7f0000000000..0x7f0000001000]
        );
    }

    /// Every read-only mapping of this test binary is registered (`uw` among its `VmFlags`
    /// in `/proc/self/smaps`: the kernel does not fault around in it) where the kernel offers
    /// asynchronous write protection, as it does wherever `PAGEMAP_SCAN` is (Linux 6.7).
    #[test]
    fn the_hosts_own_code_is_mapped_page_by_page() {
        map_own_code_page_by_page();
        let exe = std::fs::read_link("/proc/self/exe").expect("exe");
        let exe = exe.to_str().expect("utf-8 path");
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
        let mut current: Option<String> = None;
        let mut checked = 0;
        let mut unregistered = Vec::new();
        for line in smaps.lines() {
            if let Some(flags) = line.strip_prefix("VmFlags:") {
                if let Some(mapping) = current.take() {
                    checked += 1;
                    if !flags.split_whitespace().any(|flag| flag == "uw") {
                        unregistered.push(mapping);
                    }
                }
            } else if line
                .split_whitespace()
                .next()
                .is_some_and(|f| f.contains('-'))
                && !read_only_mappings_of(line, exe).is_empty()
            {
                current = Some(line.to_owned());
            }
        }
        assert!(checked >= 2, "found {checked} read-only mappings of {exe}");
        if wasmtime::PoolingAllocationConfig::is_pagemap_scan_available() {
            assert!(
                unregistered.is_empty(),
                "fault-around is still on for {unregistered:?} (is userfaultfd denied?)"
            );
        } else {
            eprintln!(
                "a kernel before 6.7: {} mappings unregistered",
                unregistered.len()
            );
        }
    }
}
