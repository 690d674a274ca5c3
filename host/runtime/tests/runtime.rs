//! Runtime tests with real components (built from `tests/hostile/*` and `plugins/*` by
//! `wasmop-test-guests`) and the in-memory cluster: healthy calls, every hostile plugin's
//! typed outcome while a healthy plugin keeps working, bad files, the artefact cache, and
//! the limits that guard host calls, and tiered loading (Winch code first, Cranelift's after).

use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

use async_trait::async_trait;
use serde_json::{Value, json};
use wasmop_core::cluster::{
    Cluster, ClusterError, Event, GroupVersionKind, Json, ObjectRef, ObjectText, Patch,
};
use wasmop_core::plugin::PluginName;
use wasmop_core::policy::Policy;
use wasmop_offline::memory::{MemoryCluster, Write};
use wasmop_runtime::{
    Action, AllocatorChoice, Budget, Call, CallReport, Compiler, LimitKind, Limits, LoadError,
    LoadOptions, Outcome, Plugin, PluginErrorKind, Request, Runtime, RuntimeConfig, TieringStats,
};

/// A short deadline keeps the infinite-loop test quick; nothing asserts on durations.
fn test_limits() -> Limits {
    Limits {
        deadline: Duration::from_secs(3),
        ..Limits::default()
    }
}

fn runtime() -> Runtime {
    Runtime::new(
        RuntimeConfig::default()
            .concurrency(16)
            .limits(test_limits()),
    )
    .expect("runtime starts")
}

async fn load(rt: &Runtime, guest: &str) -> Plugin {
    rt.load_file(wasmop_test_guests::component(guest), LoadOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{guest} loads: {:#}", anyhow::Error::from(e)))
}

async fn load_err(rt: &Runtime, bytes: Vec<u8>) -> String {
    match rt.load(bytes, LoadOptions::default()).await {
        Ok(p) => panic!("loaded {:?} but expected a refusal", p.info().name),
        Err(e) => format!("{:#}", anyhow::Error::from(e)),
    }
}

fn target(name: &str, value: &str) -> Value {
    json!({
        "apiVersion": "wasmop.test/v1", "kind": "Target",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"value": value}
    })
}

fn seeded(objects: Vec<Value>) -> Arc<MemoryCluster> {
    let c = Arc::new(MemoryCluster::new());
    c.seed(objects).expect("seed");
    c
}

fn request(object: Value) -> Request {
    Request::for_object(object).expect("identifiable")
}

fn mirror_ref(name: &str) -> ObjectRef {
    ObjectRef::new(
        GroupVersionKind::gvk("", "v1", "ConfigMap"),
        Some("default".into()),
        format!("{name}-mirror"),
    )
}

/// One healthy call of `well-behaved`, checked for the writes it must make.
async fn healthy_call(plugin: &Plugin, name: &str, value: &str) {
    let object = target(name, value);
    let cluster = seeded(vec![object.clone()]);
    let outcome = plugin
        .call(cluster.clone(), Call::reconcile(request(object)))
        .await
        .outcome;
    assert_eq!(outcome, Outcome::Action(Action::Done), "{outcome}");
    let mirror = cluster.object(&mirror_ref(name)).expect("mirror applied");
    assert_eq!(mirror["data"]["value"], value);
    let writes = cluster.writes();
    assert_eq!(writes.len(), 3, "{writes:?}");
    assert!(matches!(&writes[2], Write::Event { reason, .. } if reason == "Mirrored"));
}

fn database(name: &str, port: u16) -> Value {
    json!({
        "apiVersion": "demo.wasmop.dev/v1", "kind": "Database",
        "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}"), "generation": 1},
        "spec": {"engine": "postgres", "host": "db.shop.svc", "port": port, "replicas": 2}
    })
}

/// One call of the example plugin `database-config`, checked for its ConfigMap and status.
async fn database_config_call(plugin: &Plugin, name: &str, port: u16) {
    let object = database(name, port);
    let cluster = seeded(vec![object.clone()]);
    let outcome = plugin
        .call(cluster.clone(), Call::reconcile(request(object.clone())))
        .await
        .outcome;
    assert_eq!(outcome, Outcome::Action(Action::Done), "{outcome}");
    let config_map = ObjectRef::new(
        GroupVersionKind::gvk("", "v1", "ConfigMap"),
        Some("shop".into()),
        format!("{name}-config"),
    );
    let config_map = cluster.object(&config_map).expect("ConfigMap applied");
    assert_eq!(
        config_map["data"]["url"],
        format!("postgres://db.shop.svc:{port}")
    );
    let stored = cluster
        .object(&ObjectRef::of(&object).expect("ref"))
        .expect("database");
    assert_eq!(stored["status"]["observedGeneration"], 1, "{stored}");
}

#[tokio::test]
async fn healthy_plugin_applies_patches_status_and_emits_an_event() {
    let rt = runtime();
    let plugin = load(&rt, "well-behaved").await;
    assert_eq!(plugin.info().name.as_str(), "well-behaved");
    assert_eq!(
        plugin.info().finalizer.as_deref(),
        Some("wasmop.test/cleanup")
    );
    healthy_call(&plugin, "a", "42").await;
}

