//! The hostile Python plugin (`tests/python/hostile`) against the runtime: every attack ends
//! in its typed outcome while the Python `database-config` beside it, on the same runtime,
//! keeps reconciling correctly, during the attacks and after them.
//!
//! One component carries every attack (a CPython component is ~19 MB), picked by the target
//! object's name. The runtime compiles with Winch here: the guarantees hold on either
//! compiler (the Rust hostile guests prove both), and Winch compiles the two CPython
//! components in a few seconds where Cranelift takes tens; artefacts are cached under
//! `target/python-plugins/artefacts/hostile/`, so a warm run compiles nothing.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use wasmop_core::cluster::{GroupVersionKind, ObjectRef};
use wasmop_offline::memory::MemoryCluster;
use wasmop_runtime::{
    Action, AllocatorChoice, Budget, Call, Compiler, Limits, LoadOptions, Outcome, Plugin,
    PluginErrorKind, Request, Runtime, RuntimeConfig,
};

/// Each attack (the target's name) the hostile plugin knows.
const ATTACKS: &[&str] = &[
    "infinite-loop",
    "memory-bomb",
    "recursion",
    "unbounded-recursion",
    "deep-repr",
    "exception",
    "exit",
    "os-exit",
    "read-file",
    "write-file",
    "list-root",
    "connect",
    "resolve",
    "environ",
];

/// A retryable plugin error whose message starts with the Python exception `head` and carries
/// the traceback down to the attack's function `frame` in the plugin's `app.py`.
fn python_exception(outcome: &Outcome, head: &str, frame: &str) -> bool {
    let Outcome::PluginError {
        kind: PluginErrorKind::Retryable,
        message,
    } = outcome
    else {
        return false;
    };
    // The host escapes the message once for every place it is shown: newlines arrive as `\n`.
    let message = message.as_str();
    message.starts_with(head)
        && message.contains("\\ntraceback (innermost ")
        && message.contains("/app.py:")
        && message.contains(&format!(" in {frame}"))
}

/// What the call attacking with `name` must end in.
fn expect_outcome(name: &str, outcome: &Outcome) {
    let text = outcome.to_string();
    let ok = match name {
        // The interpreter's loop is stopped by the host's deadline.
        "infinite-loop" => {
            matches!(outcome, Outcome::Timeout(Budget::WallClock(d)) if *d == Duration::from_secs(3))
                && text.contains("did not finish within its deadline of 3000 ms")
        }
        // Allocation, and Python recursion with its limit lifted (CPython keeps Python frames
        // on the heap), both end at the memory cap.
        "memory-bomb" | "unbounded-recursion" => {
            matches!(outcome, Outcome::OutOfMemory { limit } if *limit == 64 << 20)
                && text.contains("64 MiB")
        }
        // Python's own recursion limit is an exception, its traceback cut to the last frames.
        "recursion" => python_exception(
            outcome,
            "RecursionError: maximum recursion depth",
            "descend",
        ),
        // Recursion in C (repr of a deeply nested list) overflows the wasm stack: a trap.
        "deep-repr" => {
            matches!(outcome, Outcome::Trap { backtrace, .. } if backtrace.iter().any(|f| f.contains("list_repr")))
                && text.contains("wasm stack overflow")
        }
        "exception" => python_exception(
            outcome,
            "ValueError: hostile Python plugin raised on purpose",
            "throw",
        ),
        // `sys.exit` raises SystemExit, which the SDK catches like any other exception.
        "exit" => python_exception(outcome, "SystemExit: 3", "exit_process"),
        // `os._exit` ends the instance through WASI's exit: a trap, the instance discarded.
        "os-exit" => {
            matches!(outcome, Outcome::Trap { .. }) && text.contains("Exited with i32 exit status")
        }
        // No preopened directory: every path is missing, for reading, writing and listing.
        "read-file" => python_exception(
            outcome,
            "FileNotFoundError: [Errno 44] No such file or directory: '/etc/passwd'",
            "read_file",
        ),
        "write-file" => python_exception(
            outcome,
            "FileNotFoundError: [Errno 44] No such file or directory: '/tmp/wasmop-hostile'",
            "write_file",
        ),
        "list-root" => python_exception(
            outcome,
            "FileNotFoundError: [Errno 44] No such file or directory: '/'",
            "list_root",
        ),
        // No network: a socket cannot even be made, and a name cannot be looked up.
        "connect" => python_exception(outcome, "PermissionError: ", "connect"),
        "resolve" => python_exception(outcome, "gaierror: ", "resolve"),
        // No environment: the plugin finds it empty (the host's own variables stay unseen).
        "environ" => python_exception(outcome, "LookupError: environment: {}", "environ"),
        other => panic!("no expectation for {other}"),
    };
    assert!(
        ok,
        "the attack {name} ended in an unexpected outcome: {outcome:?} ({text})"
    );
}

