//! A plugin whose CRD is installed after the host started: it waits, reports that it waits,
//! and starts working once the kind is served. Its own test binary (its own control plane),
//! because the other end-to-end tests install that CRD up front.

#![allow(clippy::unwrap_used)]

mod harness;

use harness::{Host, PATIENCE, fixture, message};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use wasmop_testenv::TestEnv;

#[tokio::test(flavor = "multi_thread")]
async fn plugin_whose_crd_is_installed_later_starts_working() {
    let env = TestEnv::start().await.unwrap();
    env.apply_yaml(&fixture("test-plugins-rbac.yaml"))
        .await
        .unwrap();
    let config = format!(
        "resyncPeriod: 0s\nplugins:\n  well-behaved:\n    namespaces: [{}]\n",
        env.namespace()
    );
    let mut host = Host::start(&env, &["well-behaved"], &config).await;
    host.wait_log("the plugin to report that it waits for its kind", |l| {
        message(l) == "plugin waits for its kinds to be served"
            && l["fields"]["plugin"] == "well-behaved"
    })
    .await;
    let waiting = host
        .metric(r#"wasmop_plugin_state{plugin="well-behaved",state="waiting-for-kinds"}"#)
        .await;
    assert_eq!(waiting, 1.0, "metrics:\n{}", host.metrics().await);

    env.apply_yaml(&fixture("target-crd.yaml")).await.unwrap();
    host.wait_log("the plugin to start", |l| {
        message(l) == "plugin controller starting" && l["fields"]["plugin"] == "well-behaved"
    })
    .await;
    env.apply_yaml("apiVersion: wasmop.test/v1\nkind: Target\nmetadata:\n  name: late\nspec:\n  value: \"ok\"\n")
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    env.wait_for(
        &api,
        "late-mirror",
        "to be made by the late plugin",
        PATIENCE,
        |cm| {
            cm.and_then(|c| c.data.as_ref())
                .and_then(|d| d.get("value"))
                .is_some_and(|v| v == "ok")
        },
    )
    .await
    .unwrap();
    let running = host
        .metric(r#"wasmop_plugin_state{plugin="well-behaved",state="running"}"#)
        .await;
    assert_eq!(running, 1.0);
    host.stop().await;
}