#[tokio::test]
async fn settings_reach_the_plugin_through_config_get() {
    let rt = runtime();
    let options = LoadOptions {
        config: json!({"requeueMs": 1500}),
        ..LoadOptions::default()
    };
    let plugin = rt
        .load_file(wasmop_test_guests::component("well-behaved"), options)
        .await
        .expect("loads");
    let object = target("a", "1");
    let outcome = plugin
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object)),
        )
        .await
        .outcome;
    assert_eq!(
        outcome,
        Outcome::Action(Action::RequeueAfter(Duration::from_millis(1500)))
    );
}

#[tokio::test]
async fn with_options_applies_settings_without_reloading() {
    let rt = runtime();
    let plugin = load(&rt, "well-behaved").await;
    let limits = Limits {
        deadline: Duration::from_secs(2),
        ..test_limits()
    };
    let tuned = plugin
        .with_options(LoadOptions {
            config: json!({"requeueMs": 1500}),
            limits: Some(limits.clone()),
            ..LoadOptions::default()
        })
        .expect("same version, other options");
    assert_eq!(tuned.digest(), plugin.digest());
    assert_eq!(tuned.limits(), &limits);
    let object = target("a", "1");
    let outcome = tuned
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object)),
        )
        .await
        .outcome;
    assert_eq!(
        outcome,
        Outcome::Action(Action::RequeueAfter(Duration::from_millis(1500)))
    );
    // The original keeps its own options.
    healthy_call(&plugin, "b", "7").await;

    let refused = plugin.with_options(LoadOptions {
        config: json!(["not", "an", "object"]),
        ..LoadOptions::default()
    });
    assert!(
        matches!(refused, Err(LoadError::SettingsNotAnObject(_))),
        "settings that are not an object are refused"
    );
}

#[tokio::test]
async fn cleanup_runs_the_cleanup_export() {
    let rt = runtime();
    let plugin = load(&rt, "well-behaved").await;
    let object = target("gone", "1");
    let cluster = seeded(vec![object.clone()]);
    assert!(
        plugin
            .call(cluster.clone(), Call::reconcile(request(object.clone())))
            .await
            .outcome
            .is_success()
    );
    assert!(cluster.object(&mirror_ref("gone")).is_some());
    assert!(
        plugin
            .call(cluster.clone(), Call::cleanup(request(object)))
            .await
            .outcome
            .is_success()
    );
    assert!(cluster.object(&mirror_ref("gone")).is_none());
}

fn expect_outcome(name: &str, outcome: &Outcome) {
    let text = outcome.to_string();
    let ok = match name {
        "infinite-loop" => {
            matches!(outcome, Outcome::Timeout(Budget::WallClock(_)))
                && text.contains("did not finish within its deadline of 3000 ms")
        }
        "memory-bomb" => {
            matches!(outcome, Outcome::OutOfMemory { limit } if *limit == 64 << 20)
                && text.contains("ran out of memory")
                && text.contains("64 MiB")
        }
        "unbounded-recursion" => {
            matches!(outcome, Outcome::Trap { .. }) && text.contains("wasm stack overflow")
        }
        "panic" => {
            matches!(outcome, Outcome::Trap { backtrace, .. } if !backtrace.is_empty())
                && text.contains("hostile plugin panicked on purpose")
        }
        "log-flood" => {
            matches!(outcome, Outcome::LimitExceeded(LimitKind::HostBytes(_)))
                && text.contains("passed more than 16 MiB to the host")
        }
        "host-call-flood" => {
            matches!(outcome, Outcome::LimitExceeded(LimitKind::HostCalls(1000)))
                && text.contains("more than 1000 host calls")
        }
        "invalid-json" => {
            matches!(
                outcome,
                Outcome::PluginError {
                    kind: PluginErrorKind::Permanent,
                    ..
                }
            ) && text.contains("not valid JSON")
        }
        "oversized-output" => matches!(outcome, Outcome::LimitExceeded(LimitKind::HostBytes(_))),
        "undeclared-kind" => {
            matches!(outcome, Outcome::Denied(_))
                && text.contains("get on core/Secret in namespace `default` is not granted")
        }
        other => panic!("no expectation for {other}"),
    };
    assert!(
        ok,
        "{name} ended in an unexpected outcome: {outcome:?} ({text})"
    );
}

const HOSTILE: [&str; 9] = [
    "infinite-loop",
    "memory-bomb",
    "unbounded-recursion",
    "panic",
    "log-flood",
    "host-call-flood",
    "invalid-json",
    "oversized-output",
    "undeclared-kind",
];

/// Loads every hostile guest on `rt` and starts one reconcile of each, all at once.
async fn start_hostile(rt: &Runtime) -> Vec<(&'static str, JoinHandle<CallReport>)> {
    let mut hostile = Vec::new();
    for name in HOSTILE {
        let plugin = load(rt, name).await;
        let object = target("victim", "1");
        let cluster = seeded(vec![object.clone()]);
        hostile.push((
            name,
            tokio::spawn(
                async move { plugin.call(cluster, Call::reconcile(request(object))).await },
            ),
        ));
    }
    hostile
}

