//! Runtime tests of the fairness and log rules with real hostile components (built from
//! `tests/hostile/*` by `wasmop-test-guests`) and the in-memory cluster: a plugin that traps
//! on every other call reaches its failure streak, every denied call is counted and logged
//! once per call, and nothing a plugin writes reaches a log line unescaped, in either format.
//! The controller's floor and rate limit are proven by `controller::runner`'s unit tests and
//! `host/tests/e2e/fairness.rs`.

#![allow(clippy::unwrap_used)]

use std::cell::RefCell;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use wasmop_controller::controller::streak::Streak;
use wasmop_core::plugin::PluginName;
use wasmop_core::plugin::text::is_unsafe;
use wasmop_offline::memory::{MemoryCluster, Write as Journal};
use wasmop_runtime::{
    Action, Call, CallReport, LimitKind, Limits, LoadOptions, Outcome, Plugin, PluginErrorKind,
    Request, Runtime, RuntimeConfig,
};

/// No demotion: a demoted call would log from the lane's threads, where the tests' captured
/// log (a thread's default subscriber) does not reach.
fn runtime() -> Runtime {
    let config = RuntimeConfig::default()
        .concurrency(4)
        .demote_after(None)
        .limits(Limits {
            deadline: Duration::from_secs(5),
            ..Limits::default()
        });
    Runtime::new(config).expect("runtime starts")
}

