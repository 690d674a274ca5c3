//! The hostile Go plugin (`tests/go/hostile`) against the runtime: every attack ends in its
//! typed outcome while the Go `database-config` beside it, on the same runtime, keeps
//! reconciling correctly, during the attacks and after them.
//!
//! One component carries every attack, picked by the target object's name. The runtime
//! compiles with Winch here: the guarantees hold on either compiler (the Rust hostile guests
//! prove both), and a Go component (4 to 5 MB, most of it Go's runtime and standard library)
//! takes Cranelift tens of seconds in a debug build under load (the README's "Plugins in Go"
//! measures 25 s) where Winch takes a few; artefacts are cached under
//! `target/go-plugins/artefacts/hostile/`, so a warm run compiles nothing.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use wasmop_core::cluster::{GroupVersionKind, ObjectRef};
use wasmop_offline::memory::MemoryCluster;
use wasmop_runtime::{
    Action, AllocatorChoice, Budget, Call, CallReport, Compiler, Limits, LoadOptions, Outcome,
    Plugin, PluginErrorKind, Request, Runtime, RuntimeConfig,
};

/// Each attack (the target's name) the hostile plugin knows.
const ATTACKS: &[&str] = &[
    "infinite-loop",
    "memory-bomb",
    "garbage",
    "recursion",
    "wide-recursion",
    "panic",
    "nil-pointer",
    "index-out-of-range",
    "goroutine-panic",
    "goroutine-leak",
    "goroutine-hog",
    "goroutine-deadlock",
    "goexit",
    "os-exit",
    "os-exit-zero",
    "read-file",
    "write-file",
    "list-root",
    "connect",
    "resolve",
    "environ",
    "free-heap",
];

/// The plugin's source file as Go's `-trimpath` names it in a panic's frames.
const SOURCE: &str = "wasmop.dev/tests/hostile@v0.0.0/plugin.go:";

/// The plugin's package as Go names its functions.
const PACKAGE: &str = "wasmop.dev/tests/hostile.";

/// A retryable plugin error with `message`, exactly.
fn retryable(outcome: &Outcome, message: &str) -> bool {
    matches!(outcome, Outcome::PluginError { kind: PluginErrorKind::Retryable, message: m } if m.as_str() == message)
}

/// The SDK's recovered panic: a retryable plugin error `panic: <value>` followed by the
/// frames from the attack's function `frame` (innermost) out to the plugin's `Reconcile`,
/// each `<file>:<line> in <function>` in the plugin's source.
fn recovered_panic(outcome: &Outcome, value: &str, frame: &str) -> bool {
    let Outcome::PluginError {
        kind: PluginErrorKind::Retryable,
        message,
    } = outcome
    else {
        return false;
    };
    // The host escapes the message once for every place it is shown: newlines arrive as `\n`.
    let lines: Vec<&str> = message.as_str().split("\\n").collect();
    let [head, count, frames @ ..] = lines.as_slice() else {
        return false;
    };
    let in_plugin = |line: &str, function: &str| {
        line.strip_prefix("  ")
            .and_then(|l| l.strip_prefix(SOURCE))
            .and_then(|l| l.split_once(" in "))
            .is_some_and(|(at, f)| at.parse::<u32>().is_ok() && f == format!("{PACKAGE}{function}"))
    };
    *head == format!("panic: {value}")
        && *count == format!("goroutine (innermost {} frames):", frames.len())
        && frames.first().is_some_and(|l| in_plugin(l, frame))
        && frames
            .last()
            .is_some_and(|l| in_plugin(l, "Hostile.Reconcile"))
}

/// Whether the innermost frames of `backtrace` are `frames` (the names Go's linker writes
/// into the name section: its package paths with `/` as `_`).
fn begins_with(backtrace: &[String], frames: &[&str]) -> bool {
    backtrace.len() >= frames.len() && backtrace.iter().zip(frames).all(|(b, f)| b == f)
}