/// Waits for the reconciles [`start_hostile`] started; each must end in its typed outcome
/// (and on `compiler`'s code, when given).
async fn expect_hostile(
    hostile: Vec<(&'static str, JoinHandle<CallReport>)>,
    compiler: Option<Compiler>,
    context: &str,
) {
    for (name, handle) in hostile {
        let report = handle
            .await
            .unwrap_or_else(|e| panic!("{name}'s task failed ({context}): {e}"));
        if let Some(compiler) = compiler {
            assert_eq!(
                report.compiler(),
                compiler,
                "{name} ran on {compiler:?} code"
            );
        }
        expect_outcome(name, &report.outcome);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_plugins_end_in_their_typed_outcomes_while_a_healthy_plugin_keeps_working() {
    let rt = runtime();
    let healthy = load(&rt, "well-behaved").await;
    let example = load(&rt, "database-config").await;
    let hostile = start_hostile(&rt).await;
    // The healthy plugin keeps producing correct results while the hostile ones run.
    let mut healthy_calls = 0u32;
    while hostile.iter().any(|(_, h)| !h.is_finished()) || healthy_calls < 5 {
        healthy_calls += 1;
        healthy_call(
            &healthy,
            &format!("h{healthy_calls}"),
            &healthy_calls.to_string(),
        )
        .await;
    }
    expect_hostile(hostile, None, "beside a healthy plugin").await;
    // And afterwards.
    healthy_call(&healthy, "after", "done").await;
    database_config_call(&example, "after", 5432).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn winch_compiled_plugins_keep_every_guarantee_and_work_alike() {
    // With both allocators: pooled memories (Auto, where the machine can reserve the pool)
    // have large reservations and guard pages, on-demand ones small reservations and
    // explicit bounds checks in the code Winch makes.
    for allocator in [AllocatorChoice::Auto, AllocatorChoice::OnDemand] {
        let rt = Runtime::new(
            RuntimeConfig::default()
                .concurrency(16)
                .limits(test_limits())
                .allocator(allocator)
                .compiler(Compiler::Winch),
        )
        .expect("a Winch runtime starts");
        healthy_call(&load(&rt, "well-behaved").await, "w", "1").await;
        database_config_call(&load(&rt, "database-config").await, "w", 5432).await;
        let hostile = start_hostile(&rt).await;
        expect_hostile(hostile, Some(Compiler::Winch), &format!("{allocator:?}")).await;
    }
    let limits = Limits {
        fuel: Some(50_000_000),
        ..test_limits()
    };
    let metered = Runtime::new(
        RuntimeConfig::default()
            .concurrency(2)
            .limits(limits)
            .compiler(Compiler::Winch),
    )
    .expect("a metered Winch runtime starts");
    let object = target("spin", "1");
    let outcome = load(&metered, "infinite-loop")
        .await
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object)),
        )
        .await
        .outcome;
    assert_eq!(
        outcome,
        Outcome::Timeout(Budget::Fuel(50_000_000)),
        "{outcome}"
    );
}

#[tokio::test]
async fn fuel_budget_stops_a_spinning_guest() {
    let limits = Limits {
        fuel: Some(50_000_000),
        ..test_limits()
    };
    let rt = Runtime::new(RuntimeConfig::default().concurrency(2).limits(limits)).expect("runtime");
    let plugin = load(&rt, "infinite-loop").await;
    let object = target("spin", "1");
    let outcome = plugin
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object)),
        )
        .await
        .outcome;
    assert_eq!(
        outcome,
        Outcome::Timeout(Budget::Fuel(50_000_000)),
        "{outcome}"
    );
    assert!(outcome.to_string().contains("fuel budget of 50000000"));
}

#[tokio::test]
async fn a_call_reports_its_memory_high_water_mark_and_the_fuel_it_used() {
    let limits = Limits {
        fuel: Some(5_000_000_000),
        ..test_limits()
    };
    let rt = Runtime::new(RuntimeConfig::default().concurrency(2).limits(limits)).expect("runtime");
    let plugin = load(&rt, "well-behaved").await;
    let object = target("measured", "1");
    let CallReport { outcome, usage, .. } = plugin
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object)),
        )
        .await;
    assert_eq!(outcome, Outcome::Action(Action::Done), "{outcome}");
    // At least the guest's initial linear memory, and within its limit.
    assert!(usage.memory_peak >= 64 << 10, "{usage:?}");
    assert!(usage.memory_peak <= Limits::default().memory, "{usage:?}");
    let fuel = usage
        .fuel
        .expect("fuel is reported when the plugin has a budget");
    assert!(fuel > 0 && fuel < 5_000_000_000, "{usage:?}");

    let spinning = load(&rt, "infinite-loop").await;
    let object = target("spin", "1");
    let CallReport { outcome, usage, .. } = spinning
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object)),
        )
        .await;
    assert_eq!(
        outcome,
        Outcome::Timeout(Budget::Fuel(5_000_000_000)),
        "{outcome}"
    );
    assert_eq!(usage.fuel, Some(5_000_000_000), "the whole budget was used");
}

/// A cluster whose reads never answer.
struct Stuck;

