//! The real control plane behaves as a cluster does for everything wasmop relies on: CRDs and
//! custom resources with every verb, garbage collection, namespace deletion, and RBAC for
//! restricted identities. All tests share one control plane and get a namespace each.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::{DynamicObject, GroupVersionKind, ObjectMeta};
use kube::discovery::ApiResource;
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use wasmop_testenv::apply::is_established;
use wasmop_testenv::{Identity, TestEnv, WaitError, wait_for_dyn};

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// Generous: these guard against hangs, they do not measure anything. The garbage collector and
/// the namespace controller work from informers, which on a loaded 2-core machine can lag.
const CONVERGE: Duration = Duration::from_secs(120);

const WIDGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.testenv.wasmop.dev
spec:
  group: testenv.wasmop.dev
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {type: integer}
                color: {type: string}
            status:
              type: object
              properties:
                phase: {type: string}
"#;

fn widgets(client: Client, namespace: &str) -> Api<DynamicObject> {
    let resource =
        ApiResource::from_gvk(&GroupVersionKind::gvk("testenv.wasmop.dev", "v1", "Widget"));
    Api::namespaced_with(client, namespace, &resource)
}

fn widget(name: &str, tier: &str, size: i64) -> Result<DynamicObject, serde_json::Error> {
    serde_json::from_value(json!({
        "apiVersion": "testenv.wasmop.dev/v1",
        "kind": "Widget",
        "metadata": {"name": name, "labels": {"tier": tier}},
        "spec": {"size": size},
    }))
}

fn field<'a>(object: &'a DynamicObject, path: &[&str]) -> Option<&'a serde_json::Value> {
    path.iter()
        .try_fold(&object.data, |value, key| value.get(*key))
}

#[tokio::test]
async fn crd_becomes_established_and_custom_resources_support_every_verb() -> TestResult {
    let env = TestEnv::start().await?;
    env.apply_yaml(WIDGET_CRD).await?;
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    let crd = crds.get("widgets.testenv.wasmop.dev").await?;
    assert!(is_established(Some(&crd)), "CRD not Established: {crd:?}");

    let api = widgets(env.client(), env.namespace());
    let start = api.list(&ListParams::default()).await?;
    let version = start.metadata.resource_version.unwrap_or_default();
    let mut events = api.watch(&WatchParams::default(), &version).await?.boxed();

    // create, read, list with a label selector
    api.create(&PostParams::default(), &widget("gold", "gold", 1)?)
        .await?;
    api.create(&PostParams::default(), &widget("silver", "silver", 1)?)
        .await?;
    let gold = api.get("gold").await?;
    assert_eq!(field(&gold, &["spec", "size"]), Some(&json!(1)));
    let listed = api.list(&ListParams::default().labels("tier=gold")).await?;
    let names: Vec<String> = listed.items.iter().map(ResourceExt::name_any).collect();
    assert_eq!(names, ["gold"]);

    // merge patch
    let patched = api
        .patch(
            "gold",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await?;
    assert_eq!(field(&patched, &["spec", "size"]), Some(&json!(2)));

    // server-side apply with a field manager: the field is owned, a second manager conflicts
    let mut apply = widget("gold", "gold", 2)?;
    apply.data["spec"]["color"] = json!("blue");
    let applied = api
        .patch(
            "gold",
            &PatchParams::apply("widget-painter"),
            &Patch::Apply(&apply),
        )
        .await?;
    assert_eq!(field(&applied, &["spec", "color"]), Some(&json!("blue")));
    let managers: Vec<String> = applied
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert!(
        managers.iter().any(|m| m == "widget-painter"),
        "managers: {managers:?}"
    );
    apply.data["spec"]["color"] = json!("red");
    let conflict = api
        .patch(
            "gold",
            &PatchParams::apply("another-painter"),
            &Patch::Apply(&apply),
        )
        .await
        .expect_err("a second field manager must conflict without force");
    assert!(
        matches!(&conflict, kube::Error::Api(s) if s.code == 409),
        "{conflict:?}"
    );

    // the status subresource: status changes only through it
    let with_status = api
        .patch_status(
            "gold",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready"}})),
        )
        .await?;
    assert_eq!(
        field(&with_status, &["status", "phase"]),
        Some(&json!("Ready"))
    );
    let ignored = api
        .patch(
            "gold",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Bogus"}})),
        )
        .await?;
    assert_eq!(field(&ignored, &["status", "phase"]), Some(&json!("Ready")));

    // delete
    api.delete("gold", &DeleteParams::default()).await?;
    wait_for_dyn(&api, "gold", "to be deleted", CONVERGE, |o| o.is_none()).await?;

    // the watch saw it all happen
    let mut saw = (false, false, false);
    while saw != (true, true, true) {
        let event = tokio::time::timeout(CONVERGE, events.try_next())
            .await??
            .ok_or("watch ended")?;
        match event {
            WatchEvent::Added(o) if o.name_any() == "gold" => saw.0 = true,
            WatchEvent::Modified(o)
                if o.name_any() == "gold"
                    && field(&o, &["status", "phase"]) == Some(&json!("Ready")) =>
            {
                saw.1 = true;
            }
            WatchEvent::Deleted(o) if o.name_any() == "gold" => saw.2 = true,
            WatchEvent::Error(e) => return Err(format!("watch error: {e:?}").into()),
            _ => {}
        }
    }
    Ok(())
}

async fn create_parent_and_child(
    configmaps: &Api<ConfigMap>,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let parent = configmaps
        .create(&PostParams::default(), &configmap("parent", &[]))
        .await?;
    let owner = OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: parent.name_any(),
        uid: parent.uid().ok_or("parent has no uid")?,
        block_owner_deletion: Some(true),
        controller: Some(true),
    };
    configmaps
        .create(&PostParams::default(), &configmap("child", &[owner]))
        .await?;
    Ok(())
}

