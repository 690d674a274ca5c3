//! This process's mappings as `/proc/self/smaps` shows them, for the tests that check what
//! the host keeps mapped: each mapping's address range, its header line, its resident KiB and
//! its `VmFlags`.

use std::ops::Range;

/// One mapping of this process.
pub(crate) struct Mapping {
    pub(crate) range: Range<usize>,
    /// `start-end perms offset dev inode path`, as `/proc/self/maps` shows it.
    pub(crate) header: String,
    pub(crate) rss_kib: u64,
    pub(crate) flags: Vec<String>,
}

/// Every mapping of this process, read once from `/proc/self/smaps`.
pub(crate) fn mappings() -> Vec<Mapping> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
    let mut found: Vec<Mapping> = Vec::new();
    for line in smaps.lines() {
        if let Some(range) = header_range(line) {
            found.push(Mapping {
                range,
                header: line.to_owned(),
                rss_kib: 0,
                flags: Vec::new(),
            });
        } else if let Some(mapping) = found.last_mut() {
            if let Some(kib) = line.strip_prefix("Rss:") {
                let kib = kib.trim().trim_end_matches("kB").trim();
                mapping.rss_kib = kib.parse().expect("Rss in kB");
            } else if let Some(flags) = line.strip_prefix("VmFlags:") {
                mapping.flags = flags.split_whitespace().map(str::to_owned).collect();
            }
        }
    }
    found
}

/// Asserts that the kernel maps `mappings` a page at a time, as
/// `wasmtime::_internal::fault_in_pages_one_by_one` asks (vendor/README.md, 6): none may
/// take a 2 MiB page-cache folio whole (`nh` among its `VmFlags`), and each is registered so
/// that the kernel does not fault around in it (`uw`) where the kernel offers asynchronous
/// write protection, as it does wherever `PAGEMAP_SCAN` is (Linux 6.7).
pub(crate) fn assert_mapped_page_by_page(mappings: &[Mapping]) {
    let lacking = |flag: &str| -> Vec<&str> {
        mappings
            .iter()
            .filter(|m| !m.flags.iter().any(|f| f == flag))
            .map(|m| m.header.as_str())
            .collect()
    };
    let huge = lacking("nh");
    assert!(
        huge.is_empty(),
        "2 MiB folios may be mapped whole in {huge:?}"
    );
    let unregistered = lacking("uw");
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

/// KiB of this process's mappings that overlap `range` resident (which here lie within it).
pub(crate) fn resident_kib(range: Range<usize>) -> u64 {
    mappings()
        .iter()
        .filter(|m| m.range.start < range.end && m.range.end > range.start)
        .map(|m| m.rss_kib)
        .sum()
}

/// The address range of a mapping's header line; `None` for the lines under it.
fn header_range(line: &str) -> Option<Range<usize>> {
    let (start, end) = line.split_whitespace().next()?.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    Some(start..end)
}