#[async_trait]
impl Cluster for Stuck {
    async fn get(&self, _: &ObjectRef) -> Result<String, ClusterError> {
        std::future::pending().await
    }
    async fn list(
        &self,
        _: &GroupVersionKind,
        _: Option<&str>,
        _: Option<&str>,
    ) -> Result<Vec<String>, ClusterError> {
        std::future::pending().await
    }
    async fn create(&self, _: ObjectText, _: &PluginName) -> Result<String, ClusterError> {
        std::future::pending().await
    }
    async fn apply(&self, _: ObjectText, _: &PluginName) -> Result<String, ClusterError> {
        std::future::pending().await
    }
    async fn patch(
        &self,
        _: &ObjectRef,
        _: Patch<Json>,
        _: &PluginName,
    ) -> Result<String, ClusterError> {
        std::future::pending().await
    }
    async fn patch_status(
        &self,
        _: &ObjectRef,
        _: Patch<Json>,
        _: &PluginName,
    ) -> Result<String, ClusterError> {
        std::future::pending().await
    }
    async fn delete(&self, _: &ObjectRef, _: &PluginName) -> Result<(), ClusterError> {
        std::future::pending().await
    }
    async fn emit_event(&self, _: Event, _: &PluginName) -> Result<(), ClusterError> {
        std::future::pending().await
    }
}

#[tokio::test]
async fn deadline_covers_time_spent_in_host_calls() {
    let limits = Limits {
        deadline: Duration::from_millis(300),
        ..Limits::default()
    };
    let rt = Runtime::new(RuntimeConfig::default().concurrency(2).limits(limits)).expect("runtime");
    let plugin = load(&rt, "well-behaved").await;
    let outcome = plugin
        .call(
            Arc::new(Stuck),
            Call::reconcile(request(target("slow", "1"))),
        )
        .await
        .outcome;
    assert_eq!(
        outcome,
        Outcome::Timeout(Budget::WallClock(Duration::from_millis(300)))
    );
}

#[tokio::test]
async fn policy_confinement_denies_calls_outside_the_allowed_namespaces() {
    let rt = runtime();
    let options = LoadOptions {
        policy: Policy {
            namespaces: Some(["elsewhere".to_owned()].into()),
            ..Policy::default()
        },
        ..LoadOptions::default()
    };
    let plugin = rt
        .load_file(wasmop_test_guests::component("well-behaved"), options)
        .await
        .expect("loads");
    let object = target("a", "1");
    let cluster = seeded(vec![object.clone()]);
    let outcome = plugin
        .call(cluster.clone(), Call::reconcile(request(object)))
        .await
        .outcome;
    let Outcome::Denied(denial) = &outcome else {
        panic!("expected a denial, got {outcome}");
    };
    assert_eq!(denial.verb, "get");
    assert!(
        outcome
            .to_string()
            .contains("confines the plugin to namespaces elsewhere"),
        "{outcome}"
    );
    assert!(
        cluster.writes().is_empty(),
        "a denied call never reaches the cluster"
    );
}

fn bytes_of(guest: &str) -> Vec<u8> {
    std::fs::read(wasmop_test_guests::component(guest)).expect("guest built")
}

#[tokio::test]
async fn bad_files_are_refused_with_the_reason() {
    // A tiered runtime refuses them alike: what Winch cannot compile goes to Cranelift.
    for rt in [runtime(), tiered_runtime(test_limits())] {
        let healthy = bytes_of("well-behaved");

        let truncated = healthy[..healthy.len() / 2].to_vec();
        let msg = load_err(&rt, truncated).await;
        assert!(msg.starts_with("truncated WebAssembly file"), "{msg}");

        // Deterministic noise (a linear congruential generator), no wasm magic.
        let mut x: u32 = 12345;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (x >> 16) as u8
            })
            .collect();
        let msg = load_err(&rt, noise).await;
        assert!(msg.contains("not a WebAssembly file"), "{msg}");

        let core = wat::parse_str("(module (func (export \"run\")))").expect("wat");
        let msg = load_err(&rt, core).await;
        assert!(
            msg.contains("a core WebAssembly module, not a component"),
            "{msg}"
        );

        let msg = load_err(&rt, bytes_of("other-world")).await;
        assert!(
            msg.contains("not a wasmop plugin") && msg.contains("greet"),
            "{msg}"
        );

        let msg = load_err(&rt, bytes_of("newer-major")).await;
        assert!(
            msg.contains("wasmop:plugin@1.0.0") && msg.contains("wasmop:plugin@0.1.0"),
            "{msg}"
        );

        let msg = load_err(&rt, bytes_of("missing-export")).await;
        assert!(
            msg.contains("export is incomplete") && msg.contains("cleanup"),
            "{msg}"
        );

        let msg = load_err(&rt, bytes_of("extra-import")).await;
        assert!(msg.contains("imports") && msg.contains("extra"), "{msg}");

        // Well framed, but not a valid component inside.
        let invalid = b"\0asm\x0d\0\x01\0\x01\x03abc".to_vec();
        let msg = load_err(&rt, invalid).await;
        assert!(msg.starts_with("invalid WebAssembly component"), "{msg}");
    }
}

#[test]
fn newer_major_fixture_differs_from_the_contract_only_in_its_version() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let real = std::fs::read_to_string(format!("{root}/wit/plugin.wit")).expect("wit");
    let copy = std::fs::read_to_string(format!("{root}/tests/hostile/newer-major/wit/plugin.wit"))
        .expect("copy");
    let copy: String = copy
        .lines()
        .skip_while(|l| l.starts_with("// "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        copy.replace("wasmop:plugin@1.0.0", "wasmop:plugin@0.1.0"),
        real
    );
}

