//! The instance slots of the wasmtime the host builds with (vendored and patched: see
//! vendor/README.md): what a slot keeps mapped and resident between the instances of one
//! module.

use super::*;

/// A fresh instance of `module` in one of `engine`'s slots, with a deadline far away.
fn instantiate(
    engine: &Engine,
    module: &wasmtime::Module,
) -> (wasmtime::Store<()>, wasmtime::Instance) {
    let mut store = wasmtime::Store::new(engine, ());
    store.set_epoch_deadline(u64::MAX / 2);
    let instance = wasmtime::Instance::new(&mut store, module, &[]).expect("instance");
    (store, instance)
}

/// Pages of the test guest's memory; the data segments at both ends make its image span
/// all of them, so that the pages it dirties are copy-on-write pages of the image.
const IMAGE_PAGES: u32 = 401;

/// A guest whose `dirty` writes a marker into every other page of its memory image (200
/// separate runs of dirty pages) and whose `stale` counts the markers it finds.
fn many_regions_guest(engine: &Engine) -> wasmtime::Module {
    let wat = format!(
        r#"(module
            (memory (export "memory") {IMAGE_PAGES})
            (data (i32.const 0) "image")
            (data (i32.const {last}) "image")
            (func (export "dirty")
                (local $page i32)
                (local.set $page (i32.const 1))
                (loop $next
                    (i32.store (i32.mul (local.get $page) (i32.const 65536)) (i32.const 0x5ec2e7))
                    (local.set $page (i32.add (local.get $page) (i32.const 2)))
                    (br_if $next (i32.lt_u (local.get $page) (i32.const {IMAGE_PAGES})))))
            (func (export "stale") (result i32)
                (local $page i32) (local $found i32)
                (local.set $page (i32.const 1))
                (loop $next
                    (if (i32.ne (i32.load (i32.mul (local.get $page) (i32.const 65536))) (i32.const 0))
                        (then (local.set $found (i32.add (local.get $found) (i32.const 1)))))
                    (local.set $page (i32.add (local.get $page) (i32.const 2)))
                    (br_if $next (i32.lt_u (local.get $page) (i32.const {IMAGE_PAGES}))))
                (local.get $found)))"#,
        last = (IMAGE_PAGES - 1) * 65536,
    );
    wasmtime::Module::new(engine, wat::parse_str(wat).expect("wat")).expect("module")
}

/// The vendored wasmtime turns the kernel's fault-around off in a slot's image
/// (vendor/README.md, 6): a guest that reads one word in every other 64 KiB of its 4 MiB
/// image maps those 32 pages, not the 64 KiB around each (2 MiB). The reset's
/// `PAGEMAP_SCAN` looks up every mapped page, so the pages nobody read cost every call.
#[test]
#[cfg(target_os = "linux")]
fn a_slot_maps_only_the_image_pages_its_instances_read() {
    const PAGES: u32 = 64;
    // A byte in every 4 KiB page, so that each page of the image has content.
    let data: String = (0..PAGES * 16)
        .map(|page| format!("(data (i32.const {}) \"x\")", page * 4096))
        .collect();
    let wat = format!(
        r#"(module
            (memory (export "memory") {PAGES})
            {data}
            (func (export "read") (result i32)
                (local $page i32) (local $sum i32)
                (loop $next
                    (local.set $sum (i32.add (local.get $sum)
                        (i32.load (i32.mul (local.get $page) (i32.const 65536)))))
                    (local.set $page (i32.add (local.get $page) (i32.const 2)))
                    (br_if $next (i32.lt_u (local.get $page) (i32.const {PAGES}))))
                (local.get $sum)))"#
    );
    let config = RuntimeConfig::default().concurrency(1);
    let engine = Engine::new(&pooling(&config)).expect("pooling engine");
    let module = wasmtime::Module::new(&engine, wat::parse_str(wat).expect("wat")).expect("module");
    let (mut store, instance) = instantiate(&engine, &module);
    let read = instance
        .get_typed_func::<(), i32>(&mut store, "read")
        .expect("read");
    assert_eq!(
        read.call(&mut store, ()).expect("read"),
        32 * i32::from(b'x')
    );
    let memory = instance.get_memory(&mut store, "memory").expect("memory");
    let start = memory.data_ptr(&store).addr();
    let resident = crate::smaps::resident_kib(start..start + memory.data_size(&store));
    let read_kib = 32 * 4;
    if PoolingAllocationConfig::is_pagemap_scan_available() {
        assert!(
            resident <= 2 * read_kib,
            "{resident} KiB of the image resident after reading {read_kib} KiB of it: the \
             kernel faulted around (is userfaultfd denied to this process?)"
        );
    } else {
        eprintln!("a kernel before 6.7: {resident} KiB resident after reading {read_kib} KiB");
    }
}

