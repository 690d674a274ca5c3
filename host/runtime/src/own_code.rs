//! The host's own binary, mapped a page at a time.
//!
//! Linux maps, on a read fault in a file mapping, the pages around the one asked for (up to
//! 64 KiB) that are in the page cache: its fault-around. The vendored wasmtime turns it off
//! for the artefacts and slot images it maps (vendor/README.md, 6); this turns it off for the
//! host's own code and read-only data, with the same registration.

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

    /// Every read-only mapping of this test binary is mapped a page at a time: registered so
    /// that the kernel does not fault around in it, and taking no 2 MiB folio whole.
    #[test]
    fn the_hosts_own_code_is_mapped_page_by_page() {
        map_own_code_page_by_page();
        let exe = std::fs::read_link("/proc/self/exe").expect("exe");
        let exe = exe.to_str().expect("utf-8 path");
        let own: Vec<_> = crate::smaps::mappings()
            .into_iter()
            .filter(|m| !read_only_mappings_of(&m.header, exe).is_empty())
            .collect();
        assert!(
            own.len() >= 2,
            "found {} read-only mappings of {exe}",
            own.len()
        );
        crate::smaps::assert_mapped_page_by_page(&own);
    }
}
