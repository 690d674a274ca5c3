//! Cache-memory benchmark (prints figures; not a test):
//!
//! ```text
//! cargo bench -p wasmop-controller --bench cache
//! ```
//!
//! What one cached object costs in the shared caches, counted by a global allocator: the
//! bytes live after `WASMOP_BENCH_OBJECTS` (default 10,000) ConfigMaps shaped like those of
//! `bench/run --only 5` (as the API server sends them: uid, resourceVersion, creation time,
//! `managedFields`) went through a shared watch's path — decode, trim, store, change
//! broadcast — against the bytes of their trimmed JSON. Two representations:
//!
//! - `DynamicObject` in kube-runtime's reflector store: what the caches held first (a
//!   `serde_json::Value` body, `ApiResource` in every store key), rebuilt here from kube's own
//!   types as the baseline;
//! - `CachedObject` in the host's own `Store`: what they hold now (the JSON text alone, keyed
//!   by the namespace and name read from it).
//!
//! Then what a plugin's cached read costs per object (the `kube.get`/`kube.list` path of
//! `KubeCluster` on a cache hit): the cached text decoded into a `Value` and encoded again
//! (what reads did before they returned JSON text), the cached text copied as it is, a store
//! lookup by namespace and name, and a full listing.
//!
//! Then what decoding costs per object on the watch path (the convergence path): a list page
//! and watch events as the API server sends them, decoded as kube-runtime's watcher decoded
//! them for the host before (an `ObjectList` or a `WatchEvent` of the old one-pass decoder,
//! [`old::Watched`], copied here as the baseline) and as the host's own list-watch loop does
//! now (the page read as raw items, then each object by `decoded::decode`; an event in one
//! pass by `listwatch::decode_event`, which reads it apart only when that fails). Both stop at the decoded object: what is cached from it is the same.
//!
//! "malloc" figures add glibc's per-chunk cost (8 bytes of header, 16-byte rounding, 32-byte
//! minimum) to each request, which is closer to what RSS sees. "Churn" is what was allocated
//! and freed again while decoding (garbage the allocator may keep).

#![allow(clippy::unwrap_used, missing_docs)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use kube::api::{DynamicObject, TypeMeta};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::reflector::store::Writer as ReflectorWriter;
use kube::runtime::watcher::Event;
use wasmop_controller::watches::{CachedObject, Writer, decoded, listwatch, trim};
use wasmop_core::cluster::json_text;

/// Counts live bytes (as requested and as glibc chunks) and allocations.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static LIVE_CHUNKS: AtomicUsize = AtomicUsize::new(0);
static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// glibc malloc's chunk for a request of `size` bytes on 64-bit Linux.
fn chunk(size: usize) -> usize {
    (size + 8).div_ceil(16).max(2) * 16
}

#[allow(unsafe_code)]
// SAFETY: every call is forwarded to the system allocator unchanged; the counters are only
// bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Relaxed);
        LIVE_CHUNKS.fetch_add(chunk(layout.size()), Relaxed);
        ALLOCATED.fetch_add(layout.size(), Relaxed);
        COUNT.fetch_add(1, Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which `System` shares.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Relaxed);
        LIVE_CHUNKS.fetch_sub(chunk(layout.size()), Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Relaxed);
        LIVE.fetch_sub(layout.size(), Relaxed);
        LIVE_CHUNKS.fetch_add(chunk(new_size), Relaxed);
        LIVE_CHUNKS.fetch_sub(chunk(layout.size()), Relaxed);
        ALLOCATED.fetch_add(new_size, Relaxed);
        COUNT.fetch_add(1, Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[derive(Clone, Copy)]
struct Snapshot {
    live: usize,
    chunks: usize,
    allocated: usize,
    count: usize,
}

fn now() -> Snapshot {
    Snapshot {
        live: LIVE.load(Relaxed),
        chunks: LIVE_CHUNKS.load(Relaxed),
        allocated: ALLOCATED.load(Relaxed),
        count: COUNT.load(Relaxed),
    }
}

/// The changes a shared watch keeps for slow subscribers (watches.rs `BROADCAST_BUFFER`).
const BROADCAST_BUFFER: usize = 1024;

/// One ConfigMap of `bench-load configmaps`, as the API server sends it in a watch event.
fn server_json(i: usize) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": format!("cache-{i:05}"), "namespace": "cache-memory",
            "uid": format!("{i:08x}-4c1e-4d1a-9c7e-0242ac120002"),
            "resourceVersion": format!("{}", 100_000 + i),
            "creationTimestamp": "2026-11-29T21:10:00Z",
            "labels": {"bench.wasmop.dev/set": "cache"},
            "managedFields": [{
                "manager": "bench-load", "operation": "Update", "apiVersion": "v1",
                "time": "2026-11-29T21:10:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {".": {}, "f:engine": {}, "f:host": {}, "f:port": {}, "f:url": {}},
                             "f:metadata": {"f:labels": {".": {}, "f:bench.wasmop.dev/set": {}}}}
            }]
        },
        "data": {"engine": "postgres", "host": format!("db-{i:05}.example.internal"), "port": "5432",
                 "url": format!("postgres://db-{i:05}.example.internal:5432")}
    }))
    .unwrap()
}

