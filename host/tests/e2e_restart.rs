//! The API server stops and starts again in the middle of a run over 200 objects: every
//! object still converges, with exactly one child each. Its own test binary (its own control
//! plane), because stopping the API server would disturb other tests.

#![allow(clippy::unwrap_used)]

mod harness;

use std::collections::BTreeMap;
use std::time::Duration;

use harness::{Host, fixture};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use wasmop_testenv::TestEnv;

const OBJECTS: usize = 200;

#[tokio::test(flavor = "multi_thread")]
async fn every_object_converges_across_an_apiserver_restart_without_duplicate_children() {
    let env = TestEnv::start().await.unwrap();
    env.apply_yaml(&fixture("target-crd.yaml")).await.unwrap();
    env.apply_yaml(&fixture("test-plugins-rbac.yaml"))
        .await
        .unwrap();
    let config = format!(
        "resyncPeriod: 0s\nplugins:\n  well-behaved:\n    namespaces: [{}]\n    concurrency: 8\n",
        env.namespace()
    );
    let mut docs = Vec::new();
    for i in 0..OBJECTS {
        docs.push(format!(
            "apiVersion: wasmop.test/v1\nkind: Target\nmetadata:\n  name: t{i:03}\nspec:\n  value: \"v{i}\"\n"
        ));
    }
    env.apply_yaml(&docs.join("---\n")).await.unwrap();
    // The host starts once every object exists, so its run over them is the whole 200 at
    // once: started before, it could keep up with the creation itself and be done before the
    // interruption could come mid-run.
    let host = Host::start(&env, &["well-behaved"], &config).await;

    // Mid-run: some children exist, not all.
    let api: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    harness::wait_partway(&env, OBJECTS).await;
    env.stop_apiserver().await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    env.start_apiserver().await.unwrap();

    let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
    loop {
        let list = api.list(&ListParams::default()).await.unwrap().items;
        let mut children: BTreeMap<String, usize> = BTreeMap::new();
        let mut converged = 0;
        for cm in &list {
            for owner in cm
                .metadata
                .owner_references
                .iter()
                .flatten()
                .filter(|o| o.kind == "Target")
            {
                *children.entry(owner.name.clone()).or_default() += 1;
            }
            let name = cm.metadata.name.as_deref().unwrap_or("");
            if let Some(target) = name.strip_suffix("-mirror") {
                let want = format!(
                    "v{}",
                    target.trim_start_matches('t').parse::<usize>().unwrap()
                );
                if cm.data.as_ref().and_then(|d| d.get("value")) == Some(&want) {
                    converged += 1;
                }
            }
        }
        assert!(
            children.values().all(|n| *n == 1),
            "duplicate children: {children:?}"
        );
        if converged == OBJECTS {
            assert_eq!(children.len(), OBJECTS);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{converged}/{OBJECTS} converged; log:\n{}",
            host.log_text()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    host.stop().await;
}
