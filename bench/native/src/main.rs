//! `database-config-native`: the baseline of wasmop's benchmarks (`bench/run`). The logic of
//! `plugins/rust/database-config` written as a kube-rs user would, as a
//! [`kube::runtime::Controller`]: each `Database` (demo.wasmop.dev/v1) gets a
//! server-side-applied ConfigMap `<name>-config` that it owns, and a `Ready` condition with
//! `observedGeneration` in its status; the status is merge-patched, and an Event recorded,
//! only when it changes.
//!
//! Settings as wasmop's defaults: 4 reconciles at once, managedFields dropped from the cached
//! Databases, a change that does not bump a Database's generation does not trigger a
//! reconcile, changes of owned ConfigMaps do; a failed reconcile is retried.
//! It prints `ready` on stdout once the Database cache is filled, which `bench/run` times.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{WatchStreamExt, predicates, reflector, watcher};
use kube::{Client, Resource, ResourceExt};
use serde::{Deserialize, Serialize};

/// The field manager of the ConfigMap apply and of the status patch.
const FIELD_MANAGER: &str = "bench/database-config";
/// Set once the Database cache has been filled for the first time.
static READY: AtomicBool = AtomicBool::new(false);
/// Reconciles at once: wasmop's default per plugin.
const CONCURRENCY: u16 = 4;

/// The `Database` custom resource (plugins/rust/database-config/crd.yaml).
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Database {
    metadata: ObjectMeta,
    spec: DatabaseSpec,
    status: Option<DatabaseStatus>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct DatabaseSpec {
    engine: String,
    host: String,
    port: u16,
    replicas: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DatabaseStatus {
    #[serde(default)]
    conditions: Vec<Condition>,
    observed_generation: Option<i64>,
}

impl k8s_openapi::Resource for Database {
    const API_VERSION: &'static str = "demo.wasmop.dev/v1";
    const GROUP: &'static str = "demo.wasmop.dev";
    const KIND: &'static str = "Database";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "databases";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for Database {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
enum Error {
    /// The Database has no namespace or uid (not an object read from the cluster).
    #[error("database {0} has no namespace or uid")]
    Incomplete(String),
    /// An API call failed.
    #[error("{what} failed")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
}

/// What every reconcile shares.
struct Ctx {
    client: Client,
    recorder: Recorder,
}

async fn reconcile(db: Arc<Database>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let name = db.name_any();
    let (Some(ns), Some(uid)) = (db.namespace(), db.uid()) else {
        return Err(Error::Incomplete(name));
    };
    let spec = &db.spec;
    let cm_name = format!("{name}-config");
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
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(cm_name.clone()),
            namespace: Some(ns.clone()),
            owner_references: Some(vec![OwnerReference {
                api_version: "demo.wasmop.dev/v1".into(),
                kind: "Database".into(),
                name: name.clone(),
                uid,
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..ConfigMap::default()
    };
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
    cms.patch(
        &cm_name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&cm),
    )
    .await
    .map_err(|source| Error::Kube {
        what: format!("apply of ConfigMap {ns}/{cm_name}"),
        source,
    })?;

    let old = db.status.clone().unwrap_or_default();
    let generation = db.meta().generation;
    let message = format!("ConfigMap {cm_name} is up to date");
    let mut status = DatabaseStatus {
        observed_generation: generation,
        ..old.clone()
    };
    set_ready(&mut status.conditions, &message, generation);
    if status != old {
        let dbs: Api<Database> = Api::namespaced(ctx.client.clone(), &ns);
        let patch = serde_json::json!({ "status": status });
        dbs.patch_status(
            &name,
            &PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PatchParams::default()
            },
            &Patch::Merge(&patch),
        )
        .await
        .map_err(|source| Error::Kube {
            what: format!("status patch of Database {ns}/{name}"),
            source,
        })?;
        let event = Event {
            type_: EventType::Normal,
            reason: "ConfigApplied".into(),
            note: Some(message),
            action: "Apply".into(),
            secondary: None,
        };
        let reference: ObjectReference = db.object_ref(&());
        ctx.recorder
            .publish(&event, &reference)
            .await
            .map_err(|source| Error::Kube {
                what: format!("event on Database {ns}/{name}"),
                source,
            })?;
    }
    Ok(Action::await_change())
}

/// Sets the `Ready` condition as the guest SDK's `set_condition` does: the transition time
/// is kept while the status stays the same.
fn set_ready(conditions: &mut Vec<Condition>, message: &str, generation: Option<i64>) {
    let mut new = Condition {
        type_: "Ready".into(),
        status: "True".into(),
        reason: "ConfigApplied".into(),
        message: message.into(),
        observed_generation: generation,
        last_transition_time: Time(
            Timestamp::from_second(Timestamp::now().as_second()).unwrap_or(Timestamp::UNIX_EPOCH),
        ),
    };
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(old) => {
            if old.status == new.status {
                new.last_transition_time = old.last_transition_time.clone();
            }
            *old = new;
        }
        None => conditions.push(new),
    }
}

/// A failed reconcile is retried after 1 s, the policy of kube-rs's own examples
/// (kube-runtime leaves it to the user). The benchmark's runs have no failures.
fn error_policy(db: Arc<Database>, error: &Error, _ctx: Arc<Ctx>) -> Action {
    tracing::warn!(database = %db.name_any(), error = %error, "reconcile failed");
    Action::requeue(Duration::from_secs(1))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let client = Client::try_default().await?;
    let recorder = Recorder::new(client.clone(), Reporter::from(FIELD_MANAGER));
    let dbs: Api<Database> = Api::all(client.clone());
    let (reader, writer) = reflector::store();
    let stream = watcher(dbs, watcher::Config::default())
        .default_backoff()
        .modify(|db: &mut Database| db.managed_fields_mut().clear())
        .reflect(writer)
        .inspect(|event| {
            // The first full list is in the store: the cache is synced.
            if matches!(event, Ok(watcher::Event::InitDone)) && !READY.swap(true, Ordering::Relaxed)
            {
                println!("ready");
            }
        })
        .applied_objects()
        .predicate_filter(predicates::generation, Default::default());
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        recorder,
    });
    Controller::for_stream(stream, reader)
        .with_config(ControllerConfig::default().concurrency(CONCURRENCY))
        .owns(Api::<ConfigMap>::all(client), watcher::Config::default())
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
    Ok(())
}
