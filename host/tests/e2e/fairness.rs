//! Fairness and log safety of `wasmop run` on the real control plane, with the host as the
//! ServiceAccount of `deploy/rbac/rbac.yaml` and the hostile test plugins: objects that
//! requeue at once or re-trigger themselves are held to the requeue floor and the
//! per-object rate limit while a healthy plugin keeps reconciling; a plugin that traps on
//! every other call is reported as failing; every denied call is counted; a reconcile's own
//! writes do not reconcile it again while anyone else's do; and a plugin's log lines are one
//! line per call, escaped, in both log formats.
//!
//! Counts are bounds with generous slack, never timings.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use crate::harness::{
    self, Host, LogFormat, PATIENCE, PLUGINS_CONFIGMAP, confined, message, object_ref,
    plugins_configmap_source, put_plugins_configmap, targets, test_kinds, wait_mirrored,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;
use wasmop_core::plugin::text::is_unsafe;
use wasmop_testenv::TestEnv;

use crate::database::{
    DATABASE_CRD, apply_database, apply_database_on, databases, managers, ready, wait_config,
    wait_ready,
};

/// Creates the Target `name`, for the plugin `plugin` (its primary selector) or for none.
async fn create_target(env: &TestEnv, name: &str, plugin: Option<&str>) {
    let labels = plugin
        .map(|p| format!("  labels: {{wasmop.test/plugin: {p}}}\n"))
        .unwrap_or_default();
    env.apply_yaml(&format!(
        "apiVersion: wasmop.test/v1\nkind: Target\nmetadata:\n  name: {name}\n{labels}spec:\n  value: \"1\"\n"
    ))
    .await
    .expect("Target created");
}