fn configmap(name: &str, owners: &[OwnerReference]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            owner_references: Some(owners.to_vec()),
            ..ObjectMeta::default()
        },
        data: Some([("state".to_owned(), "initial".to_owned())].into()),
        ..ConfigMap::default()
    }
}

#[tokio::test]
async fn deleting_a_parent_garbage_collects_its_child() -> TestResult {
    let env = TestEnv::start().await?;
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    create_parent_and_child(&configmaps).await?;

    configmaps
        .delete("parent", &DeleteParams::background())
        .await?;
    env.wait_for(
        &configmaps,
        "child",
        "to be garbage-collected",
        CONVERGE,
        |o| o.is_none(),
    )
    .await?;
    Ok(())
}

#[tokio::test]
async fn foreground_deletion_waits_for_children_that_block_owner_deletion() -> TestResult {
    let env = TestEnv::start().await?;
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    create_parent_and_child(&configmaps).await?;

    let deleting = configmaps
        .delete("parent", &DeleteParams::foreground())
        .await?
        .left()
        .ok_or("foreground deletion must return the parent, not a status")?;
    assert!(
        deleting
            .finalizers()
            .iter()
            .any(|f| f == "foregroundDeletion"),
        "finalizers: {:?}",
        deleting.finalizers()
    );
    env.wait_for(&configmaps, "child", "to be deleted", CONVERGE, |o| {
        o.is_none()
    })
    .await?;
    env.wait_for(&configmaps, "parent", "to be deleted", CONVERGE, |o| {
        o.is_none()
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn deleting_a_namespace_completes() -> TestResult {
    let env = TestEnv::start().await?;
    env.apply_yaml(WIDGET_CRD).await?;
    let doomed = format!("{}-doomed", env.namespace());
    let namespaces: Api<Namespace> = Api::all(env.client());
    namespaces
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(doomed.clone()),
                    ..ObjectMeta::default()
                },
                ..Namespace::default()
            },
        )
        .await?;
    // Content of a built-in and of a custom kind, which the namespace controller must find
    // through discovery and delete before the namespace can go.
    Api::<ConfigMap>::namespaced(env.client(), &doomed)
        .create(&PostParams::default(), &configmap("content", &[]))
        .await?;
    widgets(env.client(), &doomed)
        .create(&PostParams::default(), &widget("content", "gold", 1)?)
        .await?;

    namespaces.delete(&doomed, &DeleteParams::default()).await?;
    env.wait_for(&namespaces, &doomed, "to be deleted", CONVERGE, |o| {
        o.is_none()
    })
    .await?;
    Ok(())
}

const READER_RBAC: &str = r#"
apiVersion: v1
kind: ServiceAccount
metadata:
  name: reader
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: configmap-reader
rules:
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: configmap-readers
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: configmap-reader
subjects:
  - {kind: User, apiGroup: rbac.authorization.k8s.io, name: alice}
  - {kind: Group, apiGroup: rbac.authorization.k8s.io, name: configmap-readers}
  - {kind: ServiceAccount, name: reader}
