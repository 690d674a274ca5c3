//! Admission reviews at the runtime's boundary: a plugin that exports `admission` beside
//! `reconciler` (contract 0.3) declares its webhooks, reviews through a fresh instance under
//! its limits, and every answer is checked before anyone shows it (`admission-probe`, whose
//! reviewed ConfigMap says what it does: see `tests/hostile/admission`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use wasmop_core::cluster::GroupVersionKind;
use wasmop_core::policy::Policy;
use wasmop_offline::memory::MemoryCluster;
use wasmop_runtime::{
    Budget, FailurePolicy, LoadOptions, Operation, Outcome, Plugin, Resource, Review, ReviewCall,
    ReviewKind, Runtime, UserInfo, Verdict,
};

use crate::support::{runtime, seeded};

async fn probe(rt: &Runtime) -> Plugin {
    let options = LoadOptions {
        policy: Policy::declared(),
        ..LoadOptions::default()
    };
    rt.load_file(wasmop_test_guests::component("admission"), options)
        .await
        .unwrap_or_else(|e| panic!("admission-probe loads: {:#}", anyhow::Error::from(e)))
}

fn config_map(what: &str, data: Value) -> Value {
    let mut data = data;
    data["do"] = json!(what);
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "probed", "namespace": "default",
                        "labels": {"probe.wasmop.dev/review": "true"},
                        "managedFields": [{"manager": "kubectl"}]},
           "data": data})
}

fn review(object: Value) -> Review {
    Review {
        uid: "uid-1".into(),
        kind: GroupVersionKind::gvk("", "v1", "ConfigMap"),
        resource: Resource {
            group: String::new(),
            version: "v1".into(),
            resource: "configmaps".into(),
        },
        sub_resource: None,
        operation: Operation::Create,
        name: Some("probed".into()),
        namespace: Some("default".into()),
        user_info: UserInfo {
            username: "alice".into(),
            ..UserInfo::default()
        },
        object: Some(object),
        old_object: None,
        dry_run: false,
    }
}

async fn run(plugin: &Plugin, kind: ReviewKind, what: &str) -> Result<Verdict, Outcome> {
    run_on(plugin, seeded(vec![]), kind, config_map(what, json!({}))).await
}

async fn run_on(
    plugin: &Plugin,
    cluster: Arc<MemoryCluster>,
    kind: ReviewKind,
    object: Value,
) -> Result<Verdict, Outcome> {
    plugin
        .review(cluster, ReviewCall::new(kind, review(object)))
        .await
        .result
}

#[tokio::test]
async fn a_plugin_declares_its_webhooks_and_reviews_beside_reconciling() {
    let _shared = crate::support::shared().await;
    let rt = runtime();
    let plugin = probe(&rt).await;
    assert_eq!(plugin.contract().to_string(), "0.3.0");
    let admission = plugin.admission().expect("it exports admission");
    let validating = admission.validating.as_ref().expect("validating");
    assert_eq!(validating.failure_policy, FailurePolicy::Fail);
    assert_eq!(validating.timeout, Duration::from_secs(5));
    assert_eq!(
        validating.object_selector.as_deref(),
        Some("probe.wasmop.dev/review=true")
    );
    assert!(validating.covers(
        &GroupVersionKind::gvk("", "v1", "ConfigMap"),
        None,
        Operation::Update
    ));
    let mutating = admission.mutating.as_ref().expect("mutating");
    assert_eq!(mutating.failure_policy, FailurePolicy::Ignore);

    let admitted = run(&plugin, ReviewKind::Validate, "admit").await;
    assert_eq!(
        admitted,
        Ok(Verdict::Allowed {
            warnings: vec![],
            patch: None
        })
    );
    // The mutation comes back as a JSON patch the host computed; managedFields, which the
    // plugin never saw, are not touched.
    let Ok(Verdict::Allowed {
        patch: Some(patch), ..
    }) = run(&plugin, ReviewKind::Mutate, "admit").await
    else {
        panic!("a mutation")
    };
    assert_eq!(
        serde_json::to_value(&patch).expect("json"),
        json!([{"op": "add", "path": "/metadata/labels/probe.wasmop.dev~1mutated",
                "value": "0.1.0"}])
    );
    // A plugin without admission has nothing to review with.
    let plain = crate::support::load(&rt, "well-behaved").await;
    assert!(plain.admission().is_none());
    let refused = run(&plain, ReviewKind::Validate, "admit").await;
    assert!(
        matches!(&refused, Err(Outcome::Trap { message, .. }) if message.contains("no validating webhook")),
        "{refused:?}"
    );
}