#[tokio::test]
async fn artefact_cache_hits_misses_and_rebuilds_corrupt_entries() {
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
    let second = load(&cached_runtime(), "well-behaved").await;
    assert!(second.load_stats().from_cache, "second load hits the cache");
    healthy_call(&second, "cached", "7").await;

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

#[tokio::test]
async fn a_memory_limit_above_the_runtimes_is_refused() {
    let rt = runtime();
    let options = LoadOptions {
        limits: Some(Limits {
            memory: 1 << 30,
            ..test_limits()
        }),
        ..LoadOptions::default()
    };
    let err = rt
        .load_file(wasmop_test_guests::component("well-behaved"), options)
        .await
        .expect_err("refused");
    assert!(matches!(err, LoadError::Limits(_)), "{err}");
}

#[tokio::test]
async fn on_demand_allocator_runs_the_same_calls() {
    let rt = Runtime::new(
        RuntimeConfig::default()
            .allocator(AllocatorChoice::OnDemand)
            .limits(test_limits()),
    )
    .expect("runtime");
    assert!(matches!(
        rt.allocator(),
        wasmop_runtime::AllocatorMode::OnDemand { .. }
    ));
    let plugin = load(&rt, "well-behaved").await;
    healthy_call(&plugin, "od", "3").await;
}

/// The in-memory cluster, but every read waits this long first, as over a network (and so
/// that instances stay alive across an await and many exist at once).
struct Sluggish(Arc<MemoryCluster>, Duration);

#[async_trait]
impl Cluster for Sluggish {
    async fn get(&self, target: &ObjectRef) -> Result<String, ClusterError> {
        tokio::time::sleep(self.1).await;
        self.0.get(target).await
    }
    async fn list(
        &self,
        kind: &GroupVersionKind,
        ns: Option<&str>,
        sel: Option<&str>,
    ) -> Result<Vec<String>, ClusterError> {
        self.0.list(kind, ns, sel).await
    }
    async fn create(
        &self,
        object: ObjectText,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        self.0.create(object, plugin).await
    }
    async fn apply(&self, object: ObjectText, plugin: &PluginName) -> Result<String, ClusterError> {
        self.0.apply(object, plugin).await
    }
    async fn patch(
        &self,
        target: &ObjectRef,
        patch: Patch<Json>,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        self.0.patch(target, patch, plugin).await
    }
    async fn patch_status(
        &self,
        target: &ObjectRef,
        patch: Patch<Json>,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        self.0.patch_status(target, patch, plugin).await
    }
    async fn delete(&self, target: &ObjectRef, plugin: &PluginName) -> Result<(), ClusterError> {
        self.0.delete(target, plugin).await
    }
    async fn emit_event(&self, event: Event, plugin: &PluginName) -> Result<(), ClusterError> {
        self.0.emit_event(event, plugin).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_beyond_the_pool_size_wait_for_a_free_slot() {
    let rt = Runtime::new(
        RuntimeConfig::default()
            .concurrency(2)
            .limits(test_limits()),
    )
    .expect("runtime");
    let plugin = load(&rt, "well-behaved").await;
    let calls: Vec<_> = (0..12)
        .map(|i| {
            let plugin = plugin.clone();
            tokio::spawn(async move {
                let object = target(&format!("c{i}"), "1");
                let cluster = Sluggish(seeded(vec![object.clone()]), Duration::from_millis(20));
                plugin
                    .call(Arc::new(cluster), Call::reconcile(request(object)))
                    .await
                    .outcome
            })
        })
        .collect();
    for call in calls {
        let outcome = call.await.expect("task");
        assert_eq!(outcome, Outcome::Action(Action::Done), "{outcome}");
    }
}

#[tokio::test]
async fn settings_that_are_not_a_json_object_are_refused() {
    let rt = runtime();
    let options = LoadOptions {
        config: json!(["not", "a", "mapping"]),
        ..LoadOptions::default()
    };
    let err = rt
        .load_file(wasmop_test_guests::component("well-behaved"), options)
        .await
        .expect_err("refused");
    assert_eq!(
        err.to_string(),
        "the plugin's settings must be a JSON object, not an array"
    );
}

#[tokio::test]
async fn a_metered_runtime_runs_plugins_without_a_budget_and_stops_those_over_theirs() {
    let rt = Runtime::new(
        RuntimeConfig::default()
            .concurrency(2)
            .limits(test_limits())
            .consume_fuel(true),
    )
    .expect("runtime");
    // No budget: the store gets all the fuel there is, and no fuel is reported.
    let unlimited = load(&rt, "well-behaved").await;
    let object = target("unmetered", "1");
    let CallReport { outcome, usage, .. } = unlimited
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object)),
        )
        .await;
    assert_eq!(outcome, Outcome::Action(Action::Done), "{outcome}");
    assert_eq!(usage.fuel, None, "{usage:?}");

    let budget = |fuel| LoadOptions {
        limits: Some(Limits {
            fuel: Some(fuel),
            ..test_limits()
        }),
        ..LoadOptions::default()
    };
    let generous = unlimited
        .with_options(budget(5_000_000_000))
        .expect("budget");
    database_config_call(
        &load(&rt, "database-config")
            .await
            .with_options(budget(5_000_000_000))
            .expect("budget"),
        "metered",
        5432,
    )
    .await;
    let object = target("generous", "2");
    let CallReport { outcome, usage, .. } = generous
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object)),
        )
        .await;
    assert_eq!(outcome, Outcome::Action(Action::Done), "{outcome}");
    assert!(usage.fuel.is_some_and(|f| f > 0), "{usage:?}");

    let tiny = unlimited.with_options(budget(1000)).expect("budget");
    let object = target("tiny", "3");
    let outcome = tiny
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object)),
        )
        .await
        .outcome;
    assert_eq!(outcome, Outcome::Timeout(Budget::Fuel(1000)), "{outcome}");
}