async fn load(rt: &Runtime, guest: &str) -> Plugin {
    rt.load_file(wasmop_test_guests::component(guest), LoadOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{guest} loads: {:#}", anyhow::Error::from(e)))
}

fn target(name: &str) -> Value {
    json!({
        "apiVersion": "wasmop.test/v1", "kind": "Target",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"value": "1"}
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

#[tokio::test]
async fn requeue_zero_asks_for_no_delay_at_all() {
    let rt = runtime();
    let plugin = load(&rt, "requeue-zero").await;
    for (name, ms) in [("spin", 0), ("spin-1ms", 1)] {
        let object = target(name);
        let outcome = plugin
            .call(
                seeded(vec![object.clone()]),
                Call::reconcile(request(object)),
            )
            .await
            .outcome;
        assert_eq!(
            outcome,
            Outcome::Action(Action::RequeueAfter(Duration::from_millis(ms))),
            "{name}"
        );
    }
}

/// Whether `outcome` is the failure `variant` of `trap-alternating` ends its even calls in.
fn between(variant: &str, outcome: &Outcome) -> bool {
    match variant {
        "deny" => matches!(outcome, Outcome::Denied(d) if d.kind == "core/Secret"),
        "breach" => matches!(outcome, Outcome::LimitExceeded(LimitKind::HostCalls(_))),
        "permanent" => matches!(
            outcome,
            Outcome::PluginError {
                kind: PluginErrorKind::Permanent,
                ..
            }
        ),
        _ => matches!(
            outcome,
            Outcome::PluginError {
                kind: PluginErrorKind::Retryable,
                ..
            }
        ),
    }
}

#[tokio::test]
async fn a_plugin_that_traps_every_other_call_reaches_its_failure_streak() {
    let rt = runtime();
    let plugin = load(&rt, "trap-alternating").await;
    for variant in ["error", "deny", "breach", "permanent"] {
        let object = target(&format!("alt-{variant}"));
        // One cluster per variant: the plugin keeps its call count there.
        let cluster = seeded(vec![object.clone()]);
        let (tx, mut failing) = mpsc::unbounded_channel();
        let streak = Streak::new(PluginName::new("trap-alternating").unwrap(), 3, tx);
        for call in 1..=6 {
            let outcome = plugin
                .call(cluster.clone(), Call::reconcile(request(object.clone())))
                .await
                .outcome;
            if call % 2 == 0 {
                assert!(
                    matches!(outcome, Outcome::Trap { .. }),
                    "{variant} call {call}: {outcome}"
                );
            } else {
                assert!(
                    between(variant, &outcome),
                    "{variant} call {call}: {outcome}"
                );
            }
            streak.record(plugin.digest(), &outcome);
            if call < 6 {
                assert!(
                    failing.try_recv().is_err(),
                    "{variant}: reported after {call} calls"
                );
            }
        }
        let report = failing
            .try_recv()
            .expect("three traps among the other failures");
        assert_eq!(report.failures, 3, "{variant}");
    }
}

/// Log output kept for one test thread.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn lines(&self) -> Vec<String> {
        String::from_utf8(self.0.lock().unwrap().clone())
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

thread_local! {
    /// Where this thread's log goes while [`logged`] runs: text, then JSON.
    static CAPTURE: RefCell<Option<(Captured, Captured)>> = const { RefCell::new(None) };
}

/// Writes into the current thread's capture, if any (else nowhere).
struct Sink(Option<Captured>);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(c) = &self.0 {
            c.0.lock().unwrap().extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The writer of one of the two formats.
struct ThreadWriter {
    json: bool,
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for ThreadWriter {
    type Writer = Sink;

    fn make_writer(&'a self) -> Sink {
        Sink(CAPTURE.with(|c| {
            c.borrow().as_ref().map(|(text, json)| {
                if self.json {
                    json.clone()
                } else {
                    text.clone()
                }
            })
        }))
    }
}

/// One process-wide subscriber that writes every event both as `wasmop run` writes text (no
/// colours: not a terminal) and as it writes JSON, at every level, into the capture of the
/// thread that logs. Process-wide rather than a default per test thread: tracing caches each
/// call site's interest, and a thread's own subscriber can miss events while other tests
/// run beside it without one.
fn init_logging() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        use tracing_subscriber::layer::SubscriberExt as _;
        let text = tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_writer(ThreadWriter { json: false });
        let json = tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .with_writer(ThreadWriter { json: true });
        let subscriber = tracing_subscriber::registry().with(text).with(json);
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
    });
}

/// What `f` logged on this thread, as text lines and as JSON lines. The calls run on this
/// thread: the tests' runtime is single-threaded and demotes no call.
async fn logged<T>(f: impl std::future::Future<Output = T>) -> (T, [Vec<String>; 2]) {
    init_logging();
    let (text, json) = (Captured::default(), Captured::default());
    CAPTURE.with(|c| *c.borrow_mut() = Some((text.clone(), json.clone())));
    let result = f.await;
    CAPTURE.with(|c| *c.borrow_mut() = None);
    (result, [text.lines(), json.lines()])
}

#[tokio::test]
async fn every_denied_call_is_counted_and_logged_once_per_call() {
    let rt = runtime();
    let plugin = load(&rt, "denial-flood").await;
    let variants = [
        ("flood", 50, 50),
        ("flood-mixed", 100, 25),
        ("flood-count-7", 7, 7),
    ];
    for (name, total, get) in variants {
        let object = target(name);
        let (CallReport { outcome, usage, .. }, [text, json]) = logged(async {
            plugin
                .call(
                    seeded(vec![object.clone()]),
                    Call::reconcile(request(object.clone())),
                )
                .await
        })
        .await;
        let Outcome::Denied(first) = &outcome else {
            panic!("{name}: {outcome}");
        };
        assert_eq!(first.verb, "get", "{name}: the first denial is named");
        assert_eq!(usage.denied.total(), total, "{name}");
        let by_verb: Vec<_> = usage.denied.by_verb().collect();
        assert!(by_verb.contains(&("get", get)), "{name}: {by_verb:?}");
        if name == "flood-mixed" {
            for verb in ["list", "delete", "emit-event"] {
                assert!(by_verb.contains(&(verb, 25)), "{verb}: {by_verb:?}");
            }
        }
        // (The outcome's own line says "made a denied host call".)
        let denied: Vec<_> = text
            .iter()
            .filter(|l| l.contains("wasmop_runtime::call: denied host call"))
            .collect();
        assert_eq!(denied.len(), 1, "{name}: one line per call: {text:#?}");
        assert!(
            denied[0].contains(&format!("more={}", total - 1)),
            "{name}: {}",
            denied[0]
        );
        let denied: Vec<Value> = json
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|l: &Value| l["fields"]["message"] == "denied host call")
            .collect();
        assert_eq!(denied.len(), 1, "{name}: {json:#?}");
        assert_eq!(denied[0]["fields"]["more"], total - 1, "{name}");
    }
}

/// The `log-injection` variants, each as a target name.
const INJECTIONS: [&str; 6] = [
    "inject-log",
    "inject-error",
    "inject-permanent",
    "inject-trap",
    "inject-print",
    "inject-deny",
];

/// `log` calls of `log-injection`'s default variant.
const LOG_CALLS: usize = 6;

#[tokio::test]
async fn a_plugins_event_text_is_escaped_before_it_leaves_the_host() {
    let rt = runtime();
    let plugin = load(&rt, "log-injection").await;
    let object = target("inject-event");
    let cluster = seeded(vec![object.clone()]);
    let outcome = plugin
        .call(cluster.clone(), Call::reconcile(request(object)))
        .await
        .outcome;
    assert_eq!(outcome, Outcome::Action(Action::Done), "{outcome}");
    let events: Vec<_> = cluster
        .writes()
        .into_iter()
        .filter_map(|w| match w {
            Journal::Event {
                reason,
                action,
                note,
                ..
            } => Some((reason, action, note)),
            _ => None,
        })
        .collect();
    assert_eq!(events.len(), 1, "{events:?}");
    let (reason, action, note) = &events[0];
    for (field, text, cap) in [
        ("reason", reason, 128),
        ("action", action, 128),
        ("note", note, 1024),
    ] {
        assert!(!text.chars().any(is_unsafe), "{field}: {text:?}");
        assert!(
            text.len() <= cap,
            "{field} within the API's cap: {}",
            text.len()
        );
    }
    assert!(note.contains(r"\u{202e}desrever"), "{note}");
}

#[tokio::test]
async fn nothing_a_plugin_writes_reaches_a_log_line_unescaped_in_either_format() {
    let rt = runtime();
    let plugin = load(&rt, "log-injection").await;
    for name in INJECTIONS {
        let object = target(name);
        let (outcome, logs) = logged(async {
            plugin
                .call(
                    seeded(vec![object.clone()]),
                    Call::reconcile(request(object.clone())),
                )
                .await
                .outcome
        })
        .await;
        // The outcome itself (which also becomes Events and `/status`) is escaped.
        let shown = outcome.to_string();
        assert!(!shown.chars().any(is_unsafe), "{name}: {shown:?}");
        if let Outcome::Trap { backtrace, .. } = &outcome {
            assert!(!backtrace.concat().chars().any(is_unsafe), "{backtrace:?}");
        }
        for (format, lines) in ["text", "json"].into_iter().zip(logs) {
            for line in &lines {
                assert!(
                    !line.chars().any(is_unsafe),
                    "{format} {name}: raw character in {line:?}"
                );
                let forged = line.starts_with("2026-12-01T00:00:00.000000Z")
                    || line.starts_with(r#"{"level":"ERROR","fields":{"message":"forged"#);
                assert!(!forged, "{format} {name}: a forged line {line:?}");
                if format == "json" {
                    // Every line is one whole JSON object: nothing broke out of its string.
                    let _: Value = serde_json::from_str(line)
                        .unwrap_or_else(|e| panic!("{format} {name}: {e}: {line:?}"));
                }
            }
            if name == "inject-log" {
                let marked = lines
                    .iter()
                    .filter(|l| l.contains("log-injection line"))
                    .count();
                assert_eq!(
                    marked, LOG_CALLS,
                    "{format}: one line per log call: {lines:#?}"
                );
                assert_eq!(outcome, Outcome::Action(Action::Done));
            }
            // (A host that refuses the deny variant's forged kind as invalid, before any
            // grant check, need not quote it back.)
            let quoted = name != "inject-deny" || matches!(outcome, Outcome::Denied(_));
            let escaped = lines.iter().any(|l| l.contains(r"\u{202e}desrever"));
            assert!(
                escaped || !quoted,
                "{format} {name}: the payload is shown escaped: {lines:#?}"
            );
        }
    }
}
