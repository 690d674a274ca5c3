//! The artefact cache (hits, misses, corrupt entries rebuilt), artefacts of a metered engine
//! fitting only a metered host, compilations started ahead taken by the load, and the heap
//! trimmed after a batch of loads.

use std::time::Duration;

use wasmop_runtime::{LoadOptions, Runtime, RuntimeConfig};

use crate::support::{bytes_of, healthy_call, load, load_err, runtime, test_limits};

#[tokio::test]
async fn artefact_cache_hits_misses_and_rebuilds_corrupt_entries() {
    let _shared = crate::support::shared().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let cached_runtime = || {
        Runtime::new(
            RuntimeConfig::default()
                .concurrency(2)
                .limits(test_limits())
                .cache_dir(dir.path()),
        )
        .expect("runtime")
    };
    let first = load(&cached_runtime(), "well-behaved").await;
    assert!(!first.load_stats().from_cache, "first load compiles");
    assert!(
        first.load_stats().mapped,
        "a version compiled with a cache runs from the artefact it stored, mapped"
    );
    healthy_call(&first, "compiled", "6").await;
    let second = load(&cached_runtime(), "well-behaved").await;
    assert!(second.load_stats().from_cache, "second load hits the cache");
    assert!(second.load_stats().mapped);
    healthy_call(&second, "cached", "7").await;
    let uncached = load(&runtime(), "well-behaved").await;
    assert!(
        !uncached.load_stats().mapped,
        "without a cache the compiled code stays in memory"
    );
    healthy_call(&uncached, "uncached", "5").await;

    // Corrupt every artefact: flip bytes in the middle.
    let mut corrupted = 0;
    for engine_dir in std::fs::read_dir(dir.path()).expect("cache dir") {
        for entry in std::fs::read_dir(engine_dir.expect("entry").path()).expect("engine dir") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "cwasm") {
                let mut bytes = std::fs::read(&path).expect("artefact");
                let mid = bytes.len() / 2;
                for b in &mut bytes[mid..mid + 64] {
                    *b ^= 0xff;
                }
                std::fs::write(&path, bytes).expect("write");
                corrupted += 1;
            }
        }
    }
    assert_eq!(corrupted, 1);
    let third = load(&cached_runtime(), "well-behaved").await;
    assert!(
        !third.load_stats().from_cache,
        "a corrupt entry is ignored and rebuilt"
    );
    healthy_call(&third, "rebuilt", "8").await;
    let fourth = load(&cached_runtime(), "well-behaved").await;
    assert!(fourth.load_stats().from_cache, "the rebuilt entry is used");

    // Replace it with its first half (as a crash during a copy leaves it; never truncated in
    // place, which the plugins loaded above still map), then replace its checksum file with
    // an older wasmop's sha256 one: each is a miss that rebuilds the entry, never an error.
    let artefact = only_artefact(dir.path());
    let bytes = std::fs::read(&artefact).expect("artefact");
    let half = dir.path().join("half");
    std::fs::write(&half, &bytes[..bytes.len() / 2]).expect("write");
    std::fs::rename(&half, &artefact).expect("replace");
    let fifth = load(&cached_runtime(), "well-behaved").await;
    assert!(
        !fifth.load_stats().from_cache,
        "a truncated entry is ignored and rebuilt"
    );
    healthy_call(&fifth, "after-truncation", "9").await;
    let mut checksum = artefact.clone().into_os_string();
    checksum.push(".crc32");
    std::fs::remove_file(&checksum).expect("checksum file");
    let mut old = artefact.clone().into_os_string();
    old.push(".sha256");
    std::fs::write(&old, "ab".repeat(32)).expect("old checksum file");
    let sixth = load(&cached_runtime(), "well-behaved").await;
    assert!(
        !sixth.load_stats().from_cache,
        "an entry of an older format is rebuilt"
    );
    assert!(
        !std::path::Path::new(&old).exists(),
        "the old checksum file is gone"
    );
    let seventh = load(&cached_runtime(), "well-behaved").await;
    assert!(
        seventh.load_stats().from_cache,
        "the rewritten entry is used"
    );
}

