//! The example `Database` custom resource, as the e2e tests of the Rust and the Python
//! `database-config` (and the fairness tests) apply and wait for it.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use wasmop_testenv::TestEnv;

use crate::harness::PATIENCE;

/// The CRD, generated from the Rust plugin's types; both plugins reconcile it.
pub const DATABASE_CRD: &str = include_str!("../../../plugins/rust/database-config/crd.yaml");

/// The Databases of the test's namespace.
pub fn databases(env: &TestEnv) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("demo.wasmop.dev", "v1", "Database"),
        "databases",
    );
    Api::namespaced_with(env.client(), env.namespace(), &ar)
}

/// The field managers of `cm`: `wasmop/database-config` when the plugin wrote it.
pub fn managers(cm: &ConfigMap) -> Vec<String> {
    cm.metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect()
}

/// Applies the Database `name` with `host` and port 5432.
pub async fn apply_database(env: &TestEnv, name: &str, host: &str) {
    apply_database_on(env, name, host, 5432).await;
}

/// Applies the Database `name` with `host` and `port`.
pub async fn apply_database_on(env: &TestEnv, name: &str, host: &str, port: u16) {
    env.apply_yaml(&format!(
        "apiVersion: demo.wasmop.dev/v1\nkind: Database\nmetadata:\n  name: {name}\n\
         spec:\n  engine: postgres\n  host: {host}\n  port: {port}\n  replicas: 1\n"
    ))
    .await
    .expect("Database applied");
}

/// Whether the Database is Ready for its current generation.
pub fn ready(o: &DynamicObject) -> bool {
    let status = &o.data["status"];
    let ready = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True");
    ready && status["observedGeneration"].as_i64() == o.metadata.generation
}

/// Waits until the Database is Ready for its current generation, and returns that generation.
pub async fn wait_ready(env: &TestEnv, name: &str) -> i64 {
    let db = wasmop_testenv::wait_for_dyn(
        &databases(env),
        name,
        "to be Ready for its generation",
        PATIENCE,
        |o| o.is_some_and(ready),
    )
    .await
    .unwrap()
    .unwrap();
    db.metadata.generation.unwrap()
}

/// Waits until `<name>-config` has `key: value` in its data, and returns it.
pub async fn wait_config(env: &TestEnv, name: &str, key: &str, value: &str) -> ConfigMap {
    let api: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    env.wait_for(
        &api,
        &format!("{name}-config"),
        &format!("to say {key}: {value}"),
        PATIENCE,
        |cm| {
            cm.and_then(|c| c.data.as_ref())
                .and_then(|d| d.get(key))
                .is_some_and(|v| v == value)
        },
    )
    .await
    .unwrap()
    .unwrap()
}
