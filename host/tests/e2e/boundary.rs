//! The trust boundary against the real API server, with the deploy RBAC and with a broad one
//! (the host in `system:masters`, so that wasmop's own policy is the only barrier): hostile
//! identifiers are refused by the host, sensitive kinds are refused at load, and the API
//! server's audit log shows that none of the requests they were built for ever reached it.

use crate::harness;

use crate::harness::{
    HOST_USER, Host, PATIENCE, broad_user, confined, message, targets, test_kinds,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::Value;
use wasmop_testenv::{TestEnv, wait_for_dyn};

async fn create_target(env: &TestEnv, name: &str) {
    env.apply_yaml(&format!(
        "apiVersion: wasmop.test/v1\nkind: Target\nmetadata:\n  name: {name}\nspec:\n  value: \"1\"\n"
    ))
    .await
    .expect("Target created");
}

/// Waits until the Target `name` has `status.<field>`, and returns it.
async fn reported(env: &TestEnv, name: &str, field: &str) -> String {
    let target = wait_for_dyn(&targets(env), name, "the plugin's report", PATIENCE, |t| {
        t.is_some_and(|t| t.data["status"][field].is_string())
    })
    .await
    .expect("the plugin reports")
    .expect("the Target exists");
    target.data["status"][field]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Requests in `audited` whose URI contains any of `needles`, as `VERB URI` lines.
fn requests_with(audited: &[Value], needles: &[&str]) -> Vec<String> {
    audited
        .iter()
        .filter_map(|e| {
            let uri = e["requestURI"].as_str()?;
            if is_admission_secret(e["verb"].as_str().unwrap_or_default(), uri) {
                return None;
            }
            let lower = uri.to_ascii_lowercase();
            // An escaped `/` belongs in a query (the field manager `wasmop%2Fplugin`), never
            // in the path.
            let path = lower.split('?').next().unwrap_or_default();
            (needles.iter().any(|n| lower.contains(n)) || path.contains("%2f"))
                .then(|| format!("{} {uri}", e["verb"].as_str().unwrap_or("?")))
        })
        .collect()
}

/// Whether a request is one of the host's own for its admission certificates, which the hosts
/// of the admission tests make under the same user (the audit log is the shared control
/// plane's): reading the CA Secret `wasmop-webhook-ca` or the TLS Secret
/// `wasmop-webhook-tls` of its namespace, or creating the CA Secret (a bare create: a
/// plugin's writes carry its field manager). Built from no plugin's name.
fn is_admission_secret(verb: &str, uri: &str) -> bool {
    let Some((namespace, tail)) = uri
        .strip_prefix("/api/v1/namespaces/")
        .and_then(|rest| rest.split_once('/'))
    else {
        return false;
    };
    let plain = !namespace.is_empty()
        && namespace
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-');
    plain
        && match verb {
            "get" => tail == "secrets/wasmop-webhook-ca" || tail == "secrets/wasmop-webhook-tls",
            "create" => tail == "secrets?" || tail == "secrets",
            _ => false,
        }
}

/// What the unsafe-names attacks were built to reach: none of it may appear in a request.
const ATTACK_TRACES: &[&str] = &[
    "spoofed",
    "kube-system",
    "/..",
    "dryrun",
    "fieldselector",
    "/secrets",
    "victim?",
    "?x=",
    "forged",
];

async fn unsafe_names_refused(env: &TestEnv, broad: bool) {
    test_kinds(env).await;
    let victim: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    env.apply_yaml("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: victim\ndata:\n  k: v\n")
        .await
        .expect("victim");
    let config = confined(env, &["unsafe-names"], "");
    let host = if broad {
        Host::start_broad(env, &["unsafe-names"], &config).await
    } else {
        Host::start(env, &["unsafe-names"], &config).await
    };
    create_target(env, "t").await;
    let report = reported(env, "t", "attacks").await;
    assert_eq!(report.split(' ').count(), 22, "{report}");
    for entry in report.split(' ') {
        assert!(entry.ends_with("=invalid"), "{entry} ({report})");
    }
    // Nothing reached the objects the attacks aimed at.
    let cm = victim
        .get("victim")
        .await
        .expect("the victim ConfigMap still exists");
    assert_eq!(
        cm.data.unwrap_or_default().get("spoofed"),
        None,
        "never patched"
    );
    let managers: Vec<_> = cm
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(
        managers.iter().all(|m| !m.contains("spoofed")),
        "{managers:?}"
    );
    // And the API server never saw a request built from them.
    let user = if broad {
        broad_user(env)
    } else {
        HOST_USER.to_owned()
    };
    let audited = env.audited(&user);
    assert!(
        audited.iter().any(|e| e["requestURI"]
            .as_str()
            .is_some_and(|u| u.contains("/targets/t/status"))),
        "the audit log holds the host's requests (its status patch)"
    );
    let bad = requests_with(&audited, ATTACK_TRACES);
    assert!(
        bad.is_empty(),
        "requests built from hostile names: {bad:#?}"
    );
    let collection_deletes: Vec<_> = audited
        .iter()
        .filter(|e| e["verb"] == "deletecollection")
        .collect();
    assert!(collection_deletes.is_empty(), "{collection_deletes:#?}");
    host.stop().await;
}

#[tokio::test]
async fn hostile_names_are_refused_by_the_host_under_the_deploy_rbac() {
    let env = TestEnv::start().await.expect("test env");
    unsafe_names_refused(&env, false).await;
}

#[tokio::test]
async fn hostile_names_are_refused_by_the_host_when_rbac_allows_everything() {
    let env = TestEnv::start().await.expect("test env");
    unsafe_names_refused(&env, true).await;
}

/// Waits until the host logs that `plugin` was refused for declaring the sensitive `kind`,
/// and returns the error it logged.
async fn refused_at_load(host: &mut Host, plugin: &str, kind: &str) -> String {
    let line = host
        .wait_log(&format!("{plugin} refused"), |l| {
            l.to_string()
                .contains(&format!("plugin `{plugin}` owns {kind}, a sensitive kind"))
        })
        .await;
    line["fields"]["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn sensitive_owned_kinds_are_refused_at_load_under_the_deploy_rbac() {
    let env = TestEnv::start().await.expect("test env");
    test_kinds(&env).await;
    let plugins = ["owns-secret", "owns-cluster-kinds", "well-behaved"];
    let mut host = Host::start(&env, &plugins, &confined(&env, &plugins, "")).await;
    let error = refused_at_load(&mut host, "owns-secret", "core/Secret").await;
    assert!(
        error.contains("under `plugins.owns-secret.grants`"),
        "{error}"
    );
    refused_at_load(
        &mut host,
        "owns-cluster-kinds",
        "rbac.authorization.k8s.io/ClusterRoleBinding",
    )
    .await;
    create_target(&env, "t").await;
    harness::wait_mirrored(&env, "t", "1").await;
    assert_eq!(
        host.metric("wasmop_plugin_reloads_total{plugin=\"owns-secret\",result=\"rejected\"}")
            .await,
        1.0
    );
    host.stop().await;
}

#[tokio::test]
async fn sensitive_owned_kinds_are_refused_at_load_and_granted_only_explicitly() {
    let env = TestEnv::start().await.expect("test env");
    test_kinds(&env).await;
    env.apply_yaml("apiVersion: v1\nkind: Secret\nmetadata:\n  name: credentials\nstringData:\n  password: hunter2\n")
        .await
        .expect("secret");
    let plugins = ["owns-secret", "owns-cluster-kinds", "well-behaved"];
    // No grants: both hostile plugins are refused at load, naming the kind and the grant.
    let mut host = Host::start_broad(&env, &plugins, &confined(&env, &plugins, "")).await;
    for (plugin, kind, grant) in [
        (
            "owns-secret",
            "core/Secret",
            "add `{group: \"\", kind: Secret, verbs: [get, list, create, patch, apply, delete]}`",
        ),
        (
            "owns-cluster-kinds",
            "rbac.authorization.k8s.io/ClusterRoleBinding",
            "under `plugins.owns-cluster-kinds.grants`",
        ),
    ] {
        let error = refused_at_load(&mut host, plugin, kind).await;
        assert!(error.contains(grant), "{error}");
    }
    create_target(&env, "t").await;
    harness::wait_mirrored(&env, "t", "1").await;
    let audited = env.audited(&broad_user(&env));
    let touched = requests_with(
        &audited,
        &["/secrets", "clusterrolebindings", "priorityclasses"],
    );
    assert!(touched.is_empty(), "{touched:#?}");
    assert!(
        host.lines().iter().all(|l| !message(l).contains("hunter2")),
        "the Secret never reached a log"
    );
    host.stop().await;

    // Granted explicitly: exactly what the grant says, nothing the kinds imply besides.
    let extra = "    grants:\n      - {group: \"\", kind: Secret, verbs: [get]}\n      - {group: rbac.authorization.k8s.io, kind: ClusterRoleBinding, verbs: [get]}\n";
    let host = Host::start_broad(&env, &plugins[..2], &confined(&env, &plugins[..2], extra)).await;
    // A new Target: `t` carries the stopped host's `well-behaved` finalizer.
    create_target(&env, "t2").await;
    assert_eq!(
        reported(&env, "t2", "secrets").await,
        "list-all=denied list-kube-system=denied get=allowed"
    );
    assert_eq!(
        reported(&env, "t2", "cluster").await,
        "binding-create=denied binding-apply=denied priority-apply=denied"
    );
    let audited = env.audited(&broad_user(&env));
    let writes = requests_with(&audited, &["clusterrolebindings", "priorityclasses"])
        .into_iter()
        .filter(|r| !r.starts_with("list ") && !r.starts_with("watch "))
        .collect::<Vec<_>>();
    assert!(writes.is_empty(), "{writes:#?}");
    let secret_reads = requests_with(&audited, &["/secrets"])
        .into_iter()
        .filter(|r| !r.starts_with("list ") && !r.starts_with("watch "))
        .collect::<Vec<_>>();
    assert!(
        secret_reads
            .iter()
            .all(|r| r.contains(&format!("/namespaces/{}/secrets", env.namespace()))),
        "{secret_reads:#?}"
    );
    host.stop().await;
}
