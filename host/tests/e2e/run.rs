//! End-to-end tests of `wasmop run` against a real kube-apiserver + etcd, with the host running
//! as the restricted ServiceAccount of `deploy/rbac/rbac.yaml`. Each test has its own
//! namespace and its own host process, confined to that namespace.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use crate::harness::{
    self, Host, PATIENCE, confined, message, object_ref, targets, test_kinds, wait_mirrored,
};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use wasmop_testenv::TestEnv;

use crate::database::{DATABASE_CRD, apply_database, databases, managers, wait_config, wait_ready};

async fn create_target(env: &TestEnv, name: &str, value: &str) {
    env.apply_yaml(&format!(
        "apiVersion: wasmop.test/v1\nkind: Target\nmetadata:\n  name: {name}\nspec:\n  value: \"{value}\"\n"
    ))
    .await
    .expect("Target created");
}

/// The `reason` Events on `name` among `events`.
fn about<'a>(events: &'a [Event], name: &str, reason: &str) -> Vec<&'a Event> {
    events
        .iter()
        .filter(|e| e.reason.as_deref() == Some(reason) && harness::regarding(e) == Some(name))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn denied_call_yields_an_event_a_metric_and_a_log_line() {
    let env = TestEnv::start().await.unwrap();
    test_kinds(&env).await;
    let mut host = Host::start(
        &env,
        &["undeclared-kind"],
        &confined(&env, &["undeclared-kind"], ""),
    )
    .await;
    create_target(&env, "t1", "a").await;

    let denied = host
        .wait_log("a denied host call to be logged", |l| {
            object_ref(l).ends_with("/t1")
                && l["fields"]["outcome"]
                    .as_str()
                    .is_some_and(|o| o.contains("denied host call"))
        })
        .await;
    assert!(
        denied["fields"]["outcome"]
            .as_str()
            .unwrap()
            .contains("get on core/Secret"),
        "{denied}"
    );
    // The plugin fails again and again (with backoff): the repeats are counted on one
    // Event's series instead of creating more Events.
    let events = harness::wait_events(&env, "repeated HostCallDenied Event on t1", |all| {
        about(all, "t1", "HostCallDenied")
            .first()
            .and_then(|e| e.series.as_ref())
            .is_some_and(|s| s.count >= 2)
    })
    .await;
    let events = about(&events, "t1", "HostCallDenied");
    assert_eq!(events.len(), 1, "deduplicated into one Event: {events:?}");
    let e = events[0];
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert_eq!(
        e.reporting_controller.as_deref(),
        Some("wasmop/undeclared-kind")
    );
    assert!(
        e.note.as_deref().unwrap_or("").contains("core/Secret"),
        "{e:?}"
    );
    let count = host
        .metric(r#"wasmop_host_calls_denied_total{plugin="undeclared-kind",verb="get"}"#)
        .await;
    assert!(count >= 1.0, "metrics:\n{}", host.metrics().await);
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_plugins_share_one_watch_per_kind() {
    let env = TestEnv::start().await.unwrap();
    test_kinds(&env).await;
    let plugins = ["well-behaved", "undeclared-kind"];
    let mut host = Host::start(&env, &plugins, &confined(&env, &plugins, "")).await;
    host.wait_lines("both plugins to start", |lines| {
        let started = lines
            .iter()
            .filter(|l| message(l) == "plugin controller starting")
            .count();
        (started == 2).then_some(())
    })
    .await;
    create_target(&env, "shared", "x").await;
    wait_mirrored(&env, "shared", "x").await;

    let watches: Vec<String> = host
        .lines()
        .iter()
        .filter(|l| message(l) == "shared watch started")
        .map(|l| {
            format!(
                "{} {}",
                l["fields"]["kind"].as_str().unwrap(),
                l["fields"]["namespace"].as_str().unwrap()
            )
        })
        .collect();
    let count = |kind: &str| watches.iter().filter(|w| w.starts_with(kind)).count();
    assert_eq!(count("wasmop.test/v1/Target "), 1, "{watches:?}");
    assert_eq!(count("v1/ConfigMap "), 1, "{watches:?}");
    assert_eq!(count("v1/Namespace "), 1, "{watches:?}");
    host.stop().await;
}

/// Sets the Target's `spec.value` verbatim (single-quoted YAML).
async fn set_value(env: &TestEnv, name: &str, value: &str) {
    env.apply_yaml(&format!(
        "apiVersion: wasmop.test/v1\nkind: Target\nmetadata:\n  name: {name}\nspec:\n  value: '{value}'\n"
    ))
    .await
    .expect("Target applied");
}

#[tokio::test(flavor = "multi_thread")]
async fn backoff_grows_on_repeated_errors_and_resets_on_success() {
    let env = TestEnv::start().await.unwrap();
    test_kinds(&env).await;
    let mut host = Host::start(
        &env,
        &["well-behaved"],
        &confined(&env, &["well-behaved"], ""),
    )
    .await;
    // well-behaved writes the value into JSON unescaped: a quote makes its apply invalid, a
    // retryable error.
    const BAD: &str = "a\"b";
    set_value(&env, "flaky", BAD).await;

    let failures = |lines: &[serde_json::Value]| -> Vec<(u64, u64)> {
        lines
            .iter()
            .filter(|l| {
                object_ref(l).ends_with("/flaky")
                    && message(l) == "reconcile failed; retrying with backoff"
            })
            .map(|l| {
                (
                    l["fields"]["failures"].as_u64().unwrap(),
                    l["fields"]["retry_in_ms"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let first = host
        .wait_lines("three failed reconciles", |lines| {
            let f = failures(lines);
            (f.len() >= 3).then_some(f)
        })
        .await;
    assert_eq!(
        first[..3].iter().map(|f| f.0).collect::<Vec<_>>(),
        [1, 2, 3],
        "{first:?}"
    );
    assert!(
        first[0].1 <= first[1].1 && first[1].1 <= first[2].1,
        "delays grow: {first:?}"
    );
    assert!(
        first[2].1 >= 1000,
        "third delay is at least twice the base: {first:?}"
    );

    set_value(&env, "flaky", "good").await;
    wait_mirrored(&env, "flaky", "good").await;
    let before = failures(&host.lines()).len();

    // Fail again: the count starts over.
    set_value(&env, "flaky", BAD).await;
    let again = host
        .wait_lines("a failure after the success", |lines| {
            let f = failures(lines);
            (f.len() > before).then(|| f[before])
        })
        .await;
    assert_eq!(again.0, 1, "the failure count was reset by the success");
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_plugin_beside_a_healthy_one_does_not_stop_it() {
    let env = TestEnv::start().await.unwrap();
    test_kinds(&env).await;
    let plugins = ["infinite-loop", "well-behaved"];
    let config = confined(&env, &plugins, "    deadline: 1s\n    concurrency: 2\n");
    let mut host = Host::start(&env, &plugins, &config).await;
    for i in 0..5 {
        create_target(&env, &format!("t{i}"), &format!("v{i}")).await;
    }
    for i in 0..5 {
        wait_mirrored(&env, &format!("t{i}"), &format!("v{i}")).await;
    }
    host.wait_log("the hostile plugin to time out", |l| {
        l["span"]["plugin"] == "infinite-loop"
            && l["fields"]["outcome"]
                .as_str()
                .is_some_and(|o| o.contains("deadline of 1000 ms"))
    })
    .await;
    host.stop().await;
}

/// A spinning plugin's calls are demoted to the low-priority lane (default `demoteAfter`) and
/// reported as such in /metrics, while a healthy plugin keeps reconciling new objects beside
/// it; the spinning calls still end at their deadline.
#[tokio::test(flavor = "multi_thread")]
async fn a_spinning_plugin_is_demoted_while_a_healthy_one_keeps_reconciling() {
    let env = TestEnv::start().await.unwrap();
    test_kinds(&env).await;
    let plugins = ["infinite-loop", "well-behaved"];
    let config = confined(&env, &plugins, "    deadline: 2s\n    concurrency: 2\n");
    let mut host = Host::start(&env, &plugins, &config).await;
    for i in 0..2 {
        create_target(&env, &format!("spun{i}"), &format!("s{i}")).await;
    }
    host.wait_log("a spinning call to be demoted", |l| {
        l["fields"]["plugin"] == "infinite-loop"
            && message(l) == "a long-running call is demoted to the low-priority lane"
    })
    .await;
    // Created while the spinning calls run on the lane: the healthy plugin reconciles them.
    for i in 0..5 {
        create_target(&env, &format!("t{i}"), &format!("v{i}")).await;
    }
    for i in 0..5 {
        wait_mirrored(&env, &format!("t{i}"), &format!("v{i}")).await;
    }
    host.wait_log("a demoted call to end at its deadline", |l| {
        l["span"]["plugin"] == "infinite-loop"
            && l["fields"]["outcome"]
                .as_str()
                .is_some_and(|o| o.contains("deadline of 2000 ms"))
    })
    .await;
    let demoted = r#"wasmop_plugin_calls_demoted_total{plugin="infinite-loop"}"#;
    let mut seen = host.metric(demoted).await;
    let give_up = std::time::Instant::now() + PATIENCE;
    while seen < 1.0 && std::time::Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(100)).await;
        seen = host.metric(demoted).await;
    }
    let text = host.metrics().await;
    assert!(seen >= 1.0, "{text}");
    assert!(
        !text.contains(r#"wasmop_plugin_calls_demoted_total{plugin="well-behaved"}"#),
        "the healthy plugin's calls are never demoted: {text}"
    );
    host.stop().await;
}

/// `fuel:` budgets in the host config: the engine meters fuel because a plugin has a budget; a
/// spinning plugin is stopped by its small budget (reported as a fuel abort) while the host
/// keeps serving, and a plugin that arrives later through the source gets its own, generous
/// budget and reconciles.
#[tokio::test(flavor = "multi_thread")]
async fn fuel_budgets_stop_a_spinning_plugin_and_let_a_later_one_reconcile() {
    let env = TestEnv::start().await.unwrap();
    test_kinds(&env).await;
    let ns = env.namespace();
    let config = format!(
        "resyncPeriod: 0s\nplugins:\n  \
         infinite-loop: {{namespaces: [{ns}], deadline: 60s, fuel: 50000000}}\n  \
         well-behaved: {{namespaces: [{ns}], fuel: 5000000000}}\n"
    );
    let mut host = Host::start(&env, &["infinite-loop"], &config).await;
    create_target(&env, "spun", "1").await;
    host.wait_log("the spinning plugin to run out of fuel", |l| {
        l["span"]["plugin"] == "infinite-loop"
            && l["fields"]["outcome"]
                .as_str()
                .is_some_and(|o| o.contains("fuel budget of 50000000"))
    })
    .await;
    let aborts = r#"wasmop_plugin_aborts_total{plugin="infinite-loop",cause="fuel"}"#;
    assert!(host.metric(aborts).await >= 1.0, "{}", host.metrics().await);

    // Added while the host runs: it gets the budget of its entry, and reconciles within it.
    tokio::fs::copy(
        wasmop_test_guests::component("well-behaved"),
        host.plugin_dir().join("well-behaved.wasm"),
    )
    .await
    .expect("copy plugin");
    create_target(&env, "later", "2").await;
    wait_mirrored(&env, "spun", "1").await;
    wait_mirrored(&env, "later", "2").await;
    let consumed = r#"wasmop_plugin_fuel_consumed_total{plugin="well-behaved"}"#;
    assert!(
        host.metric(consumed).await > 0.0,
        "{}",
        host.metrics().await
    );
    assert_eq!(host.probe("/healthz").await.0, 200);
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn finalizer_is_added_cleanup_runs_and_the_finalizer_is_removed() {
    let env = TestEnv::start().await.unwrap();
    test_kinds(&env).await;
    let host = Host::start(
        &env,
        &["well-behaved"],
        &confined(&env, &["well-behaved"], ""),
    )
    .await;
    create_target(&env, "fin", "1").await;
    wait_mirrored(&env, "fin", "1").await;
    let api = targets(&env);
    let t = api.get("fin").await.unwrap();
    assert!(
        t.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"wasmop.test/cleanup".to_owned())
    );
    api.delete("fin", &DeleteParams::default()).await.unwrap();
    wasmop_testenv::wait_for_dyn(&api, "fin", "to be deleted after cleanup", PATIENCE, |o| {
        o.is_none()
    })
    .await
    .unwrap();
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn finalizer_of_a_removed_plugin_is_released_after_the_grace_period() {
    let env = TestEnv::start().await.unwrap();
    test_kinds(&env).await;
    let host = Host::start(
        &env,
        &["well-behaved"],
        &confined(&env, &["well-behaved"], ""),
    )
    .await;
    create_target(&env, "orphan", "1").await;
    wait_mirrored(&env, "orphan", "1").await;
    host.stop().await;
    let api = targets(&env);
    api.delete("orphan", &DeleteParams::default())
        .await
        .unwrap();
    let t = api.get("orphan").await.unwrap();
    assert!(
        t.metadata.deletion_timestamp.is_some(),
        "held by the finalizer"
    );

    // The plugin is gone: a host without it releases the finalizer.
    let mut host = Host::start(&env, &[], "orphanedFinalizerGrace: 0s\n").await;
    wasmop_testenv::wait_for_dyn(
        &api,
        "orphan",
        "to be deleted once released",
        PATIENCE,
        |o| o.is_none(),
    )
    .await
    .unwrap();
    host.wait_log("the release to be logged", |l| {
        message(l) == "orphaned finalizer released"
    })
    .await;
    // The Event is written by the host's Event writer in the background, after the log line.
    let events = harness::wait_events(&env, "FinalizerReleased Event on orphan", |all| {
        !about(all, "orphan", "FinalizerReleased").is_empty()
    })
    .await;
    let events = about(&events, "orphan", "FinalizerReleased");
    assert_eq!(events.len(), 1, "one Event for one release: {events:?}");
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn requeue_after_from_the_plugin_is_honoured() {
    let env = TestEnv::start().await.unwrap();
    test_kinds(&env).await;
    let config = confined(&env, &["well-behaved"], "    config: {requeueMs: 200}\n");
    let mut host = Host::start(&env, &["well-behaved"], &config).await;
    create_target(&env, "again", "1").await;
    host.wait_lines("three requeued reconciles", |lines| {
        let n = lines
            .iter()
            .filter(|l| object_ref(l).ends_with("/again") && message(l) == "reconcile succeeded")
            .filter(|l| l["fields"]["outcome"].as_str() == Some("requeue after 200 ms"))
            .count();
        (n >= 3).then_some(())
    })
    .await;
    host.stop().await;
}

/// How long the garbage collector may take to delete a child of a custom resource whose CRD it
/// had not discovered yet when the child appeared (see the test that uses it).
const GC_PATIENCE: Duration = Duration::from_secs(360);

/// The API server's answer to applying `yaml`: `Ok` or the API error's message.
async fn try_apply(env: &TestEnv, yaml: &str) -> Result<(), String> {
    env.apply_yaml(yaml).await.map(drop).map_err(|e| match e {
        wasmop_testenv::ApplyError::Apply {
            source: kube::Error::Api(status),
            ..
        } => status.message,
        other => panic!("not an API refusal: {other:?}"),
    })
}

/// `crd.yaml` is generated from the plugin's Rust types (`check_crd!` keeps it so); this is
/// what the real API server makes of it: the schema's bounds refuse bad Databases, and the
/// names, printer columns and status subresource are served.
#[tokio::test(flavor = "multi_thread")]
async fn the_generated_database_crd_is_enforced_by_the_api_server() {
    let env = TestEnv::start().await.unwrap();
    env.apply_yaml(DATABASE_CRD).await.unwrap();
    let database = |name: &str, spec: &str| {
        format!(
            "apiVersion: demo.wasmop.dev/v1\nkind: Database\nmetadata:\n  name: {name}\nspec: {spec}\n"
        )
    };
    let refusals = [
        (
            "engine",
            "{engine: oracle, host: h, port: 5432, replicas: 1}",
            "spec.engine",
        ),
        (
            "port",
            "{engine: postgres, host: h, port: 0, replicas: 1}",
            "spec.port",
        ),
        (
            "port-high",
            "{engine: postgres, host: h, port: 70000, replicas: 1}",
            "spec.port",
        ),
        (
            "host",
            "{engine: postgres, host: '', port: 5432, replicas: 1}",
            "spec.host",
        ),
        (
            "replicas",
            "{engine: postgres, host: h, port: 5432, replicas: -1}",
            "spec.replicas",
        ),
        (
            "missing",
            "{engine: postgres, host: h, replicas: 1}",
            "spec.port",
        ),
    ];
    for (name, spec, field) in refusals {
        let message = try_apply(&env, &database(name, spec))
            .await
            .expect_err(&format!("a Database with a bad {name} is refused"));
        assert!(message.contains(field), "{name}: {message}");
    }
    try_apply(
        &env,
        &database(
            "good",
            "{engine: mariadb, host: h, port: 3306, replicas: 0}",
        ),
    )
    .await
    .expect("a valid Database is stored");

    // status.conditions: a list-map keyed by type whose status is True, False or Unknown.
    let api = databases(&env);
    let condition = |status: &str| {
        json!({"status": {"conditions": [{"type": "Ready", "status": status,
            "reason": "Checked", "message": "m", "lastTransitionTime": "2025-01-01T00:00:00Z"}]}})
    };
    let refused = api
        .patch_status(
            "good",
            &PatchParams::default(),
            &Patch::Merge(condition("Maybe")),
        )
        .await
        .expect_err("a condition status other than True/False/Unknown is refused");
    assert!(
        refused.to_string().contains("status.conditions[0].status"),
        "{refused}"
    );
    api.patch_status(
        "good",
        &PatchParams::default(),
        &Patch::Merge(condition("True")),
    )
    .await
    .expect("a valid condition is stored through the status subresource");

    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(env.client());
    let crd = crds.get("databases.demo.wasmop.dev").await.unwrap();
    assert_eq!(crd.spec.names.short_names, Some(vec!["db".to_owned()]));
    let version = &crd.spec.versions[0];
    let columns: Vec<_> = version
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| (c.name.as_str(), c.json_path.as_str()))
        .collect();
    assert_eq!(
        columns,
        [
            ("Engine", ".spec.engine"),
            ("Host", ".spec.host"),
            ("Ready", r#".status.conditions[?(@.type=="Ready")].status"#),
        ]
    );
    assert!(
        version
            .subresources
            .as_ref()
            .is_some_and(|s| s.status.is_some())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn database_config_creates_updates_and_garbage_collects_its_configmap() {
    let env = TestEnv::start().await.unwrap();
    env.apply_yaml(DATABASE_CRD).await.unwrap();
    let host = Host::start(
        &env,
        &["database-config"],
        &confined(&env, &["database-config"], ""),
    )
    .await;
    apply_database(&env, "orders", "db-1.internal").await;
    let cm = wait_config(&env, "orders", "host", "db-1.internal").await;
    let owner = &cm.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("Database", "orders", Some(true))
    );
    assert_eq!(wait_ready(&env, "orders").await, 1);
    let managers = managers(&cm);
    assert!(
        managers.contains(&"wasmop/database-config".to_owned()),
        "{managers:?}"
    );

    apply_database(&env, "orders", "db-2.internal").await;
    wait_config(&env, "orders", "host", "db-2.internal").await;
    assert_eq!(wait_ready(&env, "orders").await, 2);

    databases(&env)
        .delete("orders", &DeleteParams::background())
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    // kube-controller-manager's garbage collector learns a new CRD only at its next discovery
    // sync (every 30 s); an owner it met before that is retried with exponential backoff, which
    // can reach minutes. So this wait is longer than the others.
    env.wait_for(
        &api,
        "orders-config",
        "to be garbage-collected",
        GC_PATIENCE,
        |cm| cm.is_none(),
    )
    .await
    .unwrap();
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn status_only_change_does_not_rerun_the_plugin() {
    let env = TestEnv::start().await.unwrap();
    env.apply_yaml(DATABASE_CRD).await.unwrap();
    let host = Host::start(
        &env,
        &["database-config"],
        &confined(&env, &["database-config"], ""),
    )
    .await;
    apply_database(&env, "a", "a.internal").await;
    wait_ready(&env, "a").await;
    // The first reconcile creates the ConfigMap, whose creation comes back through the
    // ConfigMap watch: skipped as the reconcile's own write (counted), or, when it beats the
    // write's reply, reconciling the owner once more. After that nothing changes any more.
    let echoed = r#"wasmop_own_write_echoes_skipped_total{plugin="database-config"} 1"#;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let runs = host
            .lines()
            .iter()
            .filter(|l| object_ref(l).ends_with("/a") && message(l) == "reconcile succeeded")
            .count();
        if runs >= 2 || host.metrics().await.lines().any(|l| l == echoed) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the ConfigMap's creation never came back; log:\n{}",
            host.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A status-only change the plugin would undo if it ran: it writes observedGeneration.
    let status = json!({"status": {"observedGeneration": 99}});
    databases(&env)
        .patch_status("a", &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
    // A barrier: a later change to another Database of the same watch is reconciled, so the
    // status change (earlier in the same watch stream) has been seen and filtered.
    apply_database(&env, "b", "b.internal").await;
    wait_ready(&env, "b").await;
    wait_config(&env, "b", "host", "b.internal").await;
    let a = databases(&env).get("a").await.unwrap();
    assert_eq!(
        a.data["status"]["observedGeneration"], 99,
        "the plugin re-ran for a status-only change"
    );

    // A spec change does run it.
    apply_database(&env, "a", "a2.internal").await;
    assert_eq!(wait_ready(&env, "a").await, 2);
    host.stop().await;
}

/// Waits until namespace-defaults has made its object of kind `K` in `namespace`.
async fn wait_defaults_object<K>(env: &TestEnv, namespace: &str) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + serde::Serialize,
{
    let api: Api<K> = Api::namespaced(env.client(), namespace);
    env.wait_for(&api, "namespace-defaults", "to be created", PATIENCE, |o| {
        o.is_some()
    })
    .await
    .unwrap();
    api
}

/// The namespace namespace-defaults is confined to in `env`'s test.
pub(crate) fn defaults_namespace(env: &TestEnv) -> String {
    format!("{}-defaults", env.namespace())
}

/// The `plugins:` entry that confines namespace-defaults to [`defaults_namespace`].
pub(crate) fn namespace_defaults_settings(env: &TestEnv) -> String {
    format!(
        "  namespace-defaults:\n    namespaces: [{}]\n",
        defaults_namespace(env)
    )
}

/// What namespace-defaults does, seen on the cluster (the Rust plugin and its Python twin
/// alike): a labelled namespace gets its ResourceQuota, LimitRange and NetworkPolicy, and an
/// owned object deleted by hand comes back. Removes the namespace at the end.
pub(crate) async fn namespace_defaults_gives_its_defaults(env: &TestEnv) {
    let target = defaults_namespace(env);
    env.apply_yaml(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {target}\n  labels:\n    demo.wasmop.dev/defaults: enabled\n"
    ))
    .await
    .unwrap();
    let quotas =
        wait_defaults_object::<k8s_openapi::api::core::v1::ResourceQuota>(env, &target).await;
    wait_defaults_object::<k8s_openapi::api::core::v1::LimitRange>(env, &target).await;
    wait_defaults_object::<k8s_openapi::api::networking::v1::NetworkPolicy>(env, &target).await;
    // An owned object deleted by hand comes back.
    quotas
        .delete("namespace-defaults", &DeleteParams::default())
        .await
        .unwrap();
    env.wait_for(
        &quotas,
        "namespace-defaults",
        "to be restored",
        PATIENCE,
        |q| q.is_some_and(|q| q.metadata.deletion_timestamp.is_none()),
    )
    .await
    .unwrap();
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(env.client());
    namespaces
        .delete(&target, &DeleteParams::default())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn namespace_defaults_gives_a_labelled_namespace_its_defaults() {
    let env = TestEnv::start().await.unwrap();
    let host = Host::start(
        &env,
        &["namespace-defaults"],
        &format!(
            "resyncPeriod: 0s\nplugins:\n{}",
            namespace_defaults_settings(&env)
        ),
    )
    .await;
    namespace_defaults_gives_its_defaults(&env).await;
    host.stop().await;
}

/// The namespace configmap-mirror copies into in `env`'s test.
fn mirror_namespace(env: &TestEnv) -> String {
    format!("{}-mirror", env.namespace())
}

/// The `plugins:` entry that confines configmap-mirror to the test's namespace and
/// [`mirror_namespace`], grants it deletes of ConfigMaps and selects the mirror namespace.
pub(crate) fn configmap_mirror_settings(env: &TestEnv) -> String {
    format!(
        "  configmap-mirror:\n    namespaces: [{ns}, {target}]\n    \
         grants: [{{kind: ConfigMap, verbs: [delete]}}]\n    config: {{namespaceSelector: \"mirror-test={ns}\"}}\n",
        ns = env.namespace(),
        target = mirror_namespace(env),
    )
}

/// What configmap-mirror does, seen on the cluster (the Rust plugin and its Python twin
/// alike): a labelled ConfigMap is copied into the selected namespace and gets the plugin's
/// finalizer; deleting it runs the cleanup, which removes the copy, then the finalizer.
/// Removes the mirror namespace at the end.
pub(crate) async fn configmap_mirror_copies_and_cleans_up(env: &TestEnv) {
    let target = mirror_namespace(env);
    env.apply_yaml(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {target}\n  labels:\n    mirror-test: {}\n",
        env.namespace()
    ))
    .await
    .unwrap();
    env.apply_yaml("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n  labels:\n    demo.wasmop.dev/mirror: \"true\"\ndata:\n  k: v1\n")
        .await
        .unwrap();
    let copies: Api<ConfigMap> = Api::namespaced(env.client(), &target);
    env.wait_for(&copies, "shared", "to be copied", PATIENCE, |c| {
        c.and_then(|c| c.data.as_ref())
            .and_then(|d| d.get("k"))
            .is_some_and(|v| v == "v1")
    })
    .await
    .unwrap();
    let sources: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    let source = sources.get("shared").await.unwrap();
    assert!(
        source
            .metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"demo.wasmop.dev/mirror-cleanup".to_owned())
    );

    sources
        .delete("shared", &DeleteParams::default())
        .await
        .unwrap();
    env.wait_for(
        &copies,
        "shared",
        "to be removed by cleanup",
        PATIENCE,
        |c| c.is_none(),
    )
    .await
    .unwrap();
    env.wait_for(
        &sources,
        "shared",
        "to be deleted once its finalizer is removed",
        PATIENCE,
        |c| c.is_none(),
    )
    .await
    .unwrap();
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(env.client());
    namespaces
        .delete(&target, &DeleteParams::default())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn configmap_mirror_copies_and_its_finalizer_cleans_up() {
    let env = TestEnv::start().await.unwrap();
    let config = format!(
        "resyncPeriod: 0s\nplugins:\n{}",
        configmap_mirror_settings(&env)
    );
    let host = Host::start(&env, &["configmap-mirror"], &config).await;
    configmap_mirror_copies_and_cleans_up(&env).await;
    host.stop().await;
}

/// A finalizer add made from a stale view of the object (the cache has not yet delivered an
/// earlier add) is not a failure: the object as stored already has it, so the reconcile goes
/// on with that. A change by someone else still fails the add.
#[tokio::test(flavor = "multi_thread")]
async fn adding_a_finalizer_the_object_already_has_is_not_a_failure() {
    use wasmop_controller::controller::finalizer;
    let env = TestEnv::start().await.unwrap();
    test_kinds(&env).await;
    create_target(&env, "stale", "x").await;
    let api = targets(&env);
    let stale = api.get("stale").await.unwrap().metadata;
    let plugin = wasmop_core::plugin::PluginName::new("well-behaved").unwrap();
    let ours = "wasmop.test/stale";
    let types = kube::api::TypeMeta {
        api_version: "wasmop.test/v1".into(),
        kind: "Target".into(),
    };

    let added = finalizer::add(&api, &stale, ours, &plugin, &types)
        .await
        .unwrap();
    assert_eq!(added.meta().finalizers, Some(vec![ours.to_owned()]));
    // The same add from the same stale metadata: the `test` fails, the finalizer is there.
    let again = finalizer::add(&api, &stale, ours, &plugin, &types)
        .await
        .unwrap();
    assert_eq!(
        again.meta().finalizers,
        Some(vec![ours.to_owned()]),
        "not added twice"
    );
    // Another finalizer from the same stale view: the list changed under it, a real conflict.
    let error = finalizer::add(&api, &stale, "example.com/other", &plugin, &types)
        .await
        .expect_err("a stale add of a finalizer the object lacks fails");
    assert!(error.to_string().contains("example.com/other"), "{error}");

    api.patch(
        "stale",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
}
