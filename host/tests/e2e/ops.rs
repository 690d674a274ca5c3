//! Operations end to end, on the real control plane with the host as the real binary: leader
//! election between hosts (only the leader writes; a standby takes over after a crash within
//! the lease duration plus a margin, and at once after a graceful shutdown), `/metrics` with
//! controller-runtime's names after a run, `/readyz` only after the caches sync, `wasmop
//! status`, and a SIGTERM in the middle of a burst that loses no object.

#![allow(clippy::unwrap_used)]

use crate::harness;

use std::time::Duration;

use crate::harness::{Host, PATIENCE, message, object_ref, test_kinds, wait_mirrored};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, PostParams};
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;
use wasmop_controller::leader::LeaderElection;
use wasmop_controller::leader::{self, Elector, LeaderError};
use wasmop_controller::metrics::Metrics;
use wasmop_testenv::TestEnv;

async fn create_target(env: &TestEnv, name: &str, value: &str) {
    env.apply_yaml(&format!(
        "apiVersion: wasmop.test/v1\nkind: Target\nmetadata:\n  name: {name}\nspec:\n  value: \"{value}\"\n"
    ))
    .await
    .expect("Target created");
}

/// Waits for the host's "reconcile succeeded" line for `name`: the mirror can appear before
/// the line is logged, so a one-shot look at the log right after it races under load.
async fn wait_reconciled(host: &mut Host, name: &str) {
    let suffix = format!("/{name}");
    host.wait_log(&format!("the reconcile of {name} to be logged"), |l| {
        object_ref(l).ends_with(&suffix) && message(l) == "reconcile succeeded"
    })
    .await;
}

fn any_reconcile(lines: &[Value]) -> bool {
    lines.iter().any(|l| message(l) == "reconcile succeeded")
}

fn is_leader(l: &Value) -> bool {
    message(l) == "became the leader"
}

/// controller-runtime's defaults; the e2e run proves them, not shortened ones.
const LEASE: Duration = Duration::from_secs(15);

fn elected(env: &TestEnv) -> String {
    format!(
        "resyncPeriod: 0s\nleaderElection: {{enabled: true, leaseDuration: 15s, renewDeadline: 10s, retryPeriod: 2s}}\nplugins:\n  well-behaved:\n    namespaces: [{}]\n",
        env.namespace()
    )
}