/// A trap with `message`, exactly, in `frames`.
fn trap(outcome: &Outcome, message: &str, frames: &[&str]) -> bool {
    matches!(outcome, Outcome::Trap { message: m, backtrace } if m == message && begins_with(backtrace, frames))
}

/// A trap where Go's runtime aborted (`runtime.abort` is wasm's `unreachable`; the runtime of
/// a `c-shared` build crashes rather than exits on a fatal error) after printing a goroutine
/// dump whose last line is a frame in the plugin's source, through `frames` innermost first.
fn go_abort_after_a_dump(outcome: &Outcome, frames: &[&str]) -> bool {
    let Outcome::Trap { message, backtrace } = outcome else {
        return false;
    };
    let last_line = message.strip_prefix(
        "unreachable code reached (a Rust panic or abort ends this way); last stderr line: ",
    );
    // `<file>:<line> +0x<pc offset>`: where the goroutine the dump ends with was created.
    last_line
        .and_then(|l| l.strip_prefix(SOURCE))
        .and_then(|l| l.split_once(" +0x"))
        .is_some_and(|(line, pc)| {
            line.parse::<u32>().is_ok() && u32::from_str_radix(pc, 16).is_ok()
        })
        && begins_with(backtrace, frames)
}

/// The innermost frames of Go's runtime ending the program from its scheduler: it found no
/// goroutine that can run (`checkdead`), a fatal error.
const DEADLOCK: &[&str] = &[
    "runtime.abort",
    "runtime.fatalthrow.func1",
    "runtime.systemstack",
    "runtime.fatalthrow",
    "runtime.fatal",
    "runtime.checkdead",
];

/// The innermost frames of `os.Exit` through WASI: the adapter's `proc_exit` calls
/// `wasi:cli/exit`, which ends the instance.
const EXIT: &[&str] = &[
    "wit-component:adapter:wasi_snapshot_preview1!wasi_snapshot_preview1::bindings::wasi::cli::exit::exit",
    "wit-component:adapter:wasi_snapshot_preview1!proc_exit",
    "wit-component:shim!adapt-wasi_snapshot_preview1-proc_exit",
    "runtime.exit",
    "syscall.Exit",
    "os.Exit",
];

