//! `bench-load`: the load side of wasmop's benchmarks (`bench/run`), not a contender.
//!
//! ```text
//! bench-load converge  NS N [--parallel P]   create N Databases in NS at once; print (JSON)
//!                                            the seconds until every <name>-config ConfigMap
//!                                            exists and every Database is Ready for its
//!                                            generation, watched (no polling)
//! bench-load trickle   NS N --interval-ms MS create N Databases one at a time
//! bench-load configmaps NS N                 create N ConfigMaps; print the sum of their JSON
//!                                            sizes trimmed as wasmop's shared caches trim them
//! bench-load targets   NS N                  create N wasmop.test/v1 Targets
//! ```
//! The namespace is created if missing. The client is the default one (KUBECONFIG).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

/// Why a load step failed.
#[derive(Debug, thiserror::Error)]
enum Error {
    /// The command line is wrong.
    #[error(
        "usage: bench-load (converge|trickle|configmaps|targets) NAMESPACE COUNT [--parallel P] [--interval-ms MS] [--timeout-s S]: {0}"
    )]
    Usage(String),
    /// An API call failed.
    #[error("{what} failed")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
    /// A watch failed.
    #[error("watch of {what} failed")]
    Watch {
        what: String,
        #[source]
        source: watcher::Error,
    },
    /// Convergence did not happen in time.
    #[error("not converged after {0:?}: {1} ConfigMaps, {2} Ready Databases of {3}")]
    Timeout(Duration, usize, usize, usize),
}

struct Args {
    command: String,
    namespace: String,
    count: usize,
    parallel: usize,
    interval: Duration,
    timeout: Duration,
}

fn args() -> Result<Args, Error> {
    let mut it = std::env::args().skip(1);
    let command = it.next().ok_or_else(|| Error::Usage("no command".into()))?;
    let namespace = it
        .next()
        .ok_or_else(|| Error::Usage("no namespace".into()))?;
    let count = it
        .next()
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| Error::Usage("COUNT must be a number".into()))?;
    let mut a = Args {
        command,
        namespace,
        count,
        parallel: 32,
        interval: Duration::from_millis(100),
        timeout: Duration::from_secs(1800),
    };
    while let Some(flag) = it.next() {
        let value: u64 = it
            .next()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| Error::Usage(format!("{flag} needs a number")))?;
        match flag.as_str() {
            "--parallel" => a.parallel = usize::try_from(value).unwrap_or(1).max(1),
            "--interval-ms" => a.interval = Duration::from_millis(value),
            "--timeout-s" => a.timeout = Duration::from_secs(value),
            other => return Err(Error::Usage(format!("unknown flag {other}"))),
        }
    }
    Ok(a)
}

fn database_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("demo.wasmop.dev", "v1", "Database"),
        "databases",
    )
}

fn target_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("wasmop.test", "v1", "Target"),
        "targets",
    )
}

fn database(i: usize) -> Result<DynamicObject, serde_json::Error> {
    let engines = ["postgres", "mysql", "mariadb"];
    serde_json::from_value(json!({
        "apiVersion": "demo.wasmop.dev/v1",
        "kind": "Database",
        "metadata": { "name": format!("db-{i:05}") },
        "spec": {
            "engine": engines[i % engines.len()],
            "host": format!("db-{i:05}.example.internal"),
            "port": 5432 + (i % 100),
            "replicas": i % 4,
        }
    }))
}

async fn ensure_namespace(client: &Client, ns: &str) -> Result<(), Error> {
    let api: Api<Namespace> = Api::all(client.clone());
    let object = Namespace {
        metadata: ObjectMeta {
            name: Some(ns.to_owned()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(source) => Err(Error::Kube {
            what: format!("create of namespace {ns}"),
            source,
        }),
    }
}

async fn create_all(
    api: &Api<DynamicObject>,
    objects: Vec<DynamicObject>,
    parallel: usize,
) -> Result<(), Error> {
    stream::iter(objects.into_iter().map(|o| async move {
        let name = o.name_any();
        api.create(&PostParams::default(), &o)
            .await
            .map(|_| ())
            .map_err(|source| Error::Kube {
                what: format!("create of {name}"),
                source,
            })
    }))
    .buffer_unordered(parallel)
    .try_collect::<Vec<()>>()
    .await
    .map(|_| ())
}

fn is_ready(db: &DynamicObject) -> bool {
    let generation = db.metadata.generation;
    db.data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c["type"] == "Ready"
                    && c["status"] == "True"
                    && c["observedGeneration"].as_i64() == generation
            })
        })
}