fn reconciles(plugin: &str, result: &str) -> String {
    format!(r#"controller_runtime_reconcile_total{{controller="{plugin}",result="{result}"}}"#)
}

/// All reconciles of `plugin`, whatever their result.
async fn all_reconciles(host: &Host, plugin: &str) -> f64 {
    let text = host.metrics().await;
    let prefix = format!(r#"controller_runtime_reconcile_total{{controller="{plugin}","#);
    text.lines()
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Waits until `check` holds for `host`'s metrics.
async fn wait_metrics(host: &Host, what: &str, check: impl Fn(&str) -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if check(&host.metrics().await) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}; metrics:\n{}\nlog:\n{}",
            host.metrics().await,
            host.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The value of `series` in a metrics text, 0 when absent.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0.0)
}

/// The defaults the bound below assumes (`deploy/config/wasmop.yaml`): a 1 s requeue floor,
/// and per object 10 reconciles at once, then one a second.
const FLOOR_S: f64 = 1.0;
const BURST: f64 = 10.0;

#[tokio::test(flavor = "multi_thread")]
async fn spinning_objects_are_held_to_the_floor_and_rate_limit_while_a_neighbour_reconciles() {
    let env = TestEnv::start().await.unwrap();
    test_kinds(&env).await;
    let plugins = ["requeue-zero", "self-trigger", "well-behaved"];
    let host = Host::start(&env, &plugins, &confined(&env, &plugins, "")).await;
    const SPINNERS: usize = 10;
    for i in 0..SPINNERS {
        // Half ask for 0 ms, half for 1 ms.
        let name = if i % 2 == 0 {
            format!("spin-{i}")
        } else {
            format!("spin-1ms-{i}")
        };
        create_target(&env, &name, Some("requeue-zero")).await;
    }
    let triggers = ["self-label", "self-annotation", "self-status"];
    for name in triggers {
        create_target(&env, name, Some("self-trigger")).await;
    }
    // Every object has been reconciled and is spinning.
    wait_metrics(&host, "every spinning object to reconcile", |m| {
        sample(m, &reconciles("requeue-zero", "requeue_after")) >= SPINNERS as f64
            && sample(m, &reconciles("self-trigger", "success")) >= triggers.len() as f64
    })
    .await;

    let (spins, triggered) = (
        all_reconciles(&host, "requeue-zero").await,
        all_reconciles(&host, "self-trigger").await,
    );
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let spins = all_reconciles(&host, "requeue-zero").await - spins;
    let triggered = all_reconciles(&host, "self-trigger").await - triggered;
    let window = started.elapsed().as_secs_f64();
    eprintln!(
        "in {window:.1} s: {spins} reconciles of {SPINNERS} requeuing objects, {triggered} of {} self-triggering ones",
        triggers.len()
    );

    // Before the floor: 8,516 reconciles a second over 10 objects. Now each object waits at
    // least the floor between reconciles: at most window / floor + 1 each (doubled: a bound).
    let spin_bound = 2.0 * SPINNERS as f64 * (window / FLOOR_S + 1.0);
    assert!(spins > 0.0, "the requeues still run");
    assert!(
        spins <= spin_bound,
        "{spins} reconciles of {SPINNERS} requeuing objects in {window:.1} s (bound {spin_bound})"
    );
    // Self-triggering objects: their burst, then one a second each (doubled).
    let trigger_bound = 2.0 * triggers.len() as f64 * (BURST + window + 1.0);
    assert!(
        triggered > 0.0,
        "the self-triggering objects still reconcile"
    );
    assert!(
        triggered <= trigger_bound,
        "{triggered} reconciles of {} self-triggering objects in {window:.1} s (bound {trigger_bound})",
        triggers.len()
    );
    let metrics = host.metrics().await;
    assert!(
        sample(
            &metrics,
            r#"wasmop_requeues_raised_total{plugin="requeue-zero"}"#
        ) >= 1.0,
        "{metrics}"
    );
    assert!(
        sample(
            &metrics,
            r#"wasmop_reconciles_throttled_total{plugin="self-trigger"}"#
        ) >= 1.0,
        "{metrics}"
    );

    // The healthy neighbour reconciles a new object meanwhile.
    create_target(&env, "neighbour", None).await;
    wait_mirrored(&env, "neighbour", "1").await;
    wait_mirrored(&env, "spin-0", "1").await;
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_that_traps_every_other_call_is_reported_as_failing() {
    let env = TestEnv::start().await.unwrap();
    test_kinds(&env).await;
    // Served from a ConfigMap, so the host's PluginFailing Event has an object to be about.
    let bytes = std::fs::read(wasmop_test_guests::component("trap-alternating")).unwrap();
    put_plugins_configmap(&env, vec![("trap-alternating.wasm".to_owned(), bytes)]).await;
    let config = confined(
        &env,
        &["trap-alternating"],
        "    failureThreshold: 3\n    rollback: true\n",
    );
    let source = plugins_configmap_source();
    let mut host = Host::start_with_sources(&env, &[], &[&source], &config).await;
    create_target(&env, "alt", Some("trap-alternating")).await;

    let line = host
        .wait_log("the failing version to be reported", |l| {
            message(l).contains("failed 3 reconciles in a row")
        })
        .await;
    assert!(
        message(&line).ends_with("it keeps running (no earlier version to roll back to)"),
        "{line}"
    );
    // Three traps, with the plugin's own errors between them: five calls at least.
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    let counter = configmaps.get("alt-calls").await.unwrap();
    let calls: u32 = counter.data.unwrap()["n"].parse().unwrap();
    assert!(calls >= 5, "{calls} calls");
    harness::wait_events(
        &env,
        "Warning PluginFailing Event on the plugins ConfigMap",
        |all| {
            all.iter().any(|e| {
                e.reason.as_deref() == Some("PluginFailing")
                    && e.type_.as_deref() == Some("Warning")
                    && harness::regarding(e) == Some(PLUGINS_CONFIGMAP)
            })
        },
    )
    .await;
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_denied_call_is_counted_and_logged_once_per_reconcile() {
    let env = TestEnv::start().await.unwrap();
    test_kinds(&env).await;
    let config = confined(&env, &["denial-flood"], "");
    let mut host = Host::start(&env, &["denial-flood"], &config).await;
    // 50 denied gets per reconcile, and 100 mixed denied calls.
    let variants = [("flood", 50u64), ("flood-mixed", 100)];
    for (name, _) in variants {
        create_target(&env, name, Some("denial-flood")).await;
    }
    wait_metrics(&host, "a few denied reconciles", |m| {
        sample(m, &reconciles("denial-flood", "error")) >= 4.0
    })
    .await;
    for (name, _) in variants {
        targets(&env)
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    // Each object's pending retry finds it gone: after that, nothing more reconciles it.
    for (name, _) in variants {
        host.wait_log("the retry to find the object gone", |l| {
            message(l) == "object gone before its reconcile"
                && l["fields"]["object"]
                    .as_str()
                    .is_some_and(|o| o.ends_with(&format!("/{name}")))
        })
        .await;
    }
    let lines = host.lines();
    let of = |name: &str, msg: &str| -> Vec<serde_json::Value> {
        lines
            .iter()
            .filter(|l| message(l) == msg)
            .filter(|l| {
                let object = l["fields"]["object"]
                    .as_str()
                    .unwrap_or_else(|| object_ref(l));
                object.ends_with(&format!("/{name}"))
            })
            .cloned()
            .collect()
    };
    let mut made = 0;
    let mut gets = 0;
    for (name, per_call) in variants {
        let calls = of(name, "reconcile failed; retrying with backoff").len() as u64;
        assert!(calls >= 1, "{name}");
        made += calls * per_call;
        gets += calls * if per_call == 50 { 50 } else { 25 };
        // One denial line per reconcile, with the count of the others.
        let denials = of(name, "denied host call");
        assert_eq!(denials.len() as u64, calls, "{name}: {denials:#?}");
        for line in denials {
            assert_eq!(line["fields"]["more"], per_call - 1, "{line}");
        }
    }
    let metrics = host.metrics().await;
    let denied = |verb: &str| {
        sample(
            &metrics,
            &format!(r#"wasmop_host_calls_denied_total{{plugin="denial-flood",verb="{verb}"}}"#),
        ) as u64
    };
    let total: u64 = ["get", "list", "delete", "emit-event"]
        .iter()
        .map(|v| denied(v))
        .sum();
    eprintln!("denied calls made {made}, counted {total}");
    assert_eq!(total, made, "every denied call counted:\n{metrics}");
    assert_eq!(denied("get"), gets, "{metrics}");
    host.stop().await;
}

/// The `log-injection` targets, one per variant.
const INJECTIONS: [&str; 6] = [
    "inject-log",
    "inject-error",
    "inject-permanent",
    "inject-trap",
    "inject-print",
    "inject-deny",
];

/// `log` calls of one `inject-log` reconcile that the harness's filter (`info,wasmop=debug`)
/// lets through: the plugin logs at info (twice), warn, error, debug and trace.
const LOGGED_CALLS: usize = 5;

#[tokio::test(flavor = "multi_thread")]
async fn plugin_text_is_one_escaped_line_per_log_call_in_text_and_json_logs() {
    for format in [LogFormat::Text, LogFormat::Json] {
        let env = TestEnv::start().await.unwrap();
        test_kinds(&env).await;
        let config = confined(&env, &["log-injection"], "");
        let host = Host::start_logging(&env, &["log-injection"], &[], &config, format).await;
        for name in INJECTIONS {
            create_target(&env, name, Some("log-injection")).await;
        }
        // inject-log and inject-print succeed; the four others fail at least once each.
        wait_metrics(&host, "every variant to run", |m| {
            sample(m, &reconciles("log-injection", "success")) >= 2.0
                && sample(m, &reconciles("log-injection", "error")) >= 4.0
        })
        .await;
        let text = host.log_text();
        // Only whole lines: the last one may still be being written.
        let mut lines: Vec<&str> = text.split('\n').collect();
        lines.pop();
        for line in &lines {
            if let Some(c) = line.chars().find(|c| is_unsafe(*c)) {
                panic!("{format:?}: raw {c:?} in the log line {line:?}");
            }
            let forged = line.starts_with("2026-12-01T00:00:00.000000Z")
                || line.starts_with(r#"{"level":"ERROR","fields":{"message":"forged"#);
            assert!(!forged, "{format:?}: a forged line {line:?}");
            if format == LogFormat::Json {
                let _: serde_json::Value = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("{format:?}: {e}: {line:?}"));
            }
        }
        // One line per `log` call: the marker once per call, never split across lines.
        let successes = lines
            .iter()
            .filter(|l| l.contains("reconcile succeeded") && l.contains("/inject-log"))
            .count();
        let marked = lines
            .iter()
            .filter(|l| l.contains("log-injection line"))
            .count();
        assert!(successes >= 1, "{format:?}:\n{text}");
        assert_eq!(marked, LOGGED_CALLS * successes, "{format:?}:\n{text}");
        for variant in ["/inject-log", "/inject-error", "/inject-permanent"] {
            assert!(
                lines
                    .iter()
                    .any(|l| l.contains(variant) && l.contains(r"\u{202e}desrever")),
                "{format:?}: {variant}'s text shown escaped:\n{text}"
            );
        }
        // What the plugin printed, and its panic message, shown escaped too.
        let printed = lines
            .iter()
            .filter(|l| l.contains("stream") && l.contains(r"\u{202e}desrever"))
            .count();
        assert!(printed >= 2, "{format:?}: printed lines:\n{text}");
        host.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ordinary_convergence_never_waits_for_the_rate_limit() {
    let env = TestEnv::start().await.unwrap();
    env.apply_yaml(DATABASE_CRD).await.unwrap();
    let plugins = ["database-config"];
    let host = Host::start(&env, &plugins, &confined(&env, &plugins, "")).await;
    // Created at once, then each edited twice in quick succession: the first reconcile, the
    // ConfigMap and status echoing back, and the follow-up edits.
    const N: u16 = 50;
    for i in 0..N {
        apply_database(&env, &format!("db-{i}"), "db.internal").await;
    }
    for port in [5433, 5434] {
        for i in 0..N {
            apply_database_on(&env, &format!("db-{i}"), "db.internal", port).await;
        }
    }
    let api = databases(&env);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let list = api.list(&ListParams::default()).await.unwrap().items;
        let converged = list
            .iter()
            .filter(|o| ready(o) && o.metadata.generation == Some(3))
            .count();
        if converged == usize::from(N) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{converged} of {N} converged; log:\n{}",
            host.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let metrics = host.metrics().await;
    let reconciled = all_reconciles(&host, "database-config").await;
    eprintln!("{N} Databases, 3 generations each: {reconciled} reconciles");
    // No object ever found its bucket empty: the limit held nothing back.
    assert_eq!(
        sample(
            &metrics,
            r#"wasmop_reconciles_throttled_total{plugin="database-config"}"#
        ),
        0.0,
        "{metrics}"
    );
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reconciles_own_writes_do_not_reconcile_it_again_and_anyone_elses_do() {
    let env = TestEnv::start().await.unwrap();
    env.apply_yaml(DATABASE_CRD).await.unwrap();
    let plugins = ["database-config"];
    let host = Host::start(&env, &plugins, &confined(&env, &plugins, "")).await;
    const N: u16 = 10;
    for i in 0..N {
        apply_database(&env, &format!("db-{i}"), "db.internal").await;
    }
    for i in 0..N {
        wait_ready(&env, &format!("db-{i}")).await;
        wait_config(&env, &format!("db-{i}"), "host", "db.internal").await;
    }
    // Each first reconcile creates its Database's ConfigMap, and the creation comes back
    // through the ConfigMap watch, mapped to its owner: that echo is skipped, whether it
    // comes before the write's reply (held back until the reply names its version) or after.
    let skipped = r#"wasmop_own_write_echoes_skipped_total{plugin="database-config"}"#;
    let n = f64::from(N);
    wait_metrics(&host, "the ConfigMaps' echoes", |m| sample(m, skipped) >= n).await;
    let metrics = host.metrics().await;
    let echoes = sample(&metrics, skipped);
    let reconciled = all_reconciles(&host, "database-config").await;
    eprintln!("{N} Databases: {reconciled} reconciles, {echoes} echoes skipped");
    assert_eq!((reconciled, echoes), (n, n), "{metrics}");

    // Anyone else's write to the ConfigMap reconciles its owner, which puts it right again.
    let api: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    let drift = json!({"data": {"host": "elsewhere.internal"}});
    api.patch(
        "db-0-config",
        &PatchParams::default(),
        &Patch::Merge(&drift),
    )
    .await
    .unwrap();
    let cm = wait_config(&env, "db-0", "host", "db.internal").await;
    let managers = managers(&cm);
    assert!(
        managers.contains(&"wasmop/database-config".to_owned()),
        "{managers:?}"
    );
    assert!(
        all_reconciles(&host, "database-config").await > reconciled,
        "the edit was put right without a reconcile?"
    );
    host.stop().await;
}