/// The one `*.cwasm` file under the artefact cache `dir`.
fn only_artefact(dir: &std::path::Path) -> std::path::PathBuf {
    let mut found = Vec::new();
    for engine_dir in std::fs::read_dir(dir).expect("cache dir") {
        for entry in std::fs::read_dir(engine_dir.expect("entry").path()).expect("engine dir") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "cwasm") {
                found.push(path);
            }
        }
    }
    assert_eq!(found.len(), 1, "{found:?}");
    found.remove(0)
}

/// Metering fuel changes the compiled code: artefacts of a metered engine fit only a metered
/// host, in the artefact cache (keyed by the engine) and in the precompiled directory (checked
/// by wasmtime), and a misfit is compiled instead of failing.
#[tokio::test]
async fn artefacts_of_a_metered_engine_load_only_on_a_metered_one() {
    let _shared = crate::support::shared().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let bytes = bytes_of("well-behaved");
    let digest = wasmop_core::plugin::Digest::of(&bytes);
    let config = |fuel: bool| {
        RuntimeConfig::default()
            .concurrency(2)
            .limits(test_limits())
            .consume_fuel(fuel)
    };
    let precompiled = dir.path().join("precompiled");
    let made =
        wasmop_runtime::precompiled::compile(&config(true), None, &bytes, &digest, &precompiled)
            .expect("compiles");
    assert_eq!(made.len(), 2);
    let on =
        |fuel: bool| Runtime::new(config(fuel).precompiled_dir(&precompiled)).expect("runtime");
    let metered = load(&on(true), "well-behaved").await;
    assert!(
        metered.load_stats().precompiled,
        "{:?}",
        metered.load_stats()
    );
    healthy_call(&metered, "metered", "1").await;
    let plain = load(&on(false), "well-behaved").await;
    assert!(!plain.load_stats().precompiled, "{:?}", plain.load_stats());
    healthy_call(&plain, "plain", "2").await;

    // One cache directory shared by both: each engine has its own entry.
    let cache = dir.path().join("cache");
    let cached = |fuel: bool| Runtime::new(config(fuel).cache_dir(&cache)).expect("runtime");
    assert!(
        !load(&cached(true), "well-behaved")
            .await
            .load_stats()
            .from_cache
    );
    assert!(
        !load(&cached(false), "well-behaved")
            .await
            .load_stats()
            .from_cache
    );
    for fuel in [true, false] {
        let again = load(&cached(fuel), "well-behaved").await;
        assert!(
            again.load_stats().from_cache,
            "fuel {fuel}: {:?}",
            again.load_stats()
        );
        healthy_call(&again, "cached", "3").await;
    }
}

#[tokio::test]
async fn a_compilation_started_ahead_is_taken_by_the_load_of_the_same_bytes() {
    let _shared = crate::support::shared().await;
    let rt = runtime();
    rt.compile_ahead(b"not a component".to_vec());
    assert_eq!(
        rt.compiling_ahead(),
        0,
        "bytes that are not a component are ignored"
    );

    let bytes = bytes_of("well-behaved");
    rt.compile_ahead(bytes.clone());
    rt.compile_ahead(bytes.clone());
    assert_eq!(rt.compiling_ahead(), 1, "one compilation per digest");
    let plugin = rt
        .load(bytes.clone(), LoadOptions::default())
        .await
        .expect("loads");
    assert_eq!(rt.compiling_ahead(), 0, "the load took it");
    assert!(plugin.load_stats().compile_time > Duration::ZERO);
    healthy_call(&plugin, "ahead", "1").await;

    // Hints for versions never loaded are dropped.
    rt.compile_ahead(bytes_of("noop"));
    assert_eq!(rt.compiling_ahead(), 1);
    rt.discard_ahead();
    assert_eq!(rt.compiling_ahead(), 0);
}

