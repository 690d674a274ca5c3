//! Healthy calls: `reconcile` and `cleanup` of real plugins doing their writes, settings
//! reaching the plugin through `config.get` (and refused when not an object), and the
//! on-demand allocator running the same calls as the pooling one.

use std::time::Duration;

use serde_json::json;
use wasmop_runtime::{
    Action, AllocatorChoice, Call, Limits, LoadError, LoadOptions, Outcome, Runtime, RuntimeConfig,
};

use crate::support::{
    healthy_call, load, mirror_ref, request, runtime, seeded, target, test_limits,
};

#[tokio::test]
async fn healthy_plugin_applies_patches_status_and_emits_an_event() {
    let _shared = crate::support::shared().await;
    let rt = runtime();
    let plugin = load(&rt, "well-behaved").await;
    assert_eq!(plugin.name().as_str(), "well-behaved");
    assert_eq!(
        plugin
            .reconciler()
            .expect("it reconciles")
            .finalizer
            .as_deref(),
        Some("wasmop.test/cleanup")
    );
    healthy_call(&plugin, "a", "42").await;
}

#[tokio::test]
async fn settings_reach_the_plugin_through_config_get() {
    let _shared = crate::support::shared().await;
    let rt = runtime();
    let options = LoadOptions {
        config: json!({"requeueMs": 1500}),
        ..LoadOptions::default()
    };
    let plugin = rt
        .load_file(wasmop_test_guests::component("well-behaved"), options)
        .await
        .expect("loads");
    let object = target("a", "1");
    let outcome = plugin
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object)),
        )
        .await
        .outcome;
    assert_eq!(
        outcome,
        Outcome::Action(Action::RequeueAfter(Duration::from_millis(1500)))
    );
}

#[tokio::test]
async fn with_options_applies_settings_without_reloading() {
    let _shared = crate::support::shared().await;
    let rt = runtime();
    let plugin = load(&rt, "well-behaved").await;
    let limits = Limits {
        deadline: Duration::from_secs(2),
        ..test_limits()
    };
    let tuned = plugin
        .with_options(LoadOptions {
            config: json!({"requeueMs": 1500}),
            limits: Some(limits.clone()),
            ..LoadOptions::default()
        })
        .expect("same version, other options");
    assert_eq!(tuned.digest(), plugin.digest());
    assert_eq!(tuned.limits(), &limits);
    let object = target("a", "1");
    let outcome = tuned
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object)),
        )
        .await
        .outcome;
    assert_eq!(
        outcome,
        Outcome::Action(Action::RequeueAfter(Duration::from_millis(1500)))
    );
    // The original keeps its own options.
    healthy_call(&plugin, "b", "7").await;

    let refused = plugin.with_options(LoadOptions {
        config: json!(["not", "an", "object"]),
        ..LoadOptions::default()
    });
    assert!(
        matches!(refused, Err(LoadError::SettingsNotAnObject(_))),
        "settings that are not an object are refused"
    );
}

#[tokio::test]
async fn cleanup_runs_the_cleanup_export() {
    let _shared = crate::support::shared().await;
    let rt = runtime();
    let plugin = load(&rt, "well-behaved").await;
    let object = target("gone", "1");
    let cluster = seeded(vec![object.clone()]);
    assert!(
        plugin
            .call(cluster.clone(), Call::reconcile(request(object.clone())))
            .await
            .outcome
            .is_success()
    );
    assert!(cluster.object(&mirror_ref("gone")).is_some());
    assert!(
        plugin
            .call(cluster.clone(), Call::cleanup(request(object)))
            .await
            .outcome
            .is_success()
    );
    assert!(cluster.object(&mirror_ref("gone")).is_none());
}

#[tokio::test]
async fn on_demand_allocator_runs_the_same_calls() {
    let _shared = crate::support::shared().await;
    let rt = Runtime::new(
        RuntimeConfig::default()
            .allocator(AllocatorChoice::OnDemand)
            .limits(test_limits()),
    )
    .expect("runtime");
    assert!(matches!(
        rt.allocator(),
        wasmop_runtime::AllocatorMode::OnDemand { .. }
    ));
    let plugin = load(&rt, "well-behaved").await;
    healthy_call(&plugin, "od", "3").await;
}

#[tokio::test]
async fn settings_that_are_not_a_json_object_are_refused() {
    let _shared = crate::support::shared().await;
    let rt = runtime();
    let options = LoadOptions {
        config: json!(["not", "a", "mapping"]),
        ..LoadOptions::default()
    };
    let err = rt
        .load_file(wasmop_test_guests::component("well-behaved"), options)
        .await
        .expect_err("refused");
    assert_eq!(
        err.to_string(),
        "the plugin's settings must be a JSON object, not an array"
    );
}
