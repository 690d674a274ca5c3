//! `database-config`: reconciles each `Database` (demo.wasmop.dev/v1; `crd.yaml` is generated
//! from the types below, see the test at the end) into a
//! ConfigMap `<name>-config` that applications mount, and reports a `Ready` condition.
//!
//! It also serves admission for Databases (`admission.rs`): its mutating webhook defaults
//! `spec.replicas` to 1, and its validating webhook refuses an unknown engine, a port outside
//! 1-65535 and a host that is neither a DNS name nor an IP address, with messages that name
//! the field as the API server's own do.

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use wasmop_guest::crd::CustomResource;
use wasmop_guest::k8s_openapi::api::core::v1::ConfigMap;
use wasmop_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use wasmop_guest::{Action, Context, Event, Info, Object, ReconcileError, Reconciler};
use wasmop_guest::{condition, owned_meta, set_condition};

mod admission;

/// The database: the database-config plugin writes these settings into the ConfigMap
/// `<name>-config`.
#[derive(CustomResource, Serialize, Deserialize, JsonSchema, Clone, Debug)]
// clippy reads the columns' repeated `type_ = "string"` as one attribute given twice.
#[allow(clippy::duplicated_attributes)]
#[kube(
    group = "demo.wasmop.dev",
    version = "v1",
    kind = "Database",
    namespaced,
    status = "DatabaseStatus",
    shortname = "db",
    doc = "A database applications connect to, and the ConfigMap with its connection settings.",
    crates(kube_core = "wasmop_guest::kube_core"),
    printcolumn(name = "Engine", type_ = "string", json_path = ".spec.engine"),
    printcolumn(name = "Host", type_ = "string", json_path = ".spec.host"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].status"#
    )
)]
struct DatabaseSpec {
    /// The database engine, used as the URL scheme.
    engine: Engine,
    /// The host name applications connect to.
    #[schemars(length(min = 1))]
    host: String,
    /// The TCP port.
    #[schemars(range(min = 1))]
    port: u16,
    /// How many replicas serve reads.
    replicas: u32,
}

/// The engines a Database can run.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug)]
#[serde(rename_all = "lowercase")]
enum Engine {
    Postgres,
    Mysql,
    Mariadb,
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Postgres => "postgres",
            Self::Mysql => "mysql",
            Self::Mariadb => "mariadb",
        })
    }
}

/// What the plugin last observed and did.
#[derive(Serialize, Deserialize, JsonSchema, Default, Clone, PartialEq, Debug)]
#[serde(rename_all = "camelCase")]
struct DatabaseStatus {
    /// `Ready` is true once the ConfigMap holds the current spec.
    #[serde(default)]
    #[schemars(schema_with = "wasmop_guest::crd::conditions")]
    conditions: Vec<Condition>,
    /// The metadata.generation the status describes.
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
            ("engine".to_owned(), spec.engine.to_string()),
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

wasmop_guest::export!(DatabaseConfig, admission = admission::DatabaseAdmission);

#[cfg(test)]
mod tests {
    /// `crd.yaml` is what the types above generate (`WASMOP_BLESS=1 cargo test -p
    /// database-config` rewrites it).
    #[test]
    fn crd_yaml_is_generated_from_the_types() {
        wasmop_guest::check_crd!(super::Database, "crd.yaml");
    }
}