async fn converge(client: Client, a: &Args) -> Result<Value, Error> {
    let dbs: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &a.namespace, &database_resource());
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &a.namespace);
    let wanted: HashSet<String> = (0..a.count).map(|i| format!("db-{i:05}")).collect();
    // Watches first, so nothing that happens after the first create is missed.
    let mut db_events = watcher(dbs.clone(), watcher::Config::default())
        .applied_objects()
        .boxed();
    let mut cm_events = watcher(cms, watcher::Config::default())
        .applied_objects()
        .boxed();
    let objects = (0..a.count)
        .map(database)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::Usage(e.to_string()))?;
    let start = Instant::now();
    let creator = {
        let dbs = dbs.clone();
        let parallel = a.parallel;
        tokio::spawn(async move {
            create_all(&dbs, objects, parallel).await?;
            Ok::<_, Error>(start.elapsed())
        })
    };
    let mut ready: HashSet<String> = HashSet::new();
    let mut configs: HashSet<String> = HashSet::new();
    let deadline = tokio::time::sleep(a.timeout);
    tokio::pin!(deadline);
    while ready.len() < a.count || configs.len() < a.count {
        tokio::select! {
            Some(db) = db_events.next() => {
                let db = db.map_err(|source| Error::Watch { what: "Databases".into(), source })?;
                if is_ready(&db) && wanted.contains(&db.name_any()) {
                    ready.insert(db.name_any());
                }
            }
            Some(cm) = cm_events.next() => {
                let cm = cm.map_err(|source| Error::Watch { what: "ConfigMaps".into(), source })?;
                if let Some(owner) = cm.name_any().strip_suffix("-config")
                    && wanted.contains(owner) {
                    configs.insert(owner.to_owned());
                }
            }
            () = &mut deadline => {
                return Err(Error::Timeout(a.timeout, configs.len(), ready.len(), a.count));
            }
        }
    }
    let converged = start.elapsed();
    let created = creator
        .await
        .map_err(|e| Error::Usage(format!("creator task: {e}")))??;
    Ok(json!({
        "objects": a.count,
        "created_s": created.as_secs_f64(),
        "converged_s": converged.as_secs_f64(),
    }))
}

async fn trickle(client: Client, a: &Args) -> Result<Value, Error> {
    let dbs: Api<DynamicObject> = Api::namespaced_with(client, &a.namespace, &database_resource());
    for i in 0..a.count {
        let o = database(i).map_err(|e| Error::Usage(e.to_string()))?;
        create_all(&dbs, vec![o], 1).await?;
        tokio::time::sleep(a.interval).await;
    }
    Ok(json!({ "objects": a.count, "interval_ms": a.interval.as_millis() as u64 }))
}

/// The JSON of `cm` as wasmop's shared watches keep it: no managedFields, no last-applied
/// annotation, apiVersion and kind set (host/src/watches.rs).
fn trimmed_size(mut cm: ConfigMap) -> Result<usize, serde_json::Error> {
    cm.metadata.managed_fields = None;
    if let Some(a) = cm.metadata.annotations.as_mut() {
        a.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
    let mut v = serde_json::to_value(&cm)?;
    v["apiVersion"] = json!("v1");
    v["kind"] = json!("ConfigMap");
    Ok(serde_json::to_vec(&v)?.len())
}

async fn configmaps(client: Client, a: &Args) -> Result<Value, Error> {
    let resource = ApiResource::erase::<ConfigMap>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &a.namespace, &resource);
    let objects = (0..a.count)
        .map(|i| {
            serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": { "name": format!("cache-{i:05}"), "labels": { "bench.wasmop.dev/set": "cache" } },
                "data": { "engine": "postgres", "host": format!("db-{i:05}.example.internal"), "port": "5432",
                          "url": format!("postgres://db-{i:05}.example.internal:5432") }
            }))
        })
        .collect::<Result<Vec<DynamicObject>, _>>()
        .map_err(|e| Error::Usage(e.to_string()))?;
    create_all(&api, objects, a.parallel).await?;
    let typed: Api<ConfigMap> = Api::namespaced(client, &a.namespace);
    let list = typed
        .list(&ListParams::default().labels("bench.wasmop.dev/set=cache"))
        .await
        .map_err(|source| Error::Kube {
            what: "list of ConfigMaps".into(),
            source,
        })?;
    let mut trimmed = 0usize;
    let mut full = 0usize;
    for cm in list.items {
        full += serde_json::to_vec(&cm)
            .map_err(|e| Error::Usage(e.to_string()))?
            .len();
        trimmed += trimmed_size(cm).map_err(|e| Error::Usage(e.to_string()))?;
    }
    Ok(json!({ "objects": a.count, "trimmed_json_bytes": trimmed, "full_json_bytes": full }))
}

async fn targets(client: Client, a: &Args) -> Result<Value, Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(client, &a.namespace, &target_resource());
    let objects = (0..a.count)
        .map(|i| {
            serde_json::from_value(json!({
                "apiVersion": "wasmop.test/v1", "kind": "Target",
                "metadata": { "name": format!("t-{i:05}") },
                "spec": { "value": format!("v{i}") }
            }))
        })
        .collect::<Result<Vec<DynamicObject>, _>>()
        .map_err(|e| Error::Usage(e.to_string()))?;
    create_all(&api, objects, a.parallel).await?;
    Ok(json!({ "objects": a.count }))
}

#[tokio::main]
async fn main() {
    let result = async {
        let a = args()?;
        let client = Client::try_default().await.map_err(|source| Error::Kube {
            what: "client from KUBECONFIG".into(),
            source,
        })?;
        ensure_namespace(&client, &a.namespace).await?;
        match a.command.as_str() {
            "converge" => converge(client, &a).await,
            "trickle" => trickle(client, &a).await,
            "configmaps" => configmaps(client, &a).await,
            "targets" => targets(client, &a).await,
            other => Err(Error::Usage(format!("unknown command {other}"))),
        }
    }
    .await;
    match result {
        Ok(v) => println!("{v}"),
        Err(e) => {
            let mut msg = format!("bench-load: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                msg.push_str(&format!(": {s}"));
                source = s.source();
            }
            eprintln!("{msg}");
            std::process::exit(1);
        }
    }
}