"#;

fn is_forbidden<T: std::fmt::Debug>(result: &Result<T, kube::Error>) -> bool {
    matches!(result, Err(kube::Error::Api(s)) if s.code == 403)
}

/// Checks that `client` may read ConfigMaps in `namespace` and nothing else.
async fn assert_reader_only(client: Client, namespace: &str, who: &str) -> TestResult {
    let own: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    own.list(&ListParams::default()).await?;
    own.get("existing").await?;
    let create = own
        .create(&PostParams::default(), &configmap("forbidden", &[]))
        .await;
    assert!(
        is_forbidden(&create),
        "{who}: create must be denied: {create:?}"
    );
    let delete = own.delete("existing", &DeleteParams::default()).await;
    assert!(
        is_forbidden(&delete),
        "{who}: delete must be denied: {delete:?}"
    );
    let secrets = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await;
    assert!(
        is_forbidden(&secrets),
        "{who}: secrets must be denied: {secrets:?}"
    );
    let elsewhere = Api::<ConfigMap>::namespaced(client, "default")
        .list(&ListParams::default())
        .await;
    assert!(
        is_forbidden(&elsewhere),
        "{who}: other namespaces must be denied: {elsewhere:?}"
    );
    Ok(())
}

#[tokio::test]
async fn restricted_identities_get_exactly_what_their_rbac_grants() -> TestResult {
    let env = TestEnv::start().await?;
    env.apply_yaml(READER_RBAC).await?;
    Api::<ConfigMap>::namespaced(env.client(), env.namespace())
        .create(&PostParams::default(), &configmap("existing", &[]))
        .await?;

    let alice = env.client_for(&Identity::user("alice", &[])).await?;
    assert_reader_only(alice, env.namespace(), "user alice").await?;

    let bob = env
        .client_for(&Identity::user("bob", &["configmap-readers"]))
        .await?;
    assert_reader_only(bob, env.namespace(), "group member bob").await?;

    let reader = env
        .client_for(&Identity::service_account(env.namespace(), "reader"))
        .await?;
    assert_reader_only(reader, env.namespace(), "service account reader").await?;

    let carol = env.client_for(&Identity::user("carol", &[])).await?;
    let denied = Api::<ConfigMap>::namespaced(carol, env.namespace())
        .list(&ListParams::default())
        .await;
    assert!(is_forbidden(&denied), "carol has no binding: {denied:?}");
    Ok(())
}

#[tokio::test]
async fn a_missing_service_account_gets_no_token() -> TestResult {
    let env = TestEnv::start().await?;
    let missing = env
        .client_for(&Identity::service_account(env.namespace(), "nobody"))
        .await;
    let err = missing
        .err()
        .ok_or("a token for a missing ServiceAccount")?;
    assert!(err.to_string().contains("nobody"), "{err}");
    Ok(())
}

#[tokio::test]
async fn a_timed_out_wait_shows_the_last_observed_state() -> TestResult {
    let env = TestEnv::start().await?;
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    configmaps
        .create(&PostParams::default(), &configmap("steady", &[]))
        .await?;
    let result = env
        .wait_for(
            &configmaps,
            "steady",
            "to become ready",
            Duration::from_secs(1),
            |o| o.is_some_and(|cm| cm.data.as_ref().is_some_and(|d| d.contains_key("ready"))),
        )
        .await;
    let err = result.err().ok_or("the condition never holds")?;
    let WaitError::TimedOut { .. } = &err;
    let message = err.to_string();
    for expected in ["ConfigMap steady to become ready", "state: initial"] {
        assert!(
            message.contains(expected),
            "missing {expected:?} in: {message}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn apply_yaml_names_the_document_the_apiserver_does_not_serve() -> TestResult {
    let env = TestEnv::start().await?;
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fine}\n---\n\
                apiVersion: nowhere.example/v1\nkind: Ghost\nmetadata: {name: boo}\n";
    let err = env
        .apply_yaml(yaml)
        .await
        .err()
        .ok_or("a kind the apiserver does not serve")?;
    let message = err.to_string();
    assert!(
        message.contains("Ghost") && message.contains("document 1"),
        "{message}"
    );
    Ok(())
}