async fn wait_standby(host: &mut Host) {
    host.wait_log("the standby's caches to sync", |l| {
        message(l) == "plugin caches synced" && l["fields"]["leading"] == false
    })
    .await;
    let (code, body) = host.probe("/readyz").await;
    assert_eq!(code, 200, "a standby with warm caches is ready: {body}");
    assert!(body.contains("leadership: standby"), "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_leader_reconciles_and_a_standby_takes_over_after_a_graceful_stop_and_a_crash() {
    let env = TestEnv::start().await.unwrap();
    test_kinds(&env).await;
    let config = elected(&env);

    let mut a = Host::start(&env, &["well-behaved"], &config).await;
    a.wait_log("host a to lead", is_leader).await;
    let mut b = Host::start(&env, &["well-behaved"], &config).await;
    wait_standby(&mut b).await;

    create_target(&env, "one", "1").await;
    wait_mirrored(&env, "one", "1").await;
    wait_reconciled(&mut a, "one").await;
    assert!(
        !any_reconcile(&b.lines()),
        "the standby reconciled: {}",
        b.log_text()
    );
    assert!(
        !b.metrics().await.contains("wasmop_host_calls_total{"),
        "the standby made host calls:\n{}",
        b.metrics().await
    );
    assert_eq!(
        a.metric(r#"leader_election_master_status{name="wasmop-leader"}"#)
            .await,
        1.0
    );
    assert_eq!(
        b.metric(r#"leader_election_master_status{name="wasmop-leader"}"#)
            .await,
        0.0
    );

    // Graceful: A drains, releases the Lease and exits 0; B takes over well before the lease
    // could have expired (which would take at least LEASE after A's last renewal).
    a.terminate().await;
    let status = a.wait_exit().await;
    let stopped = Instant::now();
    assert!(
        status.success(),
        "SIGTERM exits 0, got {status}; log:\n{}",
        a.log_text()
    );
    assert!(
        a.lines()
            .iter()
            .any(|l| message(l) == "released the leader lease"),
        "{}",
        a.log_text()
    );
    b.wait_log("host b to lead", is_leader).await;
    let takeover = stopped.elapsed();
    eprintln!("takeover after a graceful shutdown: {takeover:?}");
    assert!(
        takeover < LEASE - Duration::from_secs(5),
        "after a release the standby takes over at its next retry, took {takeover:?}"
    );
    create_target(&env, "two", "2").await;
    wait_mirrored(&env, "two", "2").await;
    wait_reconciled(&mut b, "two").await;

    // Crash: B is killed without releasing; C waits for the lease to expire, no sooner.
    let mut c = Host::start(&env, &["well-behaved"], &config).await;
    wait_standby(&mut c).await;
    b.stop().await;
    let killed = Instant::now();
    c.wait_log("host c to lead", is_leader).await;
    let takeover = killed.elapsed();
    eprintln!("takeover after a crash: {takeover:?} (lease duration {LEASE:?})");
    // B renewed at most a retry period (2 s, plus the request's latency) before it died, so
    // its lease ran at least LEASE - 2 s more; a standby must not start before that (no split
    // brain; 3 s of margin for latency), and takes over within a retry period (with jitter)
    // of it, plus a margin for this loaded machine.
    assert!(
        takeover >= LEASE - Duration::from_secs(5),
        "the standby took over before the crashed leader's lease expired: {takeover:?}"
    );
    assert!(
        takeover <= LEASE + Duration::from_secs(20),
        "the standby took {takeover:?} to take over after a crash"
    );
    create_target(&env, "three", "3").await;
    wait_mirrored(&env, "three", "3").await;
    wait_reconciled(&mut c, "three").await;
    c.stop().await;
}

fn series(text: &str, prefix: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(prefix).and_then(|v| v.trim().parse().ok()))
        .unwrap_or_else(|| panic!("no `{prefix}` in /metrics:\n{text}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn readyz_waits_for_synced_caches_and_metrics_and_status_report_the_run() {
    let env = TestEnv::start().await.unwrap();
    test_kinds(&env).await;
    let config = format!(
        "resyncPeriod: 0s\nplugins:\n  well-behaved:\n    namespaces: [{ns}]\n  panic:\n    namespaces: [{ns}]\n",
        ns = env.namespace()
    );
    let mut host = Host::start(&env, &["well-behaved", "panic"], &config).await;
    let (code, body) = host.probe("/healthz").await;
    assert_eq!((code, body.as_str()), (200, "ok\n"));
    // Every answer before the first 200 is a 503 that says why; at the first 200, every
    // plugin's caches have synced (the log says so before readiness can flip).
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (code, body) = host.probe("/readyz").await;
        if code == 200 {
            assert_eq!(body, "ready\nleadership: disabled\n");
            let synced = host
                .lines()
                .iter()
                .filter(|l| message(l) == "plugin caches synced")
                .count();
            assert_eq!(
                synced,
                2,
                "ready before both plugins synced: {}",
                host.log_text()
            );
            break;
        }
        assert_eq!(code, 503, "{body}");
        assert!(body.starts_with("not ready: "), "{body}");
        assert!(
            Instant::now() < deadline,
            "never ready: {body}\n{}",
            host.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    create_target(&env, "m", "1").await;
    wait_mirrored(&env, "m", "1").await;
    // The plugin's own log line carries its name, and sits in the one reconcile span with
    // the plugin, its digest and the object.
    let line = host
        .wait_log("the plugin's log line", |l| {
            message(l) == "mirrored m" && l["fields"]["plugin"] == "well-behaved"
        })
        .await;
    assert_eq!(line["span"]["name"], "reconcile", "{line}");
    assert_eq!(line["span"]["plugin"], "well-behaved", "{line}");
    assert!(object_ref(&line).ends_with("/m"), "{line}");
    assert!(
        line["span"]["plugin.digest"]
            .as_str()
            .is_some_and(|d| d.len() == 12 && d.chars().all(|c| c.is_ascii_hexdigit())),
        "{line}"
    );
    host.wait_log("the panic plugin to trap", |l| {
        l["fields"]["outcome"] == "trap" && object_ref(l).ends_with("/m")
    })
    .await;
    // The mirrored child triggers a follow-up reconcile of its source: the snapshot below is
    // taken once the controller is idle again, so the gauge of busy workers reads 0.
    wait_idle(&host, "well-behaved").await;
    let text = host.metrics().await;
    let ok = r#"{controller="well-behaved"#;
    assert!(
        series(
            &text,
            &format!(r#"controller_runtime_reconcile_total{ok}",result="success"}}"#)
        ) >= 1.0
    );
    assert!(
        series(
            &text,
            &format!("controller_runtime_reconcile_time_seconds_count{ok}\"}}")
        ) >= 1.0
    );
    assert_eq!(
        series(
            &text,
            &format!("controller_runtime_max_concurrent_reconciles{ok}\"}}")
        ),
        4.0
    );
    assert_eq!(
        series(&text, &format!("controller_runtime_active_workers{ok}\"}}")),
        0.0
    );
    assert!(
        series(
            &text,
            r#"workqueue_work_duration_seconds_count{name="well-behaved"}"#
        ) >= 1.0
    );
    assert!(series(&text, r#"workqueue_adds_total{name="well-behaved"}"#) >= 1.0);
    assert!(
        series(
            &text,
            r#"workqueue_queue_duration_seconds_count{name="well-behaved"}"#
        ) >= 1.0
    );
    // Nothing is left waiting once every object converged (no leaked queue entries).
    series(&text, r#"workqueue_depth{name="well-behaved"}"#);
    let deadline = Instant::now() + PATIENCE;
    while host.metric(r#"workqueue_depth{name="well-behaved"}"#).await != 0.0 {
        assert!(Instant::now() < deadline, "{}", host.metrics().await);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for verb in ["get", "apply", "patch-status", "event"] {
        let calls = format!(
            r#"wasmop_host_calls_total{{plugin="well-behaved",verb="{verb}",outcome="ok"}}"#
        );
        assert!(series(&text, &calls) >= 1.0, "{calls}");
    }
    let bad = r#"{controller="panic"}"#;
    assert!(
        series(
            &text,
            &format!("controller_runtime_reconcile_panics_total{bad}")
        ) >= 1.0
    );
    assert!(
        series(
            &text,
            &format!("controller_runtime_reconcile_errors_total{bad}")
        ) >= 1.0
    );
    assert!(
        series(
            &text,
            r#"controller_runtime_reconcile_total{controller="panic",result="error"}"#
        ) >= 1.0
    );
    assert!(series(&text, r#"workqueue_retries_total{name="panic"}"#) >= 1.0);
    assert!(
        series(
            &text,
            r#"wasmop_plugin_aborts_total{plugin="panic",cause="trap"}"#
        ) >= 1.0
    );
    assert!(
        text.lines().any(|l| l
            .starts_with(r#"wasmop_plugin_info{plugin="well-behaved",version="0.1.0",digest=""#)
            && l.ends_with(" 1")),
        "{text}"
    );
    assert!(
        series(
            &text,
            r#"wasmop_plugin_load_seconds_count{plugin="well-behaved",from_cache="false"}"#
        ) >= 1.0
    );
    assert!(
        !text.contains("m-mirror") && !text.contains("\"m\""),
        "object names in labels:\n{text}"
    );

    // `wasmop status` reads the same host.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(["status", "--address", host.health_address()])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.starts_with("host: ready (leader election off)\n"),
        "{stdout}"
    );
    let row = |name: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(row("well-behaved").contains(" running "), "{stdout}");
    assert!(row("panic ").contains(" running "), "{stdout}");
    assert!(stdout.contains("last error of panic ("), "{stdout}");
    assert!(stdout.contains("the plugin trapped"), "{stdout}");
    host.stop().await;
}

const BURST: usize = 60;

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_during_a_burst_exits_cleanly_and_every_object_converges_after_restart() {
    let env = TestEnv::start().await.unwrap();
    test_kinds(&env).await;
    let config = format!(
        "resyncPeriod: 0s\nshutdownTimeout: 20s\nplugins:\n  well-behaved:\n    namespaces: [{}]\n    concurrency: 2\n",
        env.namespace()
    );
    let mut host = Host::start(&env, &["well-behaved"], &config).await;
    let docs: Vec<String> = (0..BURST)
        .map(|i| {
            format!("apiVersion: wasmop.test/v1\nkind: Target\nmetadata:\n  name: b{i:03}\nspec:\n  value: \"v{i}\"\n")
        })
        .collect();
    env.apply_yaml(&docs.join("---\n")).await.unwrap();
    harness::wait_partway(&env, BURST).await;
    host.terminate().await;
    let status = host.wait_exit().await;
    assert!(
        status.success(),
        "SIGTERM exits 0, got {status}; log:\n{}",
        host.log_text()
    );
    assert!(
        host.lines()
            .iter()
            .any(|l| message(l) == "shutdown complete"),
        "{}",
        host.log_text()
    );
    let done = harness::count_mirrors(&env).await;
    assert!(done < BURST, "nothing left for the restart to prove");
    // Events are written in the background: every one a finished reconcile queued was
    // written before the host exited (well-behaved logs `mirrored <name>` after its Event).
    let mirrored: Vec<String> = host
        .lines()
        .iter()
        .filter(|l| l["fields"]["plugin"] == "well-behaved")
        .filter_map(|l| message(l).strip_prefix("mirrored ").map(str::to_owned))
        .collect();
    assert!(!mirrored.is_empty(), "{}", host.log_text());
    let events: Api<Event> = Api::namespaced(env.client(), env.namespace());
    let written: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Mirrored"))
        .filter_map(|e| e.regarding.and_then(|r| r.name))
        .collect();
    for name in &mirrored {
        assert!(
            written.contains(name),
            "the Event of {name}'s reconcile was lost at shutdown; written: {written:?}"
        );
    }

    let host = Host::start(&env, &["well-behaved"], &config).await;
    for i in 0..BURST {
        wait_mirrored(&env, &format!("b{i:03}"), &format!("v{i}")).await;
    }
    host.stop().await;
}

fn lease_settings(
    env: &TestEnv,
    duration: Duration,
    deadline: Duration,
    retry: Duration,
) -> LeaderElection {
    LeaderElection {
        lease_name: "race".into(),
        lease_namespace: env.namespace().to_owned(),
        lease_duration: duration,
        renew_deadline: deadline,
        retry_period: retry,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn electors_racing_for_one_lease_never_both_win_and_a_release_frees_it() {
    let env = TestEnv::start().await.unwrap();
    let settings = lease_settings(
        &env,
        Duration::from_secs(15),
        Duration::from_secs(10),
        Duration::from_secs(2),
    );
    let mut electors: Vec<Elector> = (0..6)
        .map(|i| Elector::new(env.client(), settings.clone(), format!("host-{i}")))
        .collect();
    // All at once on a Lease that does not exist yet: one create wins, the others conflict.
    let won =
        futures::future::join_all(electors.iter_mut().map(|e| e.try_acquire_or_renew())).await;
    let winners: Vec<usize> = won
        .iter()
        .enumerate()
        .filter(|(_, r)| matches!(r, Ok(true)))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(winners.len(), 1, "{won:?}");
    let w = winners[0];
    // Again, now that it exists: the holder renews, nobody else takes it.
    let again =
        futures::future::join_all(electors.iter_mut().map(|e| e.try_acquire_or_renew())).await;
    for (i, r) in again.iter().enumerate() {
        assert_eq!(r.as_ref().ok(), Some(&(i == w)), "elector {i}: {r:?}");
    }
    electors[w].release().await.unwrap();
    let lease = Api::<Lease>::namespaced(env.client(), env.namespace())
        .get("race")
        .await
        .unwrap();
    assert_eq!(lease.spec.unwrap().holder_identity, None);
    let other = (w + 1) % electors.len();
    assert!(
        electors[other].try_acquire_or_renew().await.unwrap(),
        "a released Lease is free at once"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_leader_that_cannot_renew_reports_the_loss_within_its_deadline() {
    let env = TestEnv::start().await.unwrap();
    let settings = lease_settings(
        &env,
        Duration::from_secs(3),
        Duration::from_secs(2),
        Duration::from_millis(500),
    );
    let elector = Elector::new(env.client(), settings, "leader".into());
    let (leading_tx, mut leading) = watch::channel(false);
    let (_release, released) = watch::channel(false);
    let run = tokio::spawn(leader::run(elector, leading_tx, released, Metrics::new()));
    tokio::time::timeout(PATIENCE, leading.wait_for(|l| *l))
        .await
        .unwrap()
        .unwrap();
    // Another writer takes the Lease (as after a network partition): the leader's renewals
    // now find another holder whose record just changed.
    let api = Api::<Lease>::namespaced(env.client(), env.namespace());
    let mut lease = api.get("race").await.unwrap();
    let spec = lease.spec.as_mut().unwrap();
    spec.holder_identity = Some("usurper".into());
    spec.lease_duration_seconds = Some(60);
    api.replace("race", &PostParams::default(), &lease)
        .await
        .unwrap();
    let taken = Instant::now();
    let result = tokio::time::timeout(PATIENCE, run).await.unwrap().unwrap();
    let lost_after = taken.elapsed();
    eprintln!(
        "leadership loss reported {lost_after:?} after the Lease was taken (renew deadline 2s)"
    );
    assert!(
        matches!(result, Err(LeaderError::Lost { .. })),
        "{result:?}"
    );
    assert_eq!(
        result.unwrap_err().to_string(),
        format!(
            "leader election lost: the Lease {}/race was not renewed within 2000 ms",
            env.namespace()
        )
    );
    assert!(!*leading.borrow(), "leadership is withdrawn with the loss");
    assert!(
        lost_after <= Duration::from_secs(2) + Duration::from_secs(10),
        "{lost_after:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_that_loses_its_lease_exits_non_zero_at_once() {
    let env = TestEnv::start().await.unwrap();
    test_kinds(&env).await;
    let config = format!(
        "resyncPeriod: 0s\nleaderElection: {{enabled: true, leaseDuration: 3s, renewDeadline: 2s, retryPeriod: 500ms}}\nplugins:\n  well-behaved:\n    namespaces: [{}]\n",
        env.namespace()
    );
    let mut host = Host::start(&env, &["well-behaved"], &config).await;
    host.wait_log("the host to lead", is_leader).await;
    create_target(&env, "before", "1").await;
    wait_mirrored(&env, "before", "1").await;
    // Another writer takes the Lease: the host can no longer renew it.
    let api = Api::<Lease>::namespaced(env.client(), env.namespace());
    let mut lease = api.get("wasmop-leader").await.unwrap();
    let spec = lease.spec.as_mut().unwrap();
    spec.holder_identity = Some("usurper".into());
    spec.lease_duration_seconds = Some(600);
    api.replace("wasmop-leader", &PostParams::default(), &lease)
        .await
        .unwrap();
    let taken = Instant::now();
    let status = host.wait_exit().await;
    eprintln!(
        "host exited {:?} after its Lease was taken",
        taken.elapsed()
    );
    assert_eq!(status.code(), Some(1), "{}", host.log_text());
    assert!(
        host.lines().iter().any(|l| message(l)
            == "leader election lost; exiting so that only the new leader reconciles"),
        "{}",
        host.log_text()
    );
}

/// Waits until no reconcile of `plugin` is running.
async fn wait_idle(host: &Host, plugin: &str) {
    let series = format!(r#"controller_runtime_active_workers{{controller="{plugin}"}}"#);
    let deadline = Instant::now() + PATIENCE;
    while host.metric(&series).await > 0.0 {
        assert!(
            Instant::now() < deadline,
            "{plugin} never went idle:\n{}",
            host.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn wait_busy(host: &Host, plugin: &str) {
    let series = format!(r#"controller_runtime_active_workers{{controller="{plugin}"}}"#);
    let deadline = Instant::now() + PATIENCE;
    while host.metric(&series).await < 1.0 {
        assert!(
            Instant::now() < deadline,
            "{plugin} never got busy:\n{}",
            host.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_cancels_reconciles_past_its_timeout_and_a_second_signal_exits_at_once() {
    let env = TestEnv::start().await.unwrap();
    test_kinds(&env).await;
    let config = |timeout: &str| {
        format!(
            "resyncPeriod: 0s\nshutdownTimeout: {timeout}\nplugins:\n  infinite-loop:\n    namespaces: [{}]\n    deadline: 5m\n",
            env.namespace()
        )
    };
    // A reconcile that never ends on its own: the drain gives it the timeout, then cancels it.
    let mut host = Host::start(&env, &["infinite-loop"], &config("2s")).await;
    create_target(&env, "spin", "1").await;
    wait_busy(&host, "infinite-loop").await;
    // Timed from before the signal is sent: the host's timeout starts when it receives it, so
    // an instant taken after `terminate` returns can be later than that (seen: 1.9993 s).
    let signalled = Instant::now();
    host.terminate().await;
    let status = host.wait_exit().await;
    let took = signalled.elapsed();
    eprintln!("exit after SIGTERM with a stuck reconcile and shutdownTimeout 2s: {took:?}");
    assert!(status.success(), "{status}; log:\n{}", host.log_text());
    assert!(
        took >= Duration::from_secs(2),
        "did not wait for the timeout: {took:?}"
    );
    assert!(
        host.lines()
            .iter()
            .any(|l| message(l)
                == "reconciles still running after the shutdown timeout were cancelled"),
        "{}",
        host.log_text()
    );

    // With a long timeout, a second signal does not wait for it.
    let mut host = Host::start(&env, &["infinite-loop"], &config("5m")).await;
    wait_busy(&host, "infinite-loop").await;
    host.terminate().await;
    host.wait_log("the shutdown to start", |l| {
        message(l) == "shutting down: no new reconciles, waiting for running ones"
    })
    .await;
    host.terminate().await;
    let signalled = Instant::now();
    let status = host.wait_exit().await;
    eprintln!("exit after a second SIGTERM: {:?}", signalled.elapsed());
    assert_eq!(status.code(), Some(130), "{}", host.log_text());
    assert!(
        host.lines()
            .iter()
            .any(|l| message(l) == "second shutdown signal: exiting at once"),
        "{}",
        host.log_text()
    );
}