/// `bytes` with a custom section of `len` zero bytes named after `tag` appended: the same
/// code, another digest, and as big as a component that holds an interpreter.
fn padded(bytes: &[u8], tag: &str, len: usize) -> Vec<u8> {
    wasmop_test_guests::with_custom_section(bytes, tag, &vec![0; len])
}

/// Big components (at least 2 MiB: a CPython one is 18.7 MB and holds ~17 times its size
/// while it compiles) compile one at a time, whichever path compiles them; small ones are
/// not held up by that rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn big_components_compile_one_at_a_time() {
    let _shared = crate::support::shared().await;
    let rt = Runtime::new(
        RuntimeConfig::default()
            .concurrency(4)
            .limits(test_limits()),
    )
    .expect("runtime");
    let small = bytes_of("well-behaved");
    let loads = (0..3).map(|i| {
        let rt = rt.clone();
        let bytes = padded(&small, &format!("small-{i}"), 1 << 10);
        async move { rt.load(bytes, LoadOptions::default()).await }
    });
    for loaded in futures_join(loads).await {
        loaded.expect("a small padded component loads");
    }
    assert_eq!(rt.most_big_compiles_at_once(), 0, "small ones never wait");
    let loads = (0..3).map(|i| {
        let rt = rt.clone();
        let bytes = padded(&small, &format!("big-{i}"), 3 << 20);
        async move { rt.load(bytes, LoadOptions::default()).await }
    });
    for loaded in futures_join(loads).await {
        let plugin = loaded.expect("a big padded component loads");
        healthy_call(&plugin, "big", "1").await;
    }
    assert_eq!(rt.most_big_compiles_at_once(), 1);
}

/// Loads free as they go (bytes, decoded metadata, `describe`'s buffers), and glibc keeps that
/// memory; the last load of a batch returns it, once for the batch, whether loads succeed
/// or fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_loads_trims_the_heap_once_when_the_last_ends() {
    let _shared = crate::support::shared().await;
    let rt = runtime();
    let small = bytes_of("well-behaved");
    let load_tagged = |tag: &str| rt.load(padded(&small, tag, 16), LoadOptions::default());
    // Joined in one task: each load counts itself before its first wait, so all three are
    // under way before any ends.
    let (a, b, c) = tokio::join!(load_tagged("a"), load_tagged("b"), load_tagged("c"));
    for loaded in [a, b, c] {
        loaded.expect("a padded component loads");
    }
    trims_reach(&rt, 1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(rt.heap_trims_after_loads(), 1, "one trim for the batch");
    load_tagged("d").await.expect("loads");
    trims_reach(&rt, 2).await;
    load_err(&rt, b"not a component".to_vec()).await;
    trims_reach(&rt, 3).await;
}

/// Waits (up to 10 s: the trim runs on a blocking thread after the load returns) until the
/// runtime has trimmed after loads `n` times.
async fn trims_reach(rt: &Runtime, n: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while rt.heap_trims_after_loads() < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} trims after loads, expected {n}",
            rt.heap_trims_after_loads()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Runs the futures at once, each on its own task, and returns their results in order.
async fn futures_join<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let tasks: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for task in tasks {
        out.push(task.await.expect("task"));
    }
    out
}