#[tokio::test]
async fn a_fuel_budget_on_an_unmetered_runtime_is_refused_with_the_reason() {
    let rt = runtime();
    let options = LoadOptions {
        limits: Some(Limits {
            fuel: Some(1000),
            ..test_limits()
        }),
        ..LoadOptions::default()
    };
    let err = rt
        .load_file(wasmop_test_guests::component("well-behaved"), options)
        .await
        .expect_err("refused");
    assert!(err.to_string().contains("fuel"), "{err}");
}

/// Metering fuel changes the compiled code: artefacts of a metered engine fit only a metered
/// host, in the artefact cache (keyed by the engine) and in the precompiled directory (checked
/// by wasmtime), and a misfit is compiled instead of failing.
#[tokio::test]
async fn artefacts_of_a_metered_engine_load_only_on_a_metered_one() {
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

/// A cluster that holds every call at a gate until it opens, telling when the first one
/// arrives: a call held there is in flight.
struct Gated {
    inner: Arc<MemoryCluster>,
    open: tokio::sync::watch::Receiver<bool>,
    entered: Arc<tokio::sync::Notify>,
}

impl Gated {
    async fn pass(&self) {
        self.entered.notify_one();
        let mut open = self.open.clone();
        open.wait_for(|o| *o)
            .await
            .expect("the gate's sender lives");
    }
}

#[async_trait]
impl Cluster for Gated {
    async fn get(&self, target: &ObjectRef) -> Result<String, ClusterError> {
        self.pass().await;
        self.inner.get(target).await
    }
    async fn list(
        &self,
        kind: &GroupVersionKind,
        namespace: Option<&str>,
        selector: Option<&str>,
    ) -> Result<Vec<String>, ClusterError> {
        self.pass().await;
        self.inner.list(kind, namespace, selector).await
    }
    async fn create(
        &self,
        object: ObjectText,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        self.pass().await;
        self.inner.create(object, plugin).await
    }
    async fn apply(&self, object: ObjectText, plugin: &PluginName) -> Result<String, ClusterError> {
        self.pass().await;
        self.inner.apply(object, plugin).await
    }
    async fn patch(
        &self,
        target: &ObjectRef,
        patch: Patch<Json>,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        self.pass().await;
        self.inner.patch(target, patch, plugin).await
    }
    async fn patch_status(
        &self,
        target: &ObjectRef,
        patch: Patch<Json>,
        plugin: &PluginName,
    ) -> Result<String, ClusterError> {
        self.pass().await;
        self.inner.patch_status(target, patch, plugin).await
    }
    async fn delete(&self, target: &ObjectRef, plugin: &PluginName) -> Result<(), ClusterError> {
        self.pass().await;
        self.inner.delete(target, plugin).await
    }
    async fn emit_event(&self, event: Event, plugin: &PluginName) -> Result<(), ClusterError> {
        self.pass().await;
        self.inner.emit_event(event, plugin).await
    }
}

fn tiered_runtime(limits: Limits) -> Runtime {
    Runtime::new(
        RuntimeConfig::default()
            .concurrency(16)
            .limits(limits)
            .tiered(true),
    )
    .expect("a tiered runtime starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiered_load_serves_on_winch_code_until_cranelift_code_of_the_same_digest_takes_over() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = RuntimeConfig::default()
        .concurrency(4)
        .limits(test_limits())
        .cache_dir(dir.path())
        .tiered(true);
    let rt = Runtime::new(config.clone()).expect("runtime");
    let plugin = load(&rt, "well-behaved").await;
    assert_eq!(plugin.load_stats().compiler, Compiler::Winch);
    assert!(!plugin.load_stats().from_cache);
    // The host's copy with the plugin's settings shares the code of the load.
    let configured = plugin
        .with_options(LoadOptions::default())
        .expect("same options");

    // A call in flight on the Winch code, held in its first host call.
    let object = target("in-flight", "1");
    let (open, gate) = tokio::sync::watch::channel(false);
    let entered = Arc::new(tokio::sync::Notify::new());
    let cluster = Arc::new(Gated {
        inner: seeded(vec![object.clone()]),
        open: gate,
        entered: Arc::clone(&entered),
    });
    let running = plugin.clone();
    let in_flight = tokio::spawn(async move {
        running
            .call(cluster, Call::reconcile(request(object)))
            .await
    });
    entered.notified().await;
    assert_eq!(
        rt.tiering().promoted,
        0,
        "the call took its code before Cranelift's was ready"
    );

    rt.tiering_settled().await;
    assert_eq!(
        rt.tiering(),
        TieringStats {
            pending: 0,
            promoted: 1,
            discarded: 0,
            failed: 0
        }
    );
    assert_eq!(plugin.compiler(), Compiler::Cranelift);
    assert_eq!(configured.compiler(), Compiler::Cranelift);
    assert_eq!(plugin.digest(), configured.digest(), "the same version");

    // The call in flight finishes on the code it started with.
    open.send(true).expect("the call waits at the gate");
    let report = in_flight.await.expect("the call's task");
    let (compiler, outcome) = (report.compiler(), report.outcome);
    assert!(outcome.is_success(), "{outcome}");
    assert_eq!(compiler, Compiler::Winch);
    // The next calls run on Cranelift code, and do the same work.
    let object = target("next", "2");
    let cluster = seeded(vec![object.clone()]);
    let report = configured
        .call(cluster, Call::reconcile(request(object)))
        .await;
    let (compiler, outcome) = (report.compiler(), report.outcome);
    assert!(outcome.is_success(), "{outcome}");
    assert_eq!(compiler, Compiler::Cranelift);
    healthy_call(&configured, "after", "3").await;

    // The background compilation wrote the artefact: the next load of these bytes takes it,
    // with no tiering.
    let restarted = Runtime::new(config).expect("runtime");
    let cached = load(&restarted, "well-behaved").await;
    assert!(cached.load_stats().from_cache);
    assert_eq!(cached.load_stats().compiler, Compiler::Cranelift);
    assert_eq!(cached.compiler(), Compiler::Cranelift);
    assert_eq!(restarted.tiering(), TieringStats::default());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_versions_late_cranelift_code_is_discarded() {
    let rt = tiered_runtime(test_limits());
    let old = load(&rt, "well-behaved").await;
    assert_eq!(old.compiler(), Compiler::Winch);
    let old_digest = old.digest();
    // Replaced (and not kept) before its Cranelift compilation could end.
    drop(old);
    let new = load(&rt, "noop").await;
    assert_ne!(new.digest(), old_digest);
    rt.tiering_settled().await;
    assert_eq!(
        rt.tiering(),
        TieringStats {
            pending: 0,
            promoted: 1,
            discarded: 1,
            failed: 0
        }
    );
    // The new version got its own Cranelift code, and works.
    assert_eq!(new.compiler(), Compiler::Cranelift);
    let object = target("new", "1");
    let report = new
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object)),
        )
        .await;
    let (compiler, outcome) = (report.compiler(), report.outcome);
    assert!(outcome.is_success(), "{outcome}");
    assert_eq!(compiler, Compiler::Cranelift);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_plugins_end_in_their_typed_outcomes_on_the_winch_code_of_a_tiered_load() {
    let rt = tiered_runtime(test_limits());
    // The largest guest first: its background compilation keeps the hostile ones' queued
    // behind it while their calls start on Winch code.
    let example = load(&rt, "database-config").await;
    let hostile = start_hostile(&rt).await;
    expect_hostile(hostile, Some(Compiler::Winch), "tiered load").await;
    rt.tiering_settled().await;
    database_config_call(&example, "tiered", 5432).await;
    assert_eq!(example.compiler(), Compiler::Cranelift);

    // Fuel on Winch code.
    let limits = Limits {
        fuel: Some(50_000_000),
        ..test_limits()
    };
    let metered = tiered_runtime(limits);
    let object = target("spin", "1");
    let report = load(&metered, "infinite-loop")
        .await
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object)),
        )
        .await;
    let (compiler, outcome) = (report.compiler(), report.outcome);
    assert_eq!(compiler, Compiler::Winch);
    assert_eq!(
        outcome,
        Outcome::Timeout(Budget::Fuel(50_000_000)),
        "{outcome}"
    );
}

