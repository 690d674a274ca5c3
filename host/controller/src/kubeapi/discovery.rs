//! Resolves a [`GroupVersionKind`] to the [`ApiResource`] the API serves it as, and whether it
//! is namespaced. Answers are cached; failures are not, so a kind whose CRD is installed later
//! resolves on the next try.
//!
//! A host prefetches, as it starts, everything the API server serves, with aggregated
//! discovery (two requests, `/api` and `/apis`; Kubernetes 1.30+, beta from 1.26) while its
//! plugins are read and loaded ([`Resolver::prefetching`]). Without it each plugin's controller
//! asked for its kinds one group version at a time, after its load, and ten plugins starting
//! together opened a connection (and a TLS handshake) per concurrent request. The snapshot
//! answers for [`SNAPSHOT_FRESH`] after it is taken and is freed then; a kind it does not
//! hold, or any kind when it failed (an older API server) or was freed, is asked for on its
//! own, as before.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use kube::Client;
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{Discovery, Scope};
use tokio::sync::OnceCell;

use super::errors::retrying;
use wasmop_core::cluster::ClusterError;

/// A kind as the API server serves it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Resolved {
    /// Group, version, kind and plural.
    pub resource: ApiResource,
    /// Whether objects of the kind live in namespaces.
    pub namespaced: bool,
}

/// How long a start's snapshot of discovery answers: long enough for a start's plugins to be
/// loaded from the cache and their controllers started (tens of milliseconds; a cold compile
/// of a big plugin takes seconds), short enough that a kind asked for later is asked for then.
const SNAPSHOT_FRESH: Duration = Duration::from_secs(30);

/// How long a start waits for the snapshot before its kinds are asked for one by one.
const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(5);

/// Every kind the API server served when the snapshot was taken, by kind.
type Kinds = HashMap<GroupVersionKind, Resolved>;

/// The snapshot: set once, by the prefetch task or a resolve that found it under way; `None`
/// inside when discovery failed, and once stale (freed).
type Snapshot = OnceCell<Mutex<Option<Kinds>>>;

/// A caching GVK resolver. Cheap to clone.
#[derive(Clone)]
pub struct Resolver {
    client: Client,
    cache: Arc<RwLock<HashMap<GroupVersionKind, Resolved>>>,
    /// The start's snapshot, for a resolver made by [`Resolver::prefetching`].
    snapshot: Option<Arc<Snapshot>>,
}