struct Figures {
    live: usize,
    chunks: usize,
    churn: usize,
    allocations: usize,
}

/// Feeds `inputs` through decode → `cache` → `apply` (the store) → broadcast, returning what
/// stays live (store and broadcast kept) and what was churned.
fn measure<K: Clone + 'static>(
    inputs: &[Vec<u8>],
    cache: impl Fn(DynamicObject) -> K,
    mut apply: impl FnMut(&Event<K>),
    keep: Box<dyn std::any::Any>,
) -> (Figures, Vec<Box<dyn std::any::Any>>) {
    let before = now();
    let mut broadcast = std::collections::VecDeque::with_capacity(BROADCAST_BUFFER);
    for json in inputs {
        let obj: DynamicObject = serde_json::from_slice(json).unwrap();
        let event = Event::Apply(cache(obj));
        apply(&event);
        let Event::Apply(obj) = event else {
            unreachable!()
        };
        if broadcast.len() == BROADCAST_BUFFER {
            broadcast.pop_front();
        }
        broadcast.push_back(obj);
    }
    let after = now();
    let figures = Figures {
        live: after.live - before.live,
        chunks: after.chunks - before.chunks,
        churn: (after.allocated - before.allocated) - (after.live - before.live),
        allocations: after.count - before.count,
    };
    (figures, vec![keep, Box::new(broadcast)])
}

/// Rounds over all objects for the read figures, so each figure covers enough reads to time.
const READ_ROUNDS: usize = 20;

/// Reads every object `READ_ROUNDS` times with `read`, returning the time and allocations
/// per read.
fn reads(objects: &[CachedObject], read: impl Fn(&CachedObject) -> String) -> (Duration, f64) {
    let count = objects.len() * READ_ROUNDS;
    let before = now();
    let start = Instant::now();
    for _ in 0..READ_ROUNDS {
        for obj in objects {
            std::hint::black_box(read(std::hint::black_box(obj)));
        }
    }
    let took = start.elapsed();
    let allocations = (now().count - before.count) as f64 / count as f64;
    (took / u32::try_from(count).unwrap(), allocations)
}