/// Minor page faults this thread has taken (`/proc/thread-self/stat`, field 10).
fn thread_minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("thread stat");
    let after_name = &stat[stat.rfind(')').expect("comm") + 1..];
    after_name
        .split_whitespace()
        .nth(7)
        .expect("minflt")
        .parse()
        .expect("number")
}

/// The vendored wasmtime keeps one slot allocator (vendor/README.md): instances of one
/// module made one after another on different threads reuse the slot its image is
/// mapped in. With one shard per CPU, a thread went to its own shard first and a module
/// took a slot in each, every one mapping its image and keeping its dirtied pages.
#[test]
fn a_module_instantiated_on_many_threads_keeps_one_warm_slot() {
    let config = RuntimeConfig::default();
    let engine = Engine::new(&pooling(&config)).expect("pooling engine");
    let module = many_regions_guest(&engine);
    for _ in 0..8 {
        // A new thread each time: threads take their home shard round-robin.
        std::thread::scope(|s| {
            s.spawn(|| {
                instantiate(&engine, &module);
            });
        });
    }
    let metrics = engine.pooling_allocator_metrics().expect("pooling metrics");
    assert_eq!(
        metrics.unused_warm_memories(),
        1,
        "one slot, reused by every thread"
    );
}

/// The pooling allocator's reset (wasmtime patched in vendor/, see vendor/README.md): a
/// guest that dirties more separate runs of pages than one scan buffer holds (32) finds
/// its image pristine in the next instance, and the slot keeps those pages resident
/// instead of faulting them in again on every call. Unpatched, every run after the 32nd
/// was decommitted: 10 instances took 3,392 faults here.
#[test]
#[cfg(target_os = "linux")]
fn a_slot_reset_keeps_many_dirty_regions_resident_and_restores_them() {
    let config = RuntimeConfig::default().concurrency(1);
    let engine = Engine::new(&pooling(&config)).expect("pooling engine");
    let module = many_regions_guest(&engine);
    // Each call's fresh instance must find none of the last one's 200 markers.
    let call = || {
        let (mut store, instance) = instantiate(&engine, &module);
        let stale = instance
            .get_typed_func::<(), i32>(&mut store, "stale")
            .expect("stale");
        let dirty = instance
            .get_typed_func::<(), ()>(&mut store, "dirty")
            .expect("dirty");
        assert_eq!(stale.call(&mut store, ()).expect("stale"), 0);
        dirty.call(&mut store, ()).expect("dirty");
        assert_eq!(stale.call(&mut store, ()).expect("stale"), 200);
    };

    // Warm up: the slot's pages become resident, the allocator's own memory settles.
    for _ in 0..3 {
        call();
    }
    let before = thread_minor_faults();
    let calls = 10;
    for _ in 0..calls {
        call();
    }
    let faults = thread_minor_faults() - before;
    if PoolingAllocationConfig::is_pagemap_scan_available() {
        // 200 dirtied pages per call; kept resident, they cost no faults. Leave room for
        // the host's own allocations.
        assert!(
            faults < calls * 20,
            "{faults} minor faults in {calls} calls: dirty pages were not kept resident"
        );
    } else {
        eprintln!("no PAGEMAP_SCAN on this kernel: {faults} faults in {calls} calls");
    }
}
