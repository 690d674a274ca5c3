//! No object can poison a watch: Targets nested 200 levels deep and as deep as the API
//! server allows (10,000 levels in all) sit in a kind that plugins watch. The host stays
//! ready, every other object reconciles, the deep ones reconcile too, no log line carries
//! their content, and a host restarted with them present is ready. The `deep-object` guest
//! applies such objects itself and reads them back through the host. Its own test binary
//! (its own control plane): the deep objects would slow every other test's lists.

#![allow(clippy::unwrap_used)]

mod harness;

use std::time::{Duration, Instant};

use harness::{Host, PATIENCE, fixture};
use kube::api::PostParams;
use wasmop_testenv::TestEnv;

/// What the innermost level of the test's deep objects holds: it must never reach a log line.
const MARKER: &str = "poison-content-marker";
/// The same for the `deep-object` guest's (its `MARKER`).
const GUEST_MARKER: &str = "deep-object-content-marker";
/// The API server's limit on JSON nesting (encoding/json's and sigs.k8s.io/json's
/// `maxNestingDepth`): a Target `{…, "spec": {"deep": …}}` can hold `spec.deep` this deep less
/// two (the object and `spec`).
const API_SERVER_DEPTH: usize = 10_000;

/// `{"x":{"x":…"marker"…}}`, `levels` objects deep.
fn nested(levels: usize) -> String {
    let mut text = "{\"x\":".repeat(levels);
    text.push_str(&format!("\"{MARKER}\""));
    text.push_str(&"}".repeat(levels));
    text
}

/// The collection URL of Targets in the test's namespace.
fn targets(env: &TestEnv) -> String {
    format!(
        "/apis/wasmop.test/v1/namespaces/{}/targets",
        env.namespace()
    )
}

/// Creates a Target with a raw request (kube's typed client, like serde_yaml, stops at
/// serde_json's 128 levels), `spec.deep` nested `levels` deep (none: a flat Target).
async fn try_create_target(
    env: &TestEnv,
    name: &str,
    levels: Option<usize>,
) -> Result<String, kube::Error> {
    let deep = levels
        .map(|l| format!(",\"deep\":{}", nested(l)))
        .unwrap_or_default();
    let body = format!(
        r#"{{"apiVersion":"wasmop.test/v1","kind":"Target","metadata":{{"name":"{name}"}},"spec":{{"value":"v-{name}"{deep}}}}}"#
    );
    let request = kube::core::Request::new(targets(env))
        .create(&PostParams::default(), body.into_bytes())
        .unwrap();
    env.client().request_text(request).await
}

/// [`try_create_target`], which must succeed.
async fn create_target(env: &TestEnv, name: &str, levels: Option<usize>) {
    if let Err(e) = try_create_target(env, name, levels).await {
        panic!("the API server refused Target {name} ({levels:?} levels): {e}");
    }
}

/// The Target `name` as the API server sends it (text: it may be too deep to decode).
async fn target_text(env: &TestEnv, name: &str) -> String {
    let request = kube::core::Request::new(targets(env))
        .get(name, &Default::default())
        .unwrap();
    env.client().request_text(request).await.unwrap()
}

/// Waits until `name-mirror` holds `v-name`: the well-behaved plugin reconciled `name`.
async fn wait_reconciled(env: &TestEnv, host: &Host, name: &str) {
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(env.client(), env.namespace());
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let want = format!("v-{name}");
    loop {
        if let Some(cm) = api.get_opt(&format!("{name}-mirror")).await.unwrap()
            && cm.data.as_ref().and_then(|d| d.get("value")) == Some(&want)
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} was never reconciled; log:\n{}",
            host.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until `/readyz` answers 200, and returns how long that took from `since`.
async fn wait_ready(host: &Host, since: Instant) -> Duration {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let (code, body) = host.probe("/readyz").await;
        if code == 200 {
            return since.elapsed();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never ready: {body}\n{}",
            host.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the `deep-object` guest reported its target `name` read back at `depth`.
async fn wait_deep_object(env: &TestEnv, host: &Host, name: &str, depth: usize) {
    let want = format!("\"deepObject\":\"ok {depth}\"");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if target_text(env, name).await.contains(&want) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "deep-object never reported {name} at depth {depth}; log:\n{}",
            host.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn assert_no_content_logged(host: &Host) {
    let log = host.log_text();
    for marker in [MARKER, GUEST_MARKER] {
        let leaked: Vec<&str> = log.lines().filter(|l| l.contains(marker)).collect();
        assert!(leaked.is_empty(), "object content in the log: {leaked:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn deep_objects_neither_stop_the_watch_nor_readiness_nor_a_restart() {
    let env = TestEnv::start().await.unwrap();
    env.apply_yaml(&fixture("target-crd.yaml")).await.unwrap();
    env.apply_yaml(&fixture("test-plugins-rbac.yaml"))
        .await
        .unwrap();
    let config = format!(
        "resyncPeriod: 0s\nplugins:\n  well-behaved:\n    namespaces: [{ns}]\n  deep-object:\n    namespaces: [{ns}]\n",
        ns = env.namespace()
    );
    let plugins = ["well-behaved", "deep-object"];
    let started = Instant::now();
    let host = Host::start(&env, &plugins, &config).await;
    let first_start = wait_ready(&host, started).await;

    // The running host meets the deep objects in its watch: the deepest the API server
    // takes (one level more, it refuses).
    let deepest = API_SERVER_DEPTH - 2;
    let refused = try_create_target(&env, "too-deep", Some(deepest + 1)).await;
    assert!(
        refused.is_err(),
        "the API server took {} levels",
        API_SERVER_DEPTH + 1
    );
    create_target(&env, "deep-200", Some(200)).await;
    create_target(&env, "deep-max", Some(deepest)).await;
    assert!(target_text(&env, "deep-max").await.contains(MARKER));
    create_target(&env, "after", None).await;
    wait_reconciled(&env, &host, "after").await;
    // The deep objects reached the plugin like any other.
    wait_reconciled(&env, &host, "deep-200").await;
    wait_reconciled(&env, &host, "deep-max").await;
    // The guest's own: applied through the host, read back from its reply and the cache.
    create_target(&env, "deep-object-200", None).await;
    create_target(&env, &format!("deep-object-{deepest}"), None).await;
    wait_deep_object(&env, &host, "deep-object-200", 202).await;
    wait_deep_object(&env, &host, &format!("deep-object-{deepest}"), deepest + 2).await;
    let (code, body) = host.probe("/readyz").await;
    assert_eq!(code, 200, "{body}");
    // Nothing was undecodable: the deep objects were decoded, not skipped.
    assert_eq!(
        host.metric("wasmop_watch_objects_skipped_total").await,
        0.0,
        "{}",
        host.metrics().await
    );
    assert_no_content_logged(&host);
    host.stop().await;

    // A restart with every deep object present: ready, and still reconciling.
    let restarted = Instant::now();
    let host = Host::start(&env, &plugins, &config).await;
    let restart = wait_ready(&host, restarted).await;
    eprintln!(
        "poison e2e: ready {:.2} s after the first start, {:.2} s after the restart with the deep objects present",
        first_start.as_secs_f64(),
        restart.as_secs_f64()
    );
    create_target(&env, "after-restart", None).await;
    wait_reconciled(&env, &host, "after-restart").await;
    let (code, body) = host.probe("/readyz").await;
    assert_eq!(code, 200, "{body}");
    assert_no_content_logged(&host);
    host.stop().await;
}
