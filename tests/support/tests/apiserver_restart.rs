//! A kube-rs watcher keeps working across an apiserver stop and restart, and the data survives
//! in etcd. In a test binary of its own: stopping the apiserver would break any test running
//! beside it on the same control plane.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::core::ObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio::sync::mpsc;
use wasmop_testenv::TestEnv;

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// Guards against a hang only: the watcher reconnects with backoff (up to tens of seconds).
const SEE_WITHIN: Duration = Duration::from_secs(180);

fn configmap(name: &str, state: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        data: Some([("state".to_owned(), state.to_owned())].into()),
        ..ConfigMap::default()
    }
}

/// Receives applied objects until one named `name` has `state`.
async fn see(seen: &mut mpsc::UnboundedReceiver<ConfigMap>, name: &str, state: &str) -> TestResult {
    let wanted = |cm: &ConfigMap| {
        cm.name_any() == name
            && cm
                .data
                .as_ref()
                .and_then(|d| d.get("state"))
                .map(String::as_str)
                == Some(state)
    };
    tokio::time::timeout(SEE_WITHIN, async {
        while let Some(cm) = seen.recv().await {
            if wanted(&cm) {
                return Ok(());
            }
        }
        Err("the watcher stopped")
    })
    .await
    .map_err(|_| format!("the watcher did not see {name} with state {state}"))??;
    Ok(())
}

#[tokio::test]
async fn a_watcher_keeps_working_across_an_apiserver_restart() -> TestResult {
    let env = TestEnv::start().await?;
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    let (sender, mut seen) = mpsc::unbounded_channel();
    let stream = watcher(configmaps.clone(), watcher::Config::default())
        .default_backoff()
        .applied_objects();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            // Errors while the apiserver is down are expected; the backoff retries.
            if let Ok(cm) = item
                && sender.send(cm).is_err()
            {
                return;
            }
        }
    });

    configmaps
        .create(&PostParams::default(), &configmap("before", "one"))
        .await?;
    see(&mut seen, "before", "one").await?;

    env.stop_apiserver().await?;
    let down = configmaps.list(&ListParams::default()).await;
    assert!(down.is_err(), "the apiserver still answers: {down:?}");
    env.start_apiserver().await?;

    let kept = configmaps.get("before").await?;
    assert_eq!(
        kept.data.and_then(|d| d.get("state").cloned()).as_deref(),
        Some("one"),
        "etcd lost the data"
    );
    configmaps
        .create(&PostParams::default(), &configmap("after", "two"))
        .await?;
    configmaps
        .patch(
            "before",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"state": "three"}})),
        )
        .await?;
    see(&mut seen, "after", "two").await?;
    see(&mut seen, "before", "three").await?;
    Ok(())
}
