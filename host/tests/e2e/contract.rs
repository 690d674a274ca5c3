//! Contract versions against the real API server: a plugin built against the frozen 0.1
//! contract reconciles beside one built against 0.2, each seeing its own contract (`conflict`
//! for an existing name in 0.1, `already-exists` in 0.2), and what 0.2 adds works on real
//! objects: `list-owned` answered from the owner index of the host's cache (no list request
//! reaches the API server), guarded status writes and delete preconditions refused by the API
//! server with `conflict`.

use crate::harness::{Host, PATIENCE, confined, targets, test_kinds};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::Value;
use wasmop_testenv::{TestEnv, wait_for_dyn};

async fn create_target(env: &TestEnv, name: &str, contract: &str) {
    env.apply_yaml(&format!(
        "apiVersion: wasmop.test/v1\nkind: Target\nmetadata:\n  name: {name}\n  labels:\n    \
         contract: {contract}\nspec:\n  value: \"1\"\n"
    ))
    .await
    .expect("Target created");
}

/// Waits until the Target `name`'s status satisfies `done`, and returns the status.
async fn status_when(
    env: &TestEnv,
    name: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let target = wait_for_dyn(&targets(env), name, what, PATIENCE, |t| {
        t.is_some_and(|t| done(&t.data["status"]))
    })
    .await
    .expect(what)
    .expect("the Target exists");
    target.data["status"].clone()
}

/// List requests for ConfigMaps in the test's namespace that reached the API server.
fn configmap_lists(env: &TestEnv) -> usize {
    env.audited(crate::harness::HOST_USER)
        .iter()
        .filter(|e| {
            e["verb"] == "list"
                && e["objectRef"]["resource"] == "configmaps"
                && e["objectRef"]["namespace"] == env.namespace()
        })
        .count()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_0_1_plugin_reconciles_beside_a_0_2_one_each_under_its_contract() {
    let env = TestEnv::start().await.unwrap();
    test_kinds(&env).await;
    let plugins = ["contract-0-1", "contract-0-2"];
    let host = Host::start(&env, &plugins, &confined(&env, &plugins, "")).await;

    create_target(&env, "old", "v01").await;
    let old = status_when(&env, "old", "the 0.1 plugin's report", |s| {
        s["contract"] == "0.1"
    })
    .await;
    assert!(
        old["create"] == "created" || old["create"] == "conflict",
        "{old}"
    );

    create_target(&env, "new", "v02").await;
    let new = status_when(&env, "new", "the 0.2 plugin's report", |s| {
        s["contract"] == "0.2"
    })
    .await;
    assert_eq!(new["stale"], "conflict", "a stale guard is refused: {new}");
    assert!(
        new.get("touched").is_none(),
        "and nothing of it applied: {new}"
    );
    let lists_before = configmap_lists(&env);

    // Another owned ConfigMap, and one that must survive the failed precondition. The new
    // owned object triggers a reconcile of its owner: the plugin's own ConfigMap exists by
    // then, so its create now reports `already-exists`.
    let uid = targets(&env)
        .get("new")
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    env.apply_yaml("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: new-gone\n")
        .await
        .expect("ConfigMap created");
    env.apply_yaml(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: new-extra\n  ownerReferences:\n  - \
         apiVersion: wasmop.test/v1\n    kind: Target\n    name: new\n    uid: {uid}\n"
    ))
    .await
    .expect("owned ConfigMap created");
    let new = status_when(&env, "new", "the 0.2 plugin to see both owned", |s| {
        s["owned"] == "new-extra,new-v02" && s["create"] == "already-exists"
    })
    .await;
    assert_eq!(new["precondition"], "conflict", "{new}");
    let config_maps: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    assert!(
        config_maps.get_opt("new-gone").await.unwrap().is_some(),
        "a failed uid precondition deletes nothing"
    );
    assert_eq!(
        configmap_lists(&env),
        lists_before,
        "list-owned was answered from the host's cache"
    );

    // The 0.1 plugin, reconciled again (a spec change), finds its ConfigMap and is told so
    // in 0.1's words.
    targets(&env)
        .patch(
            "old",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"spec": {"value": "2"}})),
        )
        .await
        .unwrap();
    status_when(&env, "old", "the 0.1 plugin's second report", |s| {
        s["create"] == "conflict"
    })
    .await;
    host.stop().await;
}
