//! Admission webhooks served by plugins, through the real API server: the host registers a
//! ValidatingWebhookConfiguration and a MutatingWebhookConfiguration pointing at its HTTPS
//! server on loopback (a URL client config, the CA it issued in `caBundle`), and real creates
//! go through them.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::json;
use wasmop_testenv::TestEnv;

use crate::database::{DATABASE_CRD, databases};
use crate::harness::{Host, PATIENCE, confined, message};

mod serving;

/// A port free on loopback now (the host binds it a moment later).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A host config running `plugins` confined to the test's namespace (`plugin_yaml` under
/// each, as `confined` has it), with an `admission` section last: served on loopback at
/// `port`, reached by URL, every namespace but `kube-system` reviewed (the test's namespace
/// is also the host's). Lines indented by two spaces added after it are admission settings.
pub(crate) fn admission_config(
    env: &TestEnv,
    plugins: &[&str],
    plugin_yaml: &str,
    port: u16,
) -> String {
    format!(
        "{}admission:\n  address: 127.0.0.1:{port}\n  url: https://127.0.0.1:{port}\n  \
         excludeNamespaces: [kube-system]\n",
        confined(env, plugins, plugin_yaml)
    )
}

fn database(name: &str, host: &str, replicas: Option<u32>) -> DynamicObject {
    let mut spec = json!({"engine": "postgres", "host": host, "port": 5432});
    if let Some(r) = replicas {
        spec["replicas"] = r.into();
    }
    serde_json::from_value(json!({
        "apiVersion": "demo.wasmop.dev/v1",
        "kind": "Database",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap()
}

/// The API error of a refused create: (code, reason, message).
fn refusal(result: Result<DynamicObject, kube::Error>) -> (u16, String, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.reason, status.message),
        other => panic!("expected the API server to refuse the create, got {other:?}"),
    }
}

/// Waits until the API server calls the host's webhooks for Databases: a dry-run create
/// without `replicas` passes the schema (which requires it) only once the mutating webhook
/// defaults it, and one with a bad host is refused only once the validating webhook runs.
async fn wait_registered(env: &TestEnv) {
    let api = databases(env);
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let defaulted = api
            .create(&dry, &database("probe", "db.internal", None))
            .await;
        let refused = api
            .create(&dry, &database("probe", "not a host!", Some(1)))
            .await;
        if defaulted.is_ok() && refused.is_err() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the webhooks were never called: {defaulted:?} / {refused:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A `database-config` (in any language) serving its webhooks through the API server: a bad
/// Database refused with the Rust plugin's message, a Database without replicas defaulted.
pub(crate) async fn database_config_reviews(env: &TestEnv) {
    wait_registered(env).await;
    let api = databases(env);
    let (code, _, text) = refusal(
        api.create(
            &PostParams::default(),
            &database("bad", "not a host!", Some(1)),
        )
        .await,
    );
    assert_eq!(code, 422, "{text}");
    assert!(
        text.contains("Database bad is invalid: spec.host: Invalid value: \"not a host!\""),
        "{text}"
    );
    api.create(
        &PostParams::default(),
        &database("defaulted", "db.internal", None),
    )
    .await
    .unwrap();
    assert_eq!(
        api.get("defaulted").await.unwrap().data["spec"]["replicas"],
        1
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_refuses_a_bad_database_and_defaults_a_good_one_through_the_api_server() {
    let env = TestEnv::start().await.unwrap();
    env.apply_yaml(DATABASE_CRD).await.unwrap();
    let port = free_port();
    let config = admission_config(&env, &["database-config"], "", port);
    let mut host = Host::start(&env, &["database-config"], &config).await;
    host.wait_log("the webhook server", |l| {
        message(l) == "serving admission webhooks"
    })
    .await;
    // The configurations the host manages: one webhook for the plugin in each, pointing at
    // the host's URL, confined to the plugin's namespaces, with the plugin's policy.
    let name = format!("wasmop-{}", env.namespace());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(env.client());
    let v = env
        .wait_for(&validating, &name, "to be created", PATIENCE, |c| {
            c.is_some()
        })
        .await
        .unwrap()
        .unwrap();
    let labels = v.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels["app.kubernetes.io/managed-by"], "wasmop");
    let hooks = v.webhooks.unwrap();
    assert_eq!(hooks.len(), 1);
    let hook = &hooks[0];
    assert_eq!(hook.name, "database-config.plugins.wasmop.dev");
    assert_eq!(
        hook.client_config.url.as_deref(),
        Some(format!("https://127.0.0.1:{port}/validate/database-config").as_str())
    );
    assert!(hook.client_config.ca_bundle.is_some());
    assert_eq!(hook.failure_policy.as_deref(), Some("Fail"));
    assert_eq!(hook.side_effects, "None");
    assert_eq!(hook.timeout_seconds, Some(5));
    let rule = &hook.rules.as_ref().unwrap()[0];
    assert_eq!(
        rule.resources.as_deref(),
        Some(&["databases".to_owned()][..])
    );
    let selector = hook.namespace_selector.as_ref().unwrap();
    let confined_to = selector
        .match_expressions
        .iter()
        .flatten()
        .find(|e| e.operator == "In")
        .expect("confined to the plugin's namespaces");
    assert_eq!(
        confined_to.values.as_deref(),
        Some(&[env.namespace().to_owned()][..])
    );
    // The host writes the validating configuration, then the mutating one: wait for it too.
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(env.client());
    let m = env
        .wait_for(&mutating, &name, "to be created", PATIENCE, |c| c.is_some())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        m.webhooks.unwrap()[0].failure_policy.as_deref(),
        Some("Ignore")
    );

    wait_registered(&env).await;
    let api = databases(&env);
    // Refused with the plugin's own message, by the webhook named after the plugin.
    let (code, reason, text) = refusal(
        api.create(
            &PostParams::default(),
            &database("orders", "not a host!", Some(1)),
        )
        .await,
    );
    assert_eq!((code, reason.as_str()), (422, "Invalid"), "{text}");
    assert!(
        text.contains("database-config.plugins.wasmop.dev")
            && text
                .contains("Database orders is invalid: spec.host: Invalid value: \"not a host!\""),
        "{text}"
    );
    assert!(api.get_opt("orders").await.unwrap().is_none());
    // Defaulted by the mutating webhook: stored with replicas 1.
    api.create(
        &PostParams::default(),
        &database("orders", "db.internal", None),
    )
    .await
    .unwrap();
    let stored = api.get("orders").await.unwrap();
    assert_eq!(stored.data["spec"]["replicas"], 1);
    // Counted: the reviews, and the webhook requests by path and status.
    let denied = host
        .metric("wasmop_admission_reviews_total{plugin=\"database-config\",review=\"validate\",operation=\"CREATE\",outcome=\"denied\"}")
        .await;
    assert!(denied >= 2.0, "{denied}");
    let patched = host
        .metric("wasmop_admission_reviews_total{plugin=\"database-config\",review=\"mutate\",operation=\"CREATE\",outcome=\"patched\"}")
        .await;
    assert!(patched >= 1.0, "{patched}");
    let requests = host
        .metric("controller_runtime_webhook_requests_total{webhook=\"/validate/database-config\",code=\"200\"}")
        .await;
    assert!(requests >= 3.0, "{requests}");

    // The plugin leaves its source: its webhooks go, and with none left, the configurations.
    tokio::fs::remove_file(host.plugin_dir().join("database-config.wasm"))
        .await
        .unwrap();
    env.wait_for(&validating, &name, "to be deleted", PATIENCE, |c| {
        c.is_none()
    })
    .await
    .unwrap();
    env.wait_for(&mutating, &name, "to be deleted", PATIENCE, |c| c.is_none())
        .await
        .unwrap();
    host.stop().await;
}

fn probe(name: &str, what: &str, only: Option<&str>) -> ConfigMap {
    let mut data = json!({"do": what});
    if let Some(only) = only {
        data["in"] = only.into();
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"probe.wasmop.dev/review": "true"}},
        "data": data,
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_plugin_is_answered_by_its_failure_policy_and_its_neighbour_is_unaffected() {
    let env = TestEnv::start().await.unwrap();
    env.apply_yaml(DATABASE_CRD).await.unwrap();
    let port = free_port();
    // The probe's reconciler declares ConfigMap creates (its `write` review tries one).
    let config = admission_config(
        &env,
        &["admission-probe", "database-config"],
        "    memory: 16Mi\n    grants: [{kind: ConfigMap, verbs: [create]}]\n",
        port,
    );
    let host = Host::start(&env, &["admission", "database-config"], &config).await;
    wait_registered(&env).await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    let pp = PostParams::default();
    // The probe's validating webhook is registered too once an `admit` passes its mutation.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let dry = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        let cm = cms
            .create(&dry, &probe("ready", "admit", None))
            .await
            .unwrap();
        let labels = cm.metadata.labels.unwrap_or_default();
        if labels.contains_key("probe.wasmop.dev/mutated") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the probe's webhooks were never called; log:\n{}",
            host.log_text()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // Under `Fail` (the probe's validating webhook): refused, naming the plugin and the cause.
    // Meanwhile the neighbour's reviews go on: a Database is defaulted and stored while the
    // looping review runs to its deadline.
    let looping = {
        let cms = cms.clone();
        tokio::spawn(async move {
            cms.create(
                &PostParams::default(),
                &probe("spins", "loop", Some("validate")),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    databases(&env)
        .create(&pp, &database("beside", "db.internal", None))
        .await
        .expect("the neighbour's reviews are unaffected");
    // Not queued behind it: the looping review (4.5 s to its deadline) is still running.
    assert!(
        !looping.is_finished(),
        "the neighbour's create returned only after the looping review ended"
    );
    let stored = databases(&env).get("beside").await.unwrap();
    assert_eq!(stored.data["spec"]["replicas"], 1);
    let spun = looping.await.unwrap();
    let text = format!(
        "{:?}",
        spun.expect_err("a looping validator under Fail admits nothing")
    );
    assert!(
        text.contains("plugin admission-probe could not review this request")
            && text.contains("deadline"),
        "{text}"
    );
    for (what, cause) in [("bomb", "out of memory"), ("panic", "trapped")] {
        let refused = cms
            .create(&pp, &probe(&format!("{what}-fail"), what, Some("validate")))
            .await;
        let text = format!("{:?}", refused.expect_err("refused under Fail"));
        assert!(
            text.contains("plugin admission-probe could not review this request")
                && text.contains(cause),
            "{what}: {text}"
        );
    }
    // Under `Ignore` (its mutating webhook): admitted, unchanged.
    for what in ["loop", "bomb", "panic"] {
        let cm = cms
            .create(&pp, &probe(&format!("{what}-ignore"), what, Some("mutate")))
            .await
            .unwrap_or_else(|e| panic!("{what} under Ignore is admitted: {e}"));
        assert!(
            !cm.metadata
                .labels
                .unwrap_or_default()
                .contains_key("probe.wasmop.dev/mutated"),
            "{what}"
        );
    }
    let open = host
        .metric("wasmop_admission_reviews_total{plugin=\"admission-probe\",review=\"mutate\",operation=\"CREATE\",outcome=\"failed-open\"}")
        .await;
    assert!(open >= 3.0, "{open}");
    let closed = host
        .metric("wasmop_admission_reviews_total{plugin=\"admission-probe\",review=\"validate\",operation=\"CREATE\",outcome=\"failed-closed\"}")
        .await;
    assert!(closed >= 3.0, "{closed}");
    host.stop().await;
}

/// Creates reviewed ConfigMaps one after another until `stop` is set, and returns, in order,
/// the version label each was stored with and the creates that failed.
fn review_stream(
    cms: Api<ConfigMap>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<(Vec<String>, Vec<String>)> {
    tokio::spawn(async move {
        let (mut versions, mut failures) = (Vec::new(), Vec::new());
        let mut n = 0;
        while !*stop.borrow() {
            n += 1;
            match cms
                .create(
                    &PostParams::default(),
                    &probe(&format!("s-{n}"), "admit", None),
                )
                .await
            {
                Ok(cm) => versions.push(
                    cm.metadata
                        .labels
                        .unwrap_or_default()
                        .get("probe.wasmop.dev/mutated")
                        .cloned()
                        .unwrap_or_default(),
                ),
                Err(error) => failures.push(format!("s-{n}: {error}")),
            }
        }
        (versions, failures)
    })
}

/// Waits until the probe's mutating webhook answers (a dry-run create comes back labelled).
async fn wait_probe(cms: &Api<ConfigMap>, host: &Host) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    loop {
        let cm = cms
            .create(&dry, &probe("ready", "admit", None))
            .await
            .unwrap();
        if cm
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key("probe.wasmop.dev/mutated")
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the probe's webhooks were never called; log:\n{}",
            host.log_text()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_version_of_a_webhook_takes_over_without_a_restart_or_a_failed_review() {
    let env = TestEnv::start().await.unwrap();
    let port = free_port();
    let config = admission_config(
        &env,
        &["admission-probe"],
        "    grants: [{kind: ConfigMap, verbs: [create]}]\n",
        port,
    );
    let mut host = Host::start(&env, &["admission"], &config).await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    wait_probe(&cms, &host).await;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let stream = review_stream(cms.clone(), stopped);
    tokio::time::sleep(Duration::from_secs(2)).await;
    // As `kubectl cp` would: write aside, then rename over the running version.
    let dir = host.plugin_dir().to_owned();
    let v2 = std::fs::read(wasmop_test_guests::component("admission-v2")).unwrap();
    tokio::fs::write(dir.join(".admission.wasm.tmp"), v2)
        .await
        .unwrap();
    tokio::fs::rename(dir.join(".admission.wasm.tmp"), dir.join("admission.wasm"))
        .await
        .unwrap();
    host.wait_log("the new version to be swapped in", |l| {
        message(l) == "plugin version swapped"
    })
    .await;
    // Until the new version has answered a good number of reviews.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let answered = host
            .metric("wasmop_admission_reviews_total{plugin=\"admission-probe\",review=\"mutate\",operation=\"CREATE\",outcome=\"patched\"}")
            .await;
        let v2 = cms
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .filter(|c| {
                c.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("probe.wasmop.dev/mutated"))
                    == Some(&"0.2.0".to_owned())
            })
            .count();
        if v2 >= 20 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "version 0.2.0 answered {v2} reviews of {answered}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    stop.send(true).unwrap();
    let (versions, failures) = stream.await.unwrap();
    assert!(
        failures.is_empty(),
        "reviews failed across the reload: {failures:?}"
    );
    // Every create was reviewed, by version 1 until the swap and by version 2 after it.
    let first_v2 = versions
        .iter()
        .position(|v| v == "0.2.0")
        .expect("v2 answered");
    assert!(
        first_v2 > 0,
        "version 1 answered before the swap: {versions:?}"
    );
    assert!(
        versions[..first_v2].iter().all(|v| v == "0.1.0")
            && versions[first_v2..].iter().all(|v| v == "0.2.0"),
        "{versions:?}"
    );
    // One process throughout: it never exited, and it did not start again.
    let starts = host
        .lines()
        .iter()
        .filter(|l| message(l) == "wasmop run starting")
        .count();
    assert_eq!(starts, 1);
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_may_review_only_what_it_may_read() {
    let env = TestEnv::start().await.unwrap();
    let port = free_port();
    let config = admission_config(&env, &["review-secrets"], "", port);
    let mut host = Host::start(&env, &["review-secrets"], &config).await;
    let error = host.wait_rejection("the plugin to be refused").await;
    assert!(
        error.contains("plugin `review-secrets` asks to review core/Secret, which it may not read")
            && error.contains("plugins.review-secrets.grants"),
        "{error}"
    );
    // Nothing was registered for it.
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(env.client());
    assert!(
        validating
            .get_opt(&format!("wasmop-{}", env.namespace()))
            .await
            .unwrap()
            .is_none()
    );
    host.stop().await;

    // Granted `get` on Secrets, it loads and its webhook is registered.
    let config = admission_config(
        &env,
        &["review-secrets"],
        "    grants: [{kind: Secret, verbs: [get]}]\n",
        free_port(),
    );
    let host = Host::start(&env, &["review-secrets"], &config).await;
    let v = env
        .wait_for(
            &validating,
            &format!("wasmop-{}", env.namespace()),
            "to be created",
            PATIENCE,
            |c| c.is_some(),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}; log:\n{}", host.log_text()))
        .unwrap();
    let rule = &v.webhooks.unwrap()[0].rules.clone().unwrap()[0];
    assert_eq!(rule.resources.as_deref(), Some(&["secrets".to_owned()][..]));
    host.stop().await;
}

fn deployment(name: &str, labels: serde_json::Value) -> k8s_openapi::api::apps::v1::Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]},
            },
        },
    }))
    .unwrap()
}

/// `required-labels` exports `admission` and no reconciler: the host runs its webhook and no
/// controller, and refuses it where it would do nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_that_only_reviews_serves_its_webhook_without_a_controller() {
    let env = TestEnv::start().await.unwrap();
    let port = free_port();
    let config = admission_config(
        &env,
        &["required-labels"],
        "    grants: [{group: apps, kind: Deployment, verbs: [get]}]\n    \
             config: {labels: [team, owner]}\n",
        port,
    );
    let host = Host::start(&env, &["required-labels"], &config).await;
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(env.client());
    let name = format!("wasmop-{}", env.namespace());
    let v = env
        .wait_for(&validating, &name, "to be created", PATIENCE, |c| {
            c.is_some()
        })
        .await
        .unwrap_or_else(|e| panic!("{e}; log:\n{}", host.log_text()))
        .unwrap();
    let hook = &v.webhooks.unwrap()[0];
    assert_eq!(hook.name, "required-labels.plugins.wasmop.dev");
    let rule = &hook.rules.as_ref().unwrap()[0];
    assert_eq!(
        rule.resources.as_deref(),
        Some(&["deployments".to_owned()][..])
    );
    // No mutating webhook, no controller; its status says it reviews.
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(env.client());
    assert!(mutating.get_opt(&name).await.unwrap().is_none());
    let (code, status) = host.probe("/status").await;
    assert_eq!(code, 200, "{status}");
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(
        status["plugins"]["required-labels"]["state"], "reviewing",
        "{status}"
    );

    // Refused through the API server with the plugin's message, naming every missing label.
    let api: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(env.client(), env.namespace());
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let text = loop {
        match api
            .create(
                &PostParams::default(),
                &deployment("web", json!({"team": "shop"})),
            )
            .await
        {
            Err(kube::Error::Api(status)) => {
                assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
                break status.message;
            }
            Ok(_) => {
                // Created before the API server saw the webhook: try again.
                api.delete("web", &Default::default()).await.unwrap();
                assert!(tokio::time::Instant::now() < deadline, "never reviewed");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(other) => panic!("{other}"),
        }
    };
    assert!(
        text.contains("required-labels.plugins.wasmop.dev")
            && text.contains("Deployment web lacks the labels this cluster requires: owner"),
        "{text}"
    );
    api.create(
        &PostParams::default(),
        &deployment("web", json!({"team": "shop", "owner": "ana"})),
    )
    .await
    .unwrap();
    assert!(
        !host
            .lines()
            .iter()
            .any(|l| message(l) == "plugin controller starting"),
        "a plugin without a reconciler got a controller:\n{}",
        host.log_text()
    );
    host.stop().await;

    // Without the read of what it reviews granted, it is refused, naming the grant.
    let config = admission_config(&env, &["required-labels"], "", free_port());
    let mut host = Host::start(&env, &["required-labels"], &config).await;
    let error = host.wait_rejection("the plugin to be refused").await;
    assert!(
        error.contains("asks to review apps/Deployment, which it may not read"),
        "{error}"
    );
    host.stop().await;

    // A host that does not serve admission refuses it: it would do nothing there.
    let config = confined(
        &env,
        &["required-labels"],
        "    grants: [{group: apps, kind: Deployment, verbs: [get]}]\n",
    );
    let mut host = Host::start(&env, &["required-labels"], &config).await;
    let error = host.wait_rejection("the plugin to be refused").await;
    assert!(
        error.contains("plugin `required-labels` has no reconciler")
            && error.contains("this host does not serve admission"),
        "{error}"
    );
    host.stop().await;
}