/// The benchmark.
///
/// Long on purpose: a benchmark's procedure is one linear script of set-up, measurements and
/// the lines it prints, in the order they are printed; split into pieces it would have to pass
/// its handful of shared locals (runtime, cluster, samples) around and be read out of order.
fn main() {
    let n: usize = std::env::var("WASMOP_BENCH_OBJECTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
    let types = TypeMeta {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
    };
    let inputs: Vec<Vec<u8>> = (0..n).map(server_json).collect();
    let full: usize = inputs.iter().map(Vec::len).sum();
    let trimmed: usize = inputs
        .iter()
        .map(|j| {
            let mut o: DynamicObject = serde_json::from_slice(j).unwrap();
            trim(&mut o, &types);
            serde_json::to_vec(&o).unwrap().len()
        })
        .sum();
    println!("cache memory: {n} ConfigMaps like bench/run --only 5's");
    println!(
        "  JSON as sent:      {full} bytes ({:.0} per object)",
        full as f64 / n as f64
    );
    println!(
        "  trimmed JSON:      {trimmed} bytes ({:.0} per object)",
        trimmed as f64 / n as f64
    );

    let report = |name: &str, f: &Figures| {
        println!("  {name}");
        println!(
            "    live:            {:.0} bytes per object requested, {:.0} as malloc chunks: {:.2}x / {:.2}x the trimmed JSON",
            f.live as f64 / n as f64,
            f.chunks as f64 / n as f64,
            f.live as f64 / trimmed as f64,
            f.chunks as f64 / trimmed as f64
        );
        println!(
            "    churn:           {:.0} bytes per object allocated and freed again; {:.1} allocations per object",
            f.churn as f64 / n as f64,
            f.allocations as f64 / n as f64
        );
    };

    // Baseline: the representation the caches used first.
    let writer = std::cell::RefCell::new(ReflectorWriter::<DynamicObject>::new(resource.clone()));
    let (old, keep) = measure(
        &inputs,
        |mut o| {
            trim(&mut o, &types);
            o
        },
        |event| writer.borrow_mut().apply_watcher_event(event),
        Box::new(()),
    );
    report(
        "DynamicObject in kube-runtime's reflector store (first)",
        &old,
    );
    drop((keep, writer));
    // Its parts: one store key, one stored object.
    let sample: DynamicObject = {
        let mut o: DynamicObject = serde_json::from_slice(&inputs[0]).unwrap();
        trim(&mut o, &types);
        o
    };
    let b = now();
    let key = kube::runtime::reflector::Lookup::to_object_ref(&sample, resource.clone());
    let key_heap = now().chunks - b.chunks;
    let b = now();
    let value = Arc::new(sample.clone());
    let value_heap = now().chunks - b.chunks;
    println!(
        "    parts:           key {} bytes inline + {key_heap} on the heap; object {value_heap} on the heap (of which a `Value` body and metadata strings); per table slot {} bytes",
        std::mem::size_of_val(&key),
        std::mem::size_of_val(&key) + std::mem::size_of_val(&value)
    );
    drop((key, value));

    let mut writer = Writer::new();
    let store = writer.reader();
    let (new, keep) = measure(
        &inputs,
        |o| CachedObject::new(o, &types).unwrap(),
        |event| writer.apply_watcher_event(event),
        Box::new(store.clone()),
    );
    report("CachedObject in the host's Store (now)", &new);
    let texts: usize = store.state().iter().map(|o| o.text().len()).sum();
    let text_chunks: usize = store
        .state()
        .iter()
        .map(|o| chunk(o.text().len() + 16))
        .sum();
    println!(
        "    parts:           text {:.0} bytes per object; with its 16-byte header (length, count) as a malloc chunk {:.0}; the rest ({:.0}) is the table ({} bytes per slot) and its spare capacity",
        texts as f64 / n as f64,
        text_chunks as f64 / n as f64,
        (new.chunks - text_chunks) as f64 / n as f64,
        std::mem::size_of::<CachedObject>()
    );
    println!(
        "  ratio now/first:   {:.3} (malloc chunks)",
        new.chunks as f64 / old.chunks as f64
    );

    // Store reads: a lookup by namespace and name (parses the candidate's key from its
    // text), and a listing.
    let names: Vec<String> = (0..n).map(|i| format!("cache-{i:05}")).collect();
    let start = Instant::now();
    for _ in 0..READ_ROUNDS {
        for name in &names {
            std::hint::black_box(store.get(Some("cache-memory"), name).unwrap());
        }
    }
    let get = start.elapsed() / u32::try_from(n * READ_ROUNDS).unwrap();
    let start = Instant::now();
    for _ in 0..READ_ROUNDS {
        std::hint::black_box(store.state());
    }
    let list = start.elapsed() / u32::try_from(n * READ_ROUNDS).unwrap();
    println!("store reads: {n} objects x {READ_ROUNDS} rounds");
    println!(
        "  get by namespace/name:          {:>8.0} ns per lookup",
        get.as_nanos() as f64
    );
    println!(
        "  state() (a list):               {:>8.1} ns per object",
        list.as_nanos() as f64
    );
    drop(keep);

    // Cached reads: what `kube.get` / `kube.list` do per object on a cache hit.
    let objects: Vec<CachedObject> = inputs
        .iter()
        .map(|j| CachedObject::new(serde_json::from_slice(j).unwrap(), &types).unwrap())
        .collect();
    for obj in &objects {
        let text: serde_json::Value = serde_json::from_str(obj.text()).unwrap();
        assert_eq!(text, obj.to_value().unwrap(), "the same object either way");
    }
    let (via_value, via_value_allocs) = reads(&objects, |o| json_text(&o.to_value().unwrap()));
    let (as_text, as_text_allocs) = reads(&objects, |o| o.text().to_owned());
    println!("cached reads: {n} objects x {READ_ROUNDS} rounds through the cache-hit read path");
    println!(
        "  text -> Value -> text (before): {:>8.0} ns per object, {via_value_allocs:.1} allocations",
        via_value.as_nanos() as f64
    );
    println!(
        "  cached text copied (now):       {:>8.0} ns per object, {as_text_allocs:.1} allocations",
        as_text.as_nanos() as f64
    );
    println!(
        "  speed-up:                       {:.1}x",
        via_value.as_nanos() as f64 / as_text.as_nanos() as f64
    );

    // Decoding: a list page of every object, and one watch event per object.
    let sent: Vec<&str> = inputs
        .iter()
        .map(|j| std::str::from_utf8(j).unwrap())
        .collect();
    let page = format!(
        r#"{{"kind":"ConfigMapList","apiVersion":"v1","metadata":{{"resourceVersion":"200000"}},"items":[{}]}}"#,
        sent.join(",")
    );
    let lines: Vec<String> = sent
        .iter()
        .map(|o| format!(r#"{{"type":"MODIFIED","object":{o}}}"#))
        .collect();
    let per_object = |f: &dyn Fn()| {
        let start = Instant::now();
        for _ in 0..DECODE_ROUNDS {
            f();
        }
        start.elapsed() / u32::try_from(n * DECODE_ROUNDS).unwrap()
    };
    let old_page = per_object(&|| {
        let list: kube::core::ObjectList<old::Watched> = serde_json::from_str(&page).unwrap();
        std::hint::black_box(list);
    });
    let new_page = per_object(&|| {
        let raw = listwatch::raw_page(&page).unwrap();
        for item in raw.items.unwrap() {
            std::hint::black_box(decoded::decode(item.get()).unwrap());
        }
    });
    let old_event = per_object(&|| {
        for line in &lines {
            let event: kube::core::WatchEvent<old::Watched> = serde_json::from_str(line).unwrap();
            std::hint::black_box(event);
        }
    });
    let new_event = per_object(&|| {
        for line in &lines {
            // The loop checks each line's UTF-8 before it reads it (kube's codec did too).
            let line = std::str::from_utf8(line.as_bytes()).unwrap();
            let event = listwatch::decode_event(line).unwrap();
            std::hint::black_box(event.object.unwrap());
        }
    });
    println!("watch decoding: {n} objects x {DECODE_ROUNDS} rounds, per object");
    println!(
        "  list page, kube's ObjectList (before):   {:>8.0} ns",
        old_page.as_nanos() as f64
    );
    println!(
        "  list page, raw items then each (now):    {:>8.0} ns",
        new_page.as_nanos() as f64
    );
    println!(
        "  watch event, kube's WatchEvent (before): {:>8.0} ns",
        old_event.as_nanos() as f64
    );
    println!(
        "  watch event, one pass (now):             {:>8.0} ns",
        new_event.as_nanos() as f64
    );
}

/// Rounds over all objects for the decoding figures.
const DECODE_ROUNDS: usize = 5;

/// The decoder the shared watches used under kube-runtime's watcher (as of the commit before
/// the host's own list-watch loop), kept here as the baseline: every top-level field a
/// `Value`, `managedFields` and the last-applied annotation skipped.
mod old {
    use std::fmt;

    use kube::api::ObjectMeta;
    use serde::de::{IgnoredAny, MapAccess, Visitor};
    use serde::{Deserialize, Deserializer};
    use serde_json::{Map, Value};

    const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

    #[derive(Clone, Debug)]
    pub struct Watched {
        pub _meta: ObjectMeta,
        pub _fields: Map<String, Value>,
    }

    impl<'de> Deserialize<'de> for Watched {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            deserializer.deserialize_map(ObjectVisitor)
        }
    }

    struct ObjectVisitor;

    impl<'de> Visitor<'de> for ObjectVisitor {
        type Value = Watched;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a Kubernetes object")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Watched, A::Error> {
            let mut fields = Map::new();
            let mut meta = ObjectMeta::default();
            while let Some(key) = map.next_key::<String>()? {
                if key == "metadata" {
                    let Metadata {
                        fields: m,
                        identity,
                    } = map.next_value()?;
                    meta = identity;
                    fields.insert(key, Value::Object(m));
                } else {
                    let value: Value = map.next_value()?;
                    fields.insert(key, value);
                }
            }
            Ok(Watched {
                _meta: meta,
                _fields: fields,
            })
        }
    }

    struct Metadata {
        fields: Map<String, Value>,
        identity: ObjectMeta,
    }

    impl<'de> Deserialize<'de> for Metadata {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            deserializer.deserialize_map(MetadataVisitor)
        }
    }

    struct MetadataVisitor;

    impl<'de> Visitor<'de> for MetadataVisitor {
        type Value = Metadata;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object's metadata")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Metadata, A::Error> {
            let mut fields = Map::new();
            let mut identity = ObjectMeta::default();
            while let Some(key) = map.next_key::<String>()? {
                match key.as_str() {
                    "managedFields" => {
                        map.next_value::<IgnoredAny>()?;
                    }
                    "annotations" => {
                        let mut annotations: Option<Map<String, Value>> = map.next_value()?;
                        if let Some(a) = annotations.as_mut() {
                            a.remove(LAST_APPLIED);
                        }
                        if let Some(a) = annotations.filter(|a| !a.is_empty()) {
                            fields.insert(key, Value::Object(a));
                        }
                    }
                    _ => {
                        let value: Value = map.next_value()?;
                        let text = value.as_str().map(str::to_owned);
                        match key.as_str() {
                            "name" => identity.name = text,
                            "namespace" => identity.namespace = text,
                            "resourceVersion" => identity.resource_version = text,
                            _ => {}
                        }
                        fields.insert(key, value);
                    }
                }
            }
            Ok(Metadata { fields, identity })
        }
    }
}