/// A short deadline keeps the infinite loop quick; nothing asserts on durations.
fn limits() -> Limits {
    Limits {
        deadline: Duration::from_secs(3),
        ..Limits::default()
    }
}

fn runtime(cache: &Path) -> Runtime {
    Runtime::new(
        RuntimeConfig::default()
            .concurrency(16)
            .limits(limits())
            .allocator(AllocatorChoice::OnDemand)
            .compiler(Compiler::Winch)
            .cache_dir(cache),
    )
    .expect("the runtime starts")
}

async fn load(rt: &Runtime, component: &Path) -> Plugin {
    rt.load_file(component, LoadOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{} loads: {e}", component.display()))
}

fn seeded(object: &Value) -> Arc<MemoryCluster> {
    let cluster = Arc::new(MemoryCluster::new());
    cluster.seed(vec![object.clone()]).expect("seed");
    cluster
}

fn target(name: &str) -> Value {
    json!({
        "apiVersion": "wasmop.test/v1", "kind": "Target",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"value": "1"}
    })
}

/// One reconcile of the Python `database-config`, checked for its ConfigMap and status.
async fn healthy_call(plugin: &Plugin, name: &str, port: u16) {
    let object = json!({
        "apiVersion": "demo.wasmop.dev/v1", "kind": "Database",
        "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}"), "generation": 1},
        "spec": {"engine": "postgres", "host": "db.shop.svc", "port": port, "replicas": 2}
    });
    let cluster = seeded(&object);
    let request = Request::for_object(object.clone()).expect("identifiable");
    let outcome = plugin
        .call(cluster.clone(), Call::reconcile(request))
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
        .expect("the Database");
    assert_eq!(stored["status"]["observedGeneration"], 1, "{stored}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_python_plugins_end_in_their_typed_outcomes_beside_a_healthy_python_plugin() {
    let hostile_wasm = wasmop_python_plugins::hostile();
    let healthy_wasm = wasmop_python_plugins::component("database-config");
    let cache = wasmop_python_plugins::out_dir().join("artefacts/hostile");
    let rt = runtime(&cache);
    let hostile = load(&rt, &hostile_wasm).await;
    let healthy = load(&rt, &healthy_wasm).await;
    wasmop_python_plugins::prune_artefacts(
        &cache,
        &[&hostile.digest().to_string(), &healthy.digest().to_string()],
    );

    let attacks: Vec<_> = ATTACKS
        .iter()
        .map(|&name| {
            let plugin = hostile.clone();
            let object = target(name);
            let cluster = seeded(&object);
            let request = Request::for_object(object).expect("identifiable");
            (
                name,
                tokio::spawn(async move { plugin.call(cluster, Call::reconcile(request)).await }),
            )
        })
        .collect();
    let mut healthy_calls = 0u16;
    while attacks.iter().any(|(_, h)| !h.is_finished()) || healthy_calls < 3 {
        healthy_calls += 1;
        healthy_call(&healthy, &format!("h{healthy_calls}"), 5000 + healthy_calls).await;
    }
    for (name, handle) in attacks {
        let report = handle
            .await
            .unwrap_or_else(|e| panic!("the call attacking with {name} failed: {e}"));
        expect_outcome(name, &report.outcome);
    }
    // And afterwards: the hostile plugin's instances are gone, the healthy one unharmed, and
    // the hostile plugin itself still serves a harmless call.
    healthy_call(&healthy, "after", 5432).await;
    let object = target("harmless");
    let request = Request::for_object(object.clone()).expect("identifiable");
    let outcome = hostile
        .call(seeded(&object), Call::reconcile(request))
        .await
        .outcome;
    assert_eq!(outcome, Outcome::Action(Action::Done), "{outcome}");
}