/// With the perf map on, the engine writes `/tmp/perf-<pid>.map` naming the plugin's
/// functions, for code it compiles and for code it loads from an artefact alike.
#[tokio::test]
async fn the_perf_map_names_a_plugins_functions_compiled_or_cached() {
    let _shared = crate::support::shared().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let map = std::path::PathBuf::from(format!("/tmp/perf-{}.map", std::process::id()));
    let profiled = || {
        Runtime::new(
            RuntimeConfig::default()
                .concurrency(2)
                .limits(test_limits())
                .cache_dir(dir.path())
                .perf_map(true),
        )
        .expect("runtime")
    };
    let lines = || {
        std::fs::read_to_string(&map)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("hostile_well_behaved"))
            .count()
    };
    let before = lines();
    let compiled = load(&profiled(), "well-behaved").await;
    assert!(!compiled.load_stats().from_cache);
    let after_compile = lines();
    assert!(
        after_compile > before,
        "{} names no function of the compiled plugin",
        map.display()
    );
    let cached = load(&profiled(), "well-behaved").await;
    assert!(cached.load_stats().from_cache);
    // perf reads the map only for anonymous memory: a mapped artefact's samples would be
    // named by file offset.
    assert!(
        !compiled.load_stats().mapped && !cached.load_stats().mapped,
        "with the perf map, code runs from memory, not from the mapped artefact"
    );
    assert!(
        lines() > after_compile,
        "{} names no function of the plugin loaded from its artefact",
        map.display()
    );
    healthy_call(&cached, "profiled", "8").await;
    let _ = std::fs::remove_file(&map);
}

/// `max_compile_bytes`: a component bigger than the bound, with no artefact, is refused with
/// an error that says so and how to ship it; the same bytes load from a precompiled artefact
/// or from the cache, and a component within the bound compiles as usual (tiered or not).
#[tokio::test]
async fn a_component_over_the_compile_bound_loads_only_from_an_artefact() {
    let _shared = crate::support::shared().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let bytes = bytes_of("well-behaved");
    let size = bytes.len() as u64;
    let digest = wasmop_core::plugin::Digest::of(&bytes);
    let config = |limit: u64| {
        RuntimeConfig::default()
            .concurrency(2)
            .limits(test_limits())
            .max_compile_bytes(Some(limit))
    };
    for tiered in [false, true] {
        let Err(refused) = Runtime::new(config(size - 1).tiered(tiered))
            .expect("runtime")
            .load(bytes.clone(), LoadOptions::default())
            .await
        else {
            panic!("tiered {tiered}: compiled a component over the bound");
        };
        let text = refused.to_string();
        assert!(
            matches!(refused, wasmop_runtime::LoadError::TooBigToCompile { size: s, limit } if s as u64 == size && limit == size - 1),
            "tiered {tiered}: {text}"
        );
        assert!(
            text.contains(&format!("is {size} bytes"))
                && text.contains(&format!("at most {} bytes", size - 1))
                && text.contains("`maxCompileBytes`")
                && text.contains("wasmop compile")
                && text.contains("`precompiledDirectory`"),
            "{text}"
        );
        let within = load(
            &Runtime::new(config(size).tiered(tiered)).expect("runtime"),
            "well-behaved",
        )
        .await;
        assert!(!within.load_stats().from_cache);
        healthy_call(&within, "within-the-bound", "1").await;
    }

    // A precompiled artefact is loaded whatever its component's size.
    let precompiled = dir.path().join("precompiled");
    wasmop_runtime::precompiled::compile(&config(size - 1), None, &bytes, &digest, &precompiled)
        .expect("compiles");
    let shipped = load(
        &Runtime::new(config(size - 1).precompiled_dir(&precompiled)).expect("runtime"),
        "well-behaved",
    )
    .await;
    assert!(
        shipped.load_stats().precompiled,
        "{:?}",
        shipped.load_stats()
    );
    healthy_call(&shipped, "precompiled", "2").await;

    // So is one in the cache, stored by a host that compiled it.
    let cache = dir.path().join("cache");
    let compiled = load(
        &Runtime::new(config(size).cache_dir(&cache)).expect("runtime"),
        "well-behaved",
    )
    .await;
    assert!(!compiled.load_stats().from_cache);
    let cached = load(
        &Runtime::new(config(size - 1).cache_dir(&cache)).expect("runtime"),
        "well-behaved",
    )
    .await;
    assert!(cached.load_stats().from_cache, "{:?}", cached.load_stats());
    healthy_call(&cached, "cached", "3").await;
}