/// A runtime that demotes calls to the low-priority lane after `after` of guest computing.
fn demoting(after: Duration, compiler: Compiler, concurrency: u32, limits: Limits) -> Runtime {
    Runtime::new(
        RuntimeConfig::default()
            .concurrency(concurrency)
            .limits(limits)
            .compiler(compiler)
            .demote_after(Some(after)),
    )
    .expect("a demoting runtime starts")
}

/// Waits (polling) until `rt` has `n` demoted calls running; a hang here is the failure.
async fn until_demoted_running(rt: &Runtime, n: usize) {
    while rt.demoted_running() != n {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spinning_call_is_demoted_and_still_times_out_with_its_usage_while_a_healthy_one_works() {
    // Both compilers: tiered loading runs Winch code through the same epoch callback.
    for compiler in [Compiler::Cranelift, Compiler::Winch] {
        let rt = demoting(Duration::from_millis(20), compiler, 16, test_limits());
        let healthy = load(&rt, "well-behaved").await;
        let spinning = load(&rt, "infinite-loop").await;
        let object = target("spin", "1");
        let cluster = seeded(vec![object.clone()]);
        let spin = tokio::spawn(async move {
            spinning
                .call(cluster, Call::reconcile(request(object)))
                .await
        });
        until_demoted_running(&rt, 1).await;
        // A healthy plugin called meanwhile completes correctly, and is not demoted.
        let mut calls = 0u32;
        while !spin.is_finished() || calls < 3 {
            calls += 1;
            healthy_call(&healthy, &format!("h{calls}"), &calls.to_string()).await;
        }
        let object = target("measured", "1");
        let CallReport { outcome, usage, .. } = healthy
            .call(
                seeded(vec![object.clone()]),
                Call::reconcile(request(object)),
            )
            .await;
        assert_eq!(outcome, Outcome::Action(Action::Done), "{outcome}");
        assert!(!usage.demoted, "a quick call stays where it is: {usage:?}");

        let CallReport { outcome, usage, .. } = spin.await.expect("the spinning call's task");
        expect_outcome("infinite-loop", &outcome);
        assert!(usage.demoted, "{compiler:?}: {usage:?}");
        assert!(
            usage.memory_peak >= 64 << 10,
            "usage still reported: {usage:?}"
        );
        assert_eq!(rt.demoted_running(), 0, "the lane has no task left");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_hostile_guest_keeps_its_typed_outcome_when_demoted_at_once() {
    // Demoted at the first slice of computing: the limits (memory, host calls and bytes,
    // output, grants, deadline) hold on the lane, and host calls made from there still work.
    let rt = demoting(
        Duration::from_millis(1),
        Compiler::Cranelift,
        16,
        test_limits(),
    );
    let hostile = start_hostile(&rt).await;
    expect_hostile(hostile, None, "demoted at once").await;
    healthy_call(&load(&rt, "well-behaved").await, "after", "done").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demoted_call_dropped_by_its_caller_stops_and_frees_its_slot() {
    // One instance slot, and a deadline far beyond the test: only cancelling frees the slot.
    let limits = Limits {
        deadline: Duration::from_secs(120),
        ..Limits::default()
    };
    let rt = demoting(Duration::from_millis(5), Compiler::Cranelift, 1, limits);
    let spinning = load(&rt, "infinite-loop").await;
    let healthy = load(&rt, "well-behaved").await;
    let object = target("spin", "1");
    let cluster = seeded(vec![object.clone()]);
    let spin = tokio::spawn(async move {
        spinning
            .call(cluster, Call::reconcile(request(object)))
            .await
            .outcome
    });
    until_demoted_running(&rt, 1).await;
    spin.abort();
    assert!(spin.await.expect_err("aborted").is_cancelled());
    until_demoted_running(&rt, 0).await;
    // The only slot is free again: a healthy call gets it (it would wait two minutes for the
    // spinning call's deadline otherwise).
    tokio::time::timeout(
        Duration::from_secs(60),
        healthy_call(&healthy, "after", "1"),
    )
    .await
    .expect("the cancelled call gave its slot back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_for_the_cluster_does_not_count_towards_demotion() {
    // 1000 reads of 2 ms each: seconds spent waiting, each read spanning epoch ticks, and
    // little computing between them. Counting the tick after each read would demote it.
    let limits = Limits {
        deadline: Duration::from_secs(60),
        ..Limits::default()
    };
    let rt = demoting(Duration::from_millis(50), Compiler::Cranelift, 2, limits);
    let flood = load(&rt, "host-call-flood").await;
    let object = target("victim", "1");
    let cluster = Arc::new(Sluggish(
        seeded(vec![object.clone()]),
        Duration::from_millis(2),
    ));
    let CallReport { outcome, usage, .. } =
        flood.call(cluster, Call::reconcile(request(object))).await;
    assert_eq!(
        outcome,
        Outcome::LimitExceeded(LimitKind::HostCalls(1000)),
        "{outcome}"
    );
    assert!(!usage.demoted, "{usage:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_whose_last_call_computed_long_starts_on_the_lane_until_a_call_ends_sooner() {
    let limits = Limits {
        deadline: Duration::from_millis(300),
        ..test_limits()
    };
    let rt = demoting(Duration::from_millis(20), Compiler::Cranelift, 4, limits);
    let spinning = load(&rt, "infinite-loop").await;
    assert!(
        !spinning.starts_demoted(),
        "a new version starts on the host"
    );
    let object = target("spin", "1");

    // Demoted while it runs; it computed long, so the plugin's next call starts on the lane.
    let CallReport { outcome, usage, .. } = spinning
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object.clone())),
        )
        .await;
    assert!(
        matches!(outcome, Outcome::Timeout(Budget::WallClock(_))),
        "{outcome}"
    );
    assert!(usage.demoted, "{usage:?}");
    assert!(spinning.starts_demoted(), "after a call that computed long");

    // Started on the lane: it keeps every limit there and still computes long.
    let CallReport { outcome, usage, .. } = spinning
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object.clone())),
        )
        .await;
    assert!(
        matches!(outcome, Outcome::Timeout(Budget::WallClock(_))),
        "{outcome}"
    );
    assert!(usage.demoted, "{usage:?}");
    assert!(spinning.starts_demoted());

    // Its `cleanup` returns at once: a call that ends sooner brings the plugin back to the
    // host's threads (this call itself ran on the lane, as it started demoted).
    let CallReport { outcome, usage, .. } = spinning
        .call(seeded(vec![object.clone()]), Call::cleanup(request(object)))
        .await;
    assert_eq!(outcome, Outcome::Action(Action::Done), "{outcome}");
    assert!(usage.demoted, "started on the lane: {usage:?}");
    assert!(!spinning.starts_demoted(), "after a call that ended sooner");
    assert_eq!(rt.demoted_running(), 0, "the lane has no task left");
}