/// `required-labels` exports `admission` and no `reconciler` (world `admission-plugin`).
#[tokio::test]
async fn a_plugin_that_only_reviews_names_itself_and_has_nothing_to_reconcile() {
    let _shared = crate::support::shared().await;
    let rt = runtime();
    let options = LoadOptions {
        policy: Policy::declared(),
        config: json!({"labels": ["team"]}),
        ..LoadOptions::default()
    };
    let plugin = rt
        .load_file(wasmop_test_guests::component("required-labels"), options)
        .await
        .unwrap_or_else(|e| panic!("required-labels loads: {:#}", anyhow::Error::from(e)));
    assert_eq!(plugin.name().as_str(), "required-labels");
    assert_eq!(plugin.version(), "0.1.0");
    assert!(plugin.reconciler().is_none());
    let admission = plugin.admission().expect("it exports admission");
    assert!(admission.mutating.is_none());
    let deployment = GroupVersionKind::gvk("apps", "v1", "Deployment");
    assert!(admission.validating.as_ref().expect("validating").covers(
        &deployment,
        None,
        Operation::Create
    ));
    // It holds no kinds: nothing to read but what was granted (here, nothing).
    assert!(
        plugin
            .grants()
            .check(wasmop_core::plugin::Verb::Get, "apps", "Deployment", None)
            .is_err()
    );
    let mut review = review(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}}}));
    review.kind = deployment;
    let refused = plugin
        .review(
            seeded(vec![]),
            ReviewCall::new(ReviewKind::Validate, review),
        )
        .await
        .result;
    assert!(
        matches!(&refused, Ok(Verdict::Denied { message, code: 422, .. })
            if message.as_str() == "Deployment probed lacks the labels this cluster requires: team"),
        "{refused:?}"
    );
    // A reconcile has no export to call: a trap that says so, never a panic.
    let request = crate::support::request(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"}}));
    let report = plugin
        .call(seeded(vec![]), wasmop_runtime::Call::reconcile(request))
        .await;
    assert!(
        matches!(&report.outcome, Outcome::Trap { message, .. } if message.contains("does not export `reconciler`")),
        "{:?}",
        report.outcome
    );
}

#[tokio::test]
async fn a_denial_reaches_the_client_escaped_with_its_reason_and_code() {
    let _shared = crate::support::shared().await;
    let rt = runtime();
    let plugin = probe(&rt).await;
    let object = config_map("deny", json!({"message": "no\n\u{1b}[2Jway"}));
    let denied = run_on(&plugin, seeded(vec![]), ReviewKind::Validate, object).await;
    let Ok(Verdict::Denied {
        message,
        reason,
        code,
        ..
    }) = denied
    else {
        panic!("{denied:?}")
    };
    assert!(!message.as_str().contains(['\n', '\u{1b}']), "{message}");
    assert_eq!((reason.as_str(), code), ("Invalid", 422));
}

#[tokio::test]
async fn a_review_that_breaks_a_rule_fails_naming_the_rule() {
    let _shared = crate::support::shared().await;
    let rt = runtime();
    let plugin = probe(&rt).await;
    for (kind, what, rule) in [
        (ReviewKind::Validate, "bad-code", "HTTP code 200"),
        (ReviewKind::Validate, "bad-reason", "not a status reason"),
        (ReviewKind::Mutate, "rename", "changes `metadata.name`"),
    ] {
        let failed = run(&plugin, kind, what).await;
        assert!(
            matches!(&failed, Err(Outcome::Trap { message, .. }) if message.contains(rule)),
            "{what}: {failed:?}"
        );
    }
    let Ok(Verdict::Allowed { warnings, .. }) =
        run(&plugin, ReviewKind::Validate, "warnings").await
    else {
        panic!("warnings admit")
    };
    assert_eq!(warnings.len(), wasmop_runtime::admission::MAX_WARNINGS);
    assert!(warnings.iter().all(|w| !w.as_str().contains('\u{1b}')
        && w.as_str().len() <= wasmop_runtime::admission::MAX_WARNING_BYTES + 64));
}

#[tokio::test]
async fn a_review_may_read_but_never_write() {
    let _shared = crate::support::shared().await;
    let rt = runtime();
    let plugin = probe(&rt).await;
    let source = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "probe-source", "namespace": "default"},
                        "data": {"value": "read it"}});
    let read = run_on(
        &plugin,
        seeded(vec![source]),
        ReviewKind::Validate,
        config_map("read", json!({})),
    )
    .await;
    let Ok(Verdict::Allowed { warnings, .. }) = read else {
        panic!("{read:?}")
    };
    assert_eq!(warnings[0].as_str(), "read it");

    let cluster = seeded(vec![]);
    let wrote = run_on(
        &plugin,
        cluster.clone(),
        ReviewKind::Validate,
        config_map("write", json!({})),
    )
    .await;
    // The plugin carried on after its writes were refused, but a denied host call decides
    // the outcome: a review that tried to write never counts as an answer.
    let Err(Outcome::Denied(denial)) = &wrote else {
        panic!("{wrote:?}")
    };
    assert_eq!(denial.verb, "create");
    assert!(denial.reason.contains("may only read"), "{denial}");
    assert!(cluster.writes().is_empty(), "{:?}", cluster.writes());
}

#[tokio::test]
async fn a_review_that_loops_bombs_or_panics_fails_within_its_deadline() {
    let _shared = crate::support::shared().await;
    let rt = runtime();
    let plugin = probe(&rt).await;
    // A review's own deadline, shorter than the plugin's (3 s in these tests).
    let call = ReviewCall::new(ReviewKind::Validate, review(config_map("loop", json!({}))))
        .within(Duration::from_millis(300));
    let looped = plugin.review(seeded(vec![]), call).await.result;
    assert_eq!(
        looped,
        Err(Outcome::Timeout(Budget::WallClock(Duration::from_millis(
            300
        ))))
    );
    let bombed = run(&plugin, ReviewKind::Mutate, "bomb").await;
    assert!(
        matches!(bombed, Err(Outcome::OutOfMemory { .. })),
        "{bombed:?}"
    );
    let panicked = run(&plugin, ReviewKind::Validate, "panic").await;
    assert!(
        matches!(&panicked, Err(Outcome::Trap { message, .. }) if message.contains("the admission probe panics")),
        "{panicked:?}"
    );
    // And the next review of the same version is healthy.
    assert!(matches!(
        run(&plugin, ReviewKind::Validate, "admit").await,
        Ok(Verdict::Allowed { .. })
    ));
}