/// What the call attacking with `name` must end in.
fn expected(name: &str, outcome: &Outcome) -> bool {
    let deadline = |o: &Outcome| matches!(o, Outcome::Timeout(Budget::WallClock(d)) if *d == Duration::from_secs(3));
    let out_of_memory =
        |o: &Outcome| matches!(o, Outcome::OutOfMemory { limit } if *limit == 64 << 20);
    let exit = |status: u8, function: &str| {
        let frames: Vec<&str> = EXIT.iter().copied().chain([function]).collect();
        trap(
            outcome,
            &format!("Exited with i32 exit status {status}"),
            &frames,
        )
    };
    match name {
        // The loop is stopped by the host's deadline.
        "infinite-loop" => deadline(outcome),
        // Memory Go's GC cannot free (every chunk kept reachable) ends at the memory cap.
        "memory-bomb" => out_of_memory(outcome),
        // Memory it can free does not: one and a half times the cap, dropped as it goes.
        "garbage" => *outcome == Outcome::Action(Action::Done),
        // Go keeps goroutine stacks in linear memory, but every Go call is a wasm call too:
        // small frames overflow the wasm stack while the goroutine's stack is still small...
        "recursion" => trap(
            outcome,
            "wasm stack overflow (unbounded recursion?)",
            &["wasmop.dev_tests_hostile.descend"],
        ),
        // ...and big ones grow the goroutine's stack (copied to twice its size each time)
        // into the memory cap first.
        "wide-recursion" => out_of_memory(outcome),
        // A panic on the reconcile's goroutine, the plugin's own or the runtime's, is
        // recovered by the SDK: a retryable error with the panic's message and frames.
        "panic" => recovered_panic(outcome, "hostile Go plugin panicked on purpose", "throw"),
        "nil-pointer" => recovered_panic(
            outcome,
            "runtime error: invalid memory address or nil pointer dereference",
            "dereference",
        ),
        "index-out-of-range" => recovered_panic(
            outcome,
            "runtime error: index out of range [18] with length 3",
            "index",
        ),
        // A panic on a goroutine of the plugin's own is beyond any recover of the SDK's: Go's
        // runtime prints it with the goroutine dump (the host logs the plugin's stderr) and
        // aborts, a trap.
        "goroutine-panic" => go_abort_after_a_dump(
            outcome,
            &[
                "runtime.abort",
                "runtime.fatalpanic",
                "runtime.gopanic",
                "wasmop.dev_tests_hostile.explodeInGoroutine",
            ],
        ),
        // Goroutines left behind never run: wasm has one thread and Go no preemption there,
        // so nothing runs them once the reconcile returns without blocking, and the instance
        // (with them) is dropped after the call.
        "goroutine-leak" => *outcome == Outcome::Action(Action::Done),
        // A spinning goroutine that gets the thread (the reconcile blocked or yielded) keeps
        // it: the deadline ends the call.
        "goroutine-hog" => deadline(outcome),
        // Waiting for a goroutine that never finishes, with nothing else to run: Go's
        // deadlock detector (it runs in a wasm `c-shared` build, being single-threaded).
        "goroutine-deadlock" => go_abort_after_a_dump(outcome, DEADLOCK),
        // Goexit on the reconcile's goroutine ends the only goroutine there is, which Go
        // reports in one line, no dump.
        "goexit" => trap(
            outcome,
            "unreachable code reached (a Rust panic or abort ends this way); last stderr line: \
             fatal error: no goroutines (main called runtime.Goexit) - deadlock!",
            DEADLOCK,
        ),
        // os.Exit ends the instance through WASI's exit, which carries only success or
        // failure: 3 arrives as 1, and even 0 ends the call as a trap, never as done.
        "os-exit" => exit(1, "wasmop.dev_tests_hostile.exit"),
        "os-exit-zero" => exit(0, "wasmop.dev_tests_hostile.exitZero"),
        // No preopened directory: every path resolves against none, for reading, writing
        // and listing (EBADF, in the words of Go's wasip1 errno table).
        "read-file" => retryable(outcome, "open /etc/passwd: Bad file number"),
        "write-file" => retryable(outcome, "open /tmp/wasmop-hostile: Bad file number"),
        "list-root" => retryable(outcome, "open /: Bad file number"),
        // No sockets: Go's net package on wasip1 is an in-process fake network, so a dial
        // finds no listener and a name lookup's query to the default resolver (there is no
        // /etc/resolv.conf) finds no peer; nothing reaches the host's network.
        "connect" => retryable(
            outcome,
            "dial tcp 127.0.0.1:6443: address 127.0.0.1:6443: connect: Connection refused",
        ),
        "resolve" => {
            matches!(outcome, Outcome::PluginError { kind: PluginErrorKind::Retryable, message }
            if message.as_str().starts_with("lookup kubernetes.default.svc on [::1]:53: write udp 127.0.0.1:")
                && message.as_str().ends_with("->[::1]:53: write: Connection reset by peer"))
        }
        // No environment: the plugin finds it empty (the host's own variables stay unseen).
        "environ" => retryable(outcome, "environment: []"),
        // No attack: the heap Go holds free as the reconcile starts. The pre-initialised
        // snapshot leaves at least 2 MiB (guest-sdk/go/headroom.go; the call has allocated
        // some of it by then), where a call allocates instead of growing the heap by a 4 MiB
        // arena and clearing its slack; left full, it had none free.
        "free-heap" => {
            matches!(outcome, Outcome::PluginError { kind: PluginErrorKind::Retryable, message }
            if message.as_str().strip_prefix("free heap: ").and_then(|m| m.strip_suffix(" bytes"))
                .and_then(|n| n.parse::<u64>().ok()).is_some_and(|n| n >= 1 << 20))
        }
        other => panic!("no expectation for {other}"),
    }
}