impl Resolver {
    /// A resolver asking `client`'s API server, kind by kind.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            cache: Arc::default(),
            snapshot: None,
        }
    }

    /// A resolver that starts taking the snapshot of every served kind in the background;
    /// resolves made while it is under way wait for it (up to [`SNAPSHOT_TIMEOUT`]). The
    /// snapshot is freed [`SNAPSHOT_FRESH`] after it is taken.
    pub fn prefetching(client: Client) -> Self {
        let snapshot = Arc::new(Snapshot::new());
        let (held, asking) = (snapshot.clone(), client.clone());
        tokio::spawn(async move {
            held.get_or_init(|| take_snapshot(asking)).await;
            tokio::time::sleep(SNAPSHOT_FRESH).await;
            if let Some(Ok(mut kinds)) = held.get().map(Mutex::lock) {
                *kinds = None;
            }
        });
        Self {
            snapshot: Some(snapshot),
            ..Self::new(client)
        }
    }

    /// Resolves `gvk`.
    ///
    /// # Errors
    /// `NotFound` when the API server does not serve the kind (for a custom resource: its CRD
    /// is not installed or not established yet); `Unavailable` when discovery itself failed.
    pub async fn resolve(&self, gvk: &GroupVersionKind) -> Result<Resolved, ClusterError> {
        if let Some(hit) = self.cached(gvk) {
            return Ok(hit);
        }
        if let Some(hit) = self.snapshotted(gvk).await {
            self.remember(gvk, &hit);
            return Ok(hit);
        }
        let client = self.client.clone();
        let (resource, caps) = retrying("discovery", || kube::discovery::pinned_kind(&client, gvk))
            .await
            .map_err(|e| match e {
                ClusterError::NotFound(_) | ClusterError::Other(_) => {
                    ClusterError::NotFound(format!(
                        "the API server does not serve {}/{} {} (is its CRD installed?)",
                        gvk.group, gvk.version, gvk.kind
                    ))
                }
                other => other,
            })?;
        // Discovery matches the kind exactly within the group and version it was asked for;
        // checked again here, because the grant check was made on the kind as asked, and a
        // resource that answered to another name would pass a check made for a different one.
        if resource.group != gvk.group
            || resource.version != gvk.version
            || resource.kind != gvk.kind
        {
            return Err(ClusterError::NotFound(format!(
                "the API server serves {}/{} {} as {} {}, not as asked",
                gvk.group, gvk.version, gvk.kind, resource.api_version, resource.kind
            )));
        }
        let resolved = Resolved {
            resource,
            namespaced: caps.scope == Scope::Namespaced,
        };
        self.remember(gvk, &resolved);
        Ok(resolved)
    }

    fn cached(&self, gvk: &GroupVersionKind) -> Option<Resolved> {
        self.cache.read().ok()?.get(gvk).cloned()
    }

    fn remember(&self, gvk: &GroupVersionKind, resolved: &Resolved) {
        if let Ok(mut cache) = self.cache.write() {
            cache.insert(gvk.clone(), resolved.clone());
        }
    }

    /// `gvk` as the start's snapshot has it, waiting for the snapshot if it is being taken;
    /// `None` without a snapshot, or once it is freed.
    async fn snapshotted(&self, gvk: &GroupVersionKind) -> Option<Resolved> {
        let client = self.client.clone();
        let kinds = self
            .snapshot
            .as_ref()?
            .get_or_init(|| take_snapshot(client))
            .await;
        kinds.lock().ok()?.as_ref()?.get(gvk).cloned()
    }
}

