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
//! bench-load admit     NS N [--parallel P]   N dry-run creates of valid Databases, P at a
//!                                            time (admission runs, nothing is stored); print
//!                                            requests/s and per-create p50/p99 latency
//! bench-load post URL CA_FILE N [--parallel P]
//!                                            POST N AdmissionReviews of a valid Database
//!                                            create straight to a webhook (no API server),
//!                                            over P kept-alive TLS connections trusting
//!                                            CA_FILE; print reviews/s and p50/p99
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
        "usage: bench-load (converge|trickle|configmaps|targets|admit) NAMESPACE COUNT [--parallel P] [--interval-ms MS] [--timeout-s S]: {0}"
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

/// The latency at quantile `q` of sorted `samples`, in ms.
fn quantile_ms(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

/// Dry-run creates: every admission step runs (mutating and validating webhooks, policies,
/// the schema), nothing is written to etcd, so each configuration is measured on the same
/// empty namespace.
async fn admit(client: Client, a: &Args) -> Result<Value, Error> {
    let dbs: Api<DynamicObject> = Api::namespaced_with(client, &a.namespace, &database_resource());
    let objects = (0..a.count)
        .map(|i| {
            let mut o = database(i)?;
            o.data["spec"]["replicas"] = json!(1 + i % 3);
            Ok(o)
        })
        .collect::<Result<Vec<_>, serde_json::Error>>()
        .map_err(|e| Error::Usage(e.to_string()))?;
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let start = Instant::now();
    let results: Vec<Result<Duration, String>> = stream::iter(objects.into_iter().map(|o| {
        let (dbs, dry) = (dbs.clone(), dry.clone());
        async move {
            let t = Instant::now();
            match dbs.create(&dry, &o).await {
                Ok(_) => Ok(t.elapsed()),
                Err(e) => Err(e.to_string()),
            }
        }
    }))
    .buffer_unordered(a.parallel)
    .collect()
    .await;
    let elapsed = start.elapsed();
    let mut latencies: Vec<Duration> = results
        .iter()
        .filter_map(|r| r.as_ref().ok().copied())
        .collect();
    let failures: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    latencies.sort();
    Ok(json!({
        "requests": a.count,
        "parallel": a.parallel,
        "seconds": elapsed.as_secs_f64(),
        "per_s": a.count as f64 / elapsed.as_secs_f64(),
        "p50_ms": quantile_ms(&latencies, 0.5),
        "p99_ms": quantile_ms(&latencies, 0.99),
        "failures": failures.len(),
        "first_failure": failures.first(),
    }))
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

/// A review's body: the AdmissionReview the API server would send for a create of `db-i`.
fn admission_review(i: usize) -> Result<Vec<u8>, serde_json::Error> {
    let object = serde_json::to_value(database(i)?)?;
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": format!("00000000-0000-0000-0000-{i:012}"),
            "kind": {"group": "demo.wasmop.dev", "version": "v1", "kind": "Database"},
            "resource": {"group": "demo.wasmop.dev", "version": "v1", "resource": "databases"},
            "name": format!("db-{i:05}"),
            "namespace": "admit-bench",
            "operation": "CREATE",
            "userInfo": {"username": "bench", "groups": ["system:authenticated"]},
            "object": object,
            "dryRun": false
        }
    }))
}

/// `post`: reviews straight to a webhook server, `parallel` connections at once.
async fn post() -> Result<Value, Error> {
    use http_body_util::{BodyExt, Full};
    use rustls::pki_types::pem::PemObject;
    let usage = |m: &str| Error::Usage(m.to_owned());
    let mut it = std::env::args().skip(2);
    let url = it.next().ok_or_else(|| usage("no URL"))?;
    let ca = it.next().ok_or_else(|| usage("no CA file"))?;
    let count: usize = it
        .next()
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| usage("COUNT must be a number"))?;
    let parallel: usize = match (it.next().as_deref(), it.next()) {
        (Some("--parallel"), Some(p)) => p.parse().map_err(|_| usage("--parallel P"))?,
        _ => 1,
    };
    let uri: hyper::Uri = url.parse().map_err(|_| usage("URL"))?;
    let host = uri.host().ok_or_else(|| usage("URL host"))?.to_owned();
    let port = uri.port_u16().unwrap_or(443);
    let path = uri.path().to_owned();
    let mut roots = rustls::RootCertStore::empty();
    let pem = std::fs::read(&ca).map_err(|e| usage(&format!("{ca}: {e}")))?;
    roots
        .add(
            rustls::pki_types::CertificateDer::from_pem_slice(&pem)
                .map_err(|e| usage(&e.to_string()))?,
        )
        .map_err(|e| usage(&e.to_string()))?;
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| usage(&e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(tls));
    let bodies: Vec<Vec<u8>> = (0..count)
        .map(admission_review)
        .collect::<Result<_, _>>()
        .map_err(|e| usage(&e.to_string()))?;
    let bodies = std::sync::Arc::new(bodies);
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..parallel.max(1) {
        let (connector, host, path, bodies, next) = (
            connector.clone(),
            host.clone(),
            path.clone(),
            bodies.clone(),
            next.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
                .await
                .map_err(|e| e.to_string())?;
            let _ = tcp.set_nodelay(true);
            let name =
                rustls::pki_types::ServerName::try_from(host.clone()).map_err(|e| e.to_string())?;
            let stream = connector
                .connect(name, tcp)
                .await
                .map_err(|e| e.to_string())?;
            let (mut sender, conn) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                    .await
                    .map_err(|e| e.to_string())?;
            tokio::spawn(conn);
            let (mut latencies, mut failures) = (Vec::new(), 0usize);
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= bodies.len() {
                    break;
                }
                let request = hyper::Request::post(path.as_str())
                    .header(hyper::header::HOST, host.as_str())
                    .header(hyper::header::CONTENT_TYPE, "application/json")
                    .body(Full::new(hyper::body::Bytes::from(bodies[i].clone())))
                    .map_err(|e| e.to_string())?;
                let t = Instant::now();
                let response = sender
                    .send_request(request)
                    .await
                    .map_err(|e| e.to_string())?;
                let ok = response.status() == 200;
                let body = response
                    .into_body()
                    .collect()
                    .await
                    .map_err(|e| e.to_string())?
                    .to_bytes();
                let allowed = serde_json::from_slice::<Value>(&body)
                    .is_ok_and(|v| v["response"]["allowed"] == true);
                latencies.push(t.elapsed());
                if !(ok && allowed) {
                    failures += 1;
                }
            }
            Ok::<_, String>((latencies, failures))
        }));
    }
    let (mut latencies, mut failures) = (Vec::new(), 0);
    for t in tasks {
        let (l, f) = t
            .await
            .map_err(|e| usage(&e.to_string()))?
            .map_err(|e| usage(&e))?;
        latencies.extend(l);
        failures += f;
    }
    let elapsed = start.elapsed();
    latencies.sort();
    Ok(json!({
        "requests": count,
        "parallel": parallel,
        "seconds": elapsed.as_secs_f64(),
        "per_s": count as f64 / elapsed.as_secs_f64(),
        "p50_ms": quantile_ms(&latencies, 0.5),
        "p99_ms": quantile_ms(&latencies, 0.99),
        "failures": failures,
    }))
}

#[tokio::main]
async fn main() {
    if std::env::args().nth(1).as_deref() == Some("post") {
        match post().await {
            Ok(v) => println!("{v}"),
            Err(e) => {
                eprintln!("bench-load: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
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
            "admit" => admit(client, &a).await,
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
