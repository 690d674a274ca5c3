//! `database-config`: reconciles each `Database` (demo.wasmop.dev/v1, see `crd.yaml`) into a
//! ConfigMap `<name>-config` that applications mount, and reports a `Ready` condition.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use wasmop_guest::k8s_openapi::api::core::v1::ConfigMap;
use wasmop_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use wasmop_guest::{Action, Context, Event, Info, Object, ReconcileError, Reconciler};
use wasmop_guest::{condition, owned_meta, set_condition};

#[derive(Serialize, Deserialize)]
struct Database {
    metadata: ObjectMeta,
    spec: DatabaseSpec,
    status: Option<DatabaseStatus>,
}
wasmop_guest::custom_resource!(
    Database,
    group = "demo.wasmop.dev",
    version = "v1",
    kind = "Database",
    plural = "databases",
    namespaced
);

#[derive(Serialize, Deserialize)]
struct DatabaseSpec {
    engine: String,
    host: String,
    port: u16,
    replicas: u32,
}

#[derive(Serialize, Deserialize, Default, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
struct DatabaseStatus {
    #[serde(default)]
    conditions: Vec<Condition>,
    observed_generation: Option<i64>,
}

struct DatabaseConfig;

impl Reconciler for DatabaseConfig {
    type Object = Database;

    fn describe() -> Info {
        Info::new("database-config", env!("CARGO_PKG_VERSION")).owns::<ConfigMap>()
    }

    fn reconcile(db: Database, ctx: &Context) -> Result<Action, ReconcileError> {
        let spec = &db.spec;
        let name = format!("{}-config", db.name());
        let data = BTreeMap::from([
            ("engine".to_owned(), spec.engine.clone()),
            ("host".to_owned(), spec.host.clone()),
            ("port".to_owned(), spec.port.to_string()),
            ("replicas".to_owned(), spec.replicas.to_string()),
            (
                "url".to_owned(),
                format!("{}://{}:{}", spec.engine, spec.host, spec.port),
            ),
        ]);
        ctx.apply(&ConfigMap {
            metadata: owned_meta(&db, &name)?,
            data: Some(data),
            ..Default::default()
        })?;

        let old = db.status.clone().unwrap_or_default();
        let mut status = DatabaseStatus {
            observed_generation: db.generation(),
            ..old.clone()
        };
        let message = format!("ConfigMap {name} is up to date");
        set_condition(
            &mut status.conditions,
            condition(
                "Ready",
                true,
                "ConfigApplied",
                message.clone(),
                db.generation(),
            ),
        );
        if status != old {
            ctx.update_status(&db, &status)?;
            // Only on a change, so the Event records what happened to the Database, not
            // every resync.
            ctx.event(&db, Event::normal("ConfigApplied", "Apply", message))?;
        }
        Ok(Action::Done)
    }
}

wasmop_guest::export!(DatabaseConfig);