/// Every kind the API server serves, from aggregated discovery; `None` (logged) when that
/// fails or takes longer than [`SNAPSHOT_TIMEOUT`]: kinds are then asked for one by one.
async fn take_snapshot(client: Client) -> Mutex<Option<Kinds>> {
    let taken = std::time::Instant::now();
    let discovery =
        tokio::time::timeout(SNAPSHOT_TIMEOUT, Discovery::new(client).run_aggregated()).await;
    let discovery = match discovery {
        Ok(Ok(discovery)) => discovery,
        Ok(Err(error)) => {
            tracing::debug!(%error, "aggregated discovery failed; kinds are resolved one by one");
            return Mutex::new(None);
        }
        Err(_) => {
            tracing::debug!(
                timeout_ms = SNAPSHOT_TIMEOUT.as_millis() as u64,
                "aggregated discovery took too long; kinds are resolved one by one"
            );
            return Mutex::new(None);
        }
    };
    let mut kinds = HashMap::new();
    for group in discovery.groups() {
        for version in group.versions() {
            for (resource, caps) in group.versioned_resources(version) {
                let gvk = GroupVersionKind::gvk(&resource.group, &resource.version, &resource.kind);
                kinds.entry(gvk).or_insert(Resolved {
                    resource,
                    namespaced: caps.scope == Scope::Namespaced,
                });
            }
        }
    }
    tracing::debug!(
        kinds = kinds.len(),
        ms = taken.elapsed().as_secs_f64() * 1e3,
        "discovery snapshot taken"
    );
    Mutex::new(Some(kinds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex as StdMutex;

    /// The paths a fake API server was asked for, in order.
    type Asked = Arc<StdMutex<Vec<String>>>;

    const DATABASE: (&str, &str, &str) = ("demo.wasmop.dev", "v1", "Database");
    const CONFIGMAP: (&str, &str, &str) = ("", "v1", "ConfigMap");
    /// Served, but only when asked for by its group version: a CRD installed after the
    /// snapshot.
    const WIDGET: (&str, &str, &str) = ("later.example", "v1", "Widget");

    fn gvk((group, version, kind): (&str, &str, &str)) -> GroupVersionKind {
        GroupVersionKind::gvk(group, version, kind)
    }

    fn aggregated(group: &str, resource: &str, kind: &str, scope: &str) -> serde_json::Value {
        serde_json::json!({
            "kind": "APIGroupDiscoveryList",
            "apiVersion": "apidiscovery.k8s.io/v2",
            "metadata": {},
            "items": [{
                "metadata": {"name": group},
                "versions": [{
                    "version": "v1",
                    "resources": [{
                        "resource": resource,
                        "responseKind": {"group": group, "version": "v1", "kind": kind},
                        "scope": scope,
                        "singularResource": kind.to_lowercase(),
                        "verbs": ["get", "list", "watch"],
                    }],
                }],
            }],
        })
    }

    fn resource_list(group_version: &str, resource: &str, kind: &str) -> serde_json::Value {
        serde_json::json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group_version,
            "resources": [{
                "name": resource,
                "singularName": kind.to_lowercase(),
                "namespaced": true,
                "kind": kind,
                "verbs": ["get", "list", "watch"],
            }],
        })
    }

    /// A client whose API server serves Databases, ConfigMaps and Widgets, the first two in
    /// aggregated discovery when `aggregated_discovery`; otherwise it refuses that document's
    /// media type (406). Any other path is not found.
    fn client(aggregated_discovery: bool) -> (Client, Asked) {
        let asked: Asked = Arc::default();
        let log = asked.clone();
        let service = tower::service_fn(move |req: hyper::Request<kube::client::Body>| {
            let log = log.clone();
            async move {
                let path = req.uri().path().to_owned();
                let wants_aggregated = req
                    .headers()
                    .get(hyper::header::ACCEPT)
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|v| v.contains("as=APIGroupDiscoveryList"));
                log.lock().expect("asked").push(path.clone());
                let body = match (path.as_str(), wants_aggregated) {
                    ("/apis", true) if aggregated_discovery => Some(aggregated(
                        "demo.wasmop.dev",
                        "databases",
                        "Database",
                        "Namespaced",
                    )),
                    ("/api", true) if aggregated_discovery => {
                        Some(aggregated("", "configmaps", "ConfigMap", "Namespaced"))
                    }
                    ("/apis/demo.wasmop.dev/v1", false) => {
                        Some(resource_list("demo.wasmop.dev/v1", "databases", "Database"))
                    }
                    ("/api/v1", false) => Some(resource_list("v1", "configmaps", "ConfigMap")),
                    ("/apis/later.example/v1", false) => {
                        Some(resource_list("later.example/v1", "widgets", "Widget"))
                    }
                    _ => None,
                };
                let (status, body) = match body {
                    Some(body) => (hyper::StatusCode::OK, body),
                    None => {
                        let status = if wants_aggregated {
                            hyper::StatusCode::NOT_ACCEPTABLE
                        } else {
                            hyper::StatusCode::NOT_FOUND
                        };
                        let code = status.as_u16();
                        let body = serde_json::json!({
                            "kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "code": code, "message": format!("{path}: {code}"),
                        });
                        (status, body)
                    }
                };
                let mut response = hyper::Response::new(http_body_util::Full::new(
                    bytes::Bytes::from(body.to_string()),
                ));
                *response.status_mut() = status;
                Ok::<_, std::convert::Infallible>(response)
            }
        });
        (Client::new(service, "default"), asked)
    }

    /// A prefetching resolver over [`client`].
    fn prefetched(aggregated_discovery: bool) -> (Resolver, Asked) {
        let (client, log) = client(aggregated_discovery);
        (Resolver::prefetching(client), log)
    }

    /// Whether the resolver still holds a snapshot it took.
    fn snapshot_held(resolver: &Resolver) -> bool {
        let taken = resolver
            .snapshot
            .as_ref()
            .and_then(|snapshot| snapshot.get());
        taken.is_some_and(|kinds| kinds.lock().expect("kinds").is_some())
    }

    fn asked(log: &Asked) -> Vec<String> {
        log.lock().expect("asked").clone()
    }

    #[tokio::test]
    async fn a_prefetched_snapshot_answers_a_start_s_kinds_with_two_requests() {
        let (resolver, log) = prefetched(true);
        // Ten controllers starting together, each with its primary and owned kind.
        let resolves = (0..10).map(|_| {
            let resolver = resolver.clone();
            async move {
                (
                    resolver.resolve(&gvk(DATABASE)).await,
                    resolver.resolve(&gvk(CONFIGMAP)).await,
                )
            }
        });
        for (database, configmap) in futures::future::join_all(resolves).await {
            let database = database.expect("Database resolves");
            assert_eq!(database.resource.plural, "databases");
            assert_eq!(database.resource.api_version, "demo.wasmop.dev/v1");
            assert!(database.namespaced);
            let configmap = configmap.expect("ConfigMap resolves");
            assert_eq!(configmap.resource.plural, "configmaps");
            assert_eq!(configmap.resource.api_version, "v1");
        }
        let mut seen = asked(&log);
        seen.sort();
        assert_eq!(seen, ["/api", "/apis"], "only the snapshot's two requests");
    }

    #[tokio::test]
    async fn a_kind_the_snapshot_lacks_is_asked_for_by_its_group_version() {
        let (resolver, log) = prefetched(true);
        let widget = resolver
            .resolve(&gvk(WIDGET))
            .await
            .expect("Widget resolves");
        assert_eq!(widget.resource.plural, "widgets");
        assert!(asked(&log).contains(&"/apis/later.example/v1".to_owned()));
        // Not served at all: not found, named, and not cached.
        let missing = resolver
            .resolve(&gvk(("later.example", "v1", "Gadget")))
            .await
            .expect_err("Gadget is not served");
        assert!(
            matches!(&missing, ClusterError::NotFound(m) if m.contains("later.example/v1 Gadget")),
            "{missing:?}"
        );
    }

    #[tokio::test]
    async fn without_aggregated_discovery_kinds_are_asked_for_one_by_one() {
        let (resolver, log) = prefetched(false);
        let database = resolver.resolve(&gvk(DATABASE)).await.expect("Database");
        assert_eq!(database.resource.plural, "databases");
        let configmap = resolver.resolve(&gvk(CONFIGMAP)).await.expect("ConfigMap");
        assert_eq!(configmap.resource.plural, "configmaps");
        let seen = asked(&log);
        assert!(
            seen.contains(&"/apis/demo.wasmop.dev/v1".to_owned()),
            "{seen:?}"
        );
        assert!(seen.contains(&"/api/v1".to_owned()), "{seen:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_stale_snapshot_is_freed_and_kinds_are_asked_for_then() {
        let (resolver, log) = prefetched(true);
        resolver.resolve(&gvk(CONFIGMAP)).await.expect("ConfigMap");
        assert!(!asked(&log).contains(&"/api/v1".to_owned()));
        assert!(snapshot_held(&resolver));
        // Nothing asks meanwhile: the prefetch task frees it on its own.
        tokio::time::sleep(SNAPSHOT_FRESH + Duration::from_secs(1)).await;
        assert!(!snapshot_held(&resolver), "the stale snapshot is freed");
        resolver.resolve(&gvk(DATABASE)).await.expect("Database");
        assert!(
            asked(&log).contains(&"/apis/demo.wasmop.dev/v1".to_owned()),
            "a kind first asked for after the snapshot went stale is asked for then"
        );
    }

    #[tokio::test]
    async fn a_resolver_made_with_new_asks_for_each_kind() {
        let (client, log) = client(true);
        let resolver = Resolver::new(client);
        resolver.resolve(&gvk(DATABASE)).await.expect("Database");
        resolver
            .resolve(&gvk(DATABASE))
            .await
            .expect("Database, cached");
        assert_eq!(asked(&log), ["/apis/demo.wasmop.dev/v1"]);
    }
}