/// A short deadline keeps the loops quick; nothing asserts on durations.
fn limits() -> Limits {
    Limits {
        deadline: Duration::from_secs(3),
        ..Limits::default()
    }
}

fn runtime(cache: &Path) -> Runtime {
    Runtime::new(
        RuntimeConfig::default()
            // Every attack at once, and the healthy calls beside them.
            .concurrency(32)
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

/// One reconcile of the Go `database-config`, checked as [`reconcile_database`] does.
async fn healthy_call(plugin: &Plugin, name: &str, port: u16) {
    let _report = reconcile_database(plugin, name, port).await;
}

/// One reconcile of the Go `database-config`, checked to end in Done with its ConfigMap
/// applied and its status written; its report.
async fn reconcile_database(plugin: &Plugin, name: &str, port: u16) -> CallReport {
    let object = json!({
        "apiVersion": "demo.wasmop.dev/v1", "kind": "Database",
        "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}"), "generation": 1},
        "spec": {"engine": "postgres", "host": "db.shop.svc", "port": port, "replicas": 2}
    });
    let cluster = seeded(&object);
    let request = Request::for_object(object.clone()).expect("identifiable");
    let report = plugin.call(cluster.clone(), Call::reconcile(request)).await;
    assert_eq!(
        report.outcome,
        Outcome::Action(Action::Done),
        "{}",
        report.outcome
    );
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
    report
}

/// The initial size in bytes of the one linear memory a Go component defines (Go's).
fn initial_memory(component: &[u8]) -> u64 {
    let mut initial = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(component) {
        if let wasmparser::Payload::MemorySection(memories) = payload.expect("a valid component") {
            for memory in memories {
                initial.push(memory.expect("a memory type").initial);
            }
        }
    }
    assert_eq!(initial.len(), 1, "one memory, Go's: {initial:?}");
    initial[0] * (64 << 10)
}

/// A reconcile runs in the linear memory its instance starts with. The pre-initialised
/// snapshot leaves free heap (guest-sdk/go/headroom.go) and memory past it for the WASI
/// adapter, which sets itself up in every fresh instance (RESERVE in
/// guest-sdk/go/witpatch/changes.py). Growing, the call made the host make pages accessible,
/// and inaccessible again before the slot's next instance: three `mprotect` calls a
/// reconcile, until the reserve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_go_reconcile_runs_in_the_memory_its_instance_starts_with() {
    let wasm = wasmop_go_plugins::component("database-config");
    let initial = initial_memory(&std::fs::read(&wasm).expect("the component"));
    let rt = runtime(&wasmop_go_plugins::out_dir().join("artefacts/hostile"));
    let plugin = load(&rt, &wasm).await;
    for (name, port) in [("orders", 5432), ("billing", 3306)] {
        let report = reconcile_database(&plugin, name, port).await;
        assert_eq!(
            report.usage.memory_peak, initial,
            "{name}: the call grew linear memory past its initial {initial} bytes"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_go_plugins_end_in_their_typed_outcomes_beside_a_healthy_go_plugin() {
    let hostile_wasm = wasmop_go_plugins::hostile();
    let healthy_wasm = wasmop_go_plugins::component("database-config");
    let cache = wasmop_go_plugins::out_dir().join("artefacts/hostile");
    let rt = runtime(&cache);
    let hostile = load(&rt, &hostile_wasm).await;
    let healthy = load(&rt, &healthy_wasm).await;
    wasmop_go_plugins::prune_artefacts(
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
    // Every attack is checked before failing, so one run shows every unexpected outcome.
    let mut unexpected = Vec::new();
    for (name, handle) in attacks {
        let report = handle
            .await
            .unwrap_or_else(|e| panic!("the call attacking with {name} failed: {e}"));
        eprintln!("{name}: {:?}", report.outcome);
        if !expected(name, &report.outcome) {
            unexpected.push(format!("{name}: {:?} ({})", report.outcome, report.outcome));
        }
    }
    assert!(
        unexpected.is_empty(),
        "attacks that ended in an unexpected outcome:\n{}",
        unexpected.join("\n")
    );
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
