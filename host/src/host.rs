//! `wasmop run`: wires the configuration, the Kubernetes client, the runtime, the shared
//! watches, leader election, the metrics and probe servers and one controller per plugin
//! together, and runs until SIGINT/SIGTERM ([`crate::shutdown`]).
//!
//! # Guarantees
//! - A plugin that cannot be read or loaded, or that asks for permissions the host config
//!   does not grant, is reported (log line) and left out; the other plugins run.
//! - Two components declaring the same plugin name: the first (in source order) runs, the
//!   second is refused.
//!
//! # Errors
//! Start-up fails only when the host itself cannot run: no Kubernetes client, the metrics
//! or probe address cannot be bound, the runtime cannot start. A running host fails (exit
//! non-zero) when it loses the leader Lease, so that it restarts as a standby, as
//! controller-runtime does.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::sync::{Semaphore, watch};

use crate::config::{Config, PluginSettings};
use crate::controller::{self, Shared};
use crate::events::EventSink;
use crate::kubeapi::KubeCluster;
use crate::kubeapi::discovery::Resolver;
use crate::leader::{self, Elector, LeaderError};
use crate::metrics::Metrics;
use crate::orphans::{self, Orphans};
use crate::plugin::{Permission, PluginInfo, PluginName, Verb};
use crate::policy::{ExtraPermissions, Grants, Policy, kind_label};
use crate::runtime::{LoadOptions, Plugin, Runtime, RuntimeConfig};
use crate::status::{Leadership, State, Status};
use crate::watches::Watches;
use crate::{health, http, shutdown, source};

/// Why the host cannot start.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The kubeconfig file cannot be read.
    #[error("cannot read the kubeconfig {}", .path.display())]
    Kubeconfig {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No Kubernetes client could be configured.
    #[error("cannot configure a Kubernetes client")]
    Client(#[source] kube::Error),
    /// The client configuration was refused.
    #[error("cannot configure a Kubernetes client")]
    ClientConfig(#[source] kube::config::KubeconfigError),
    /// The metrics address cannot be bound.
    #[error("cannot serve metrics on {address}")]
    Metrics {
        /// The address.
        address: std::net::SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The probe address cannot be bound.
    #[error("cannot serve health probes on {address}")]
    Health {
        /// The address.
        address: std::net::SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// This host held the leader Lease and could not renew it: it stops at once so that it
    /// never reconciles beside the new leader.
    #[error("stopping: this host is no longer the leader")]
    LeadershipLost(#[source] LeaderError),
    /// The leader election task failed; nobody renews the Lease, so the host stops.
    #[error("stopping: the leader election task failed")]
    Election(#[source] tokio::task::JoinError),
    /// The plugin runtime cannot start.
    #[error("cannot start the plugin runtime")]
    Runtime(#[source] crate::runtime::RuntimeError),
    /// Waiting for a shutdown signal failed.
    #[error("cannot listen for shutdown signals")]
    Signal(#[source] std::io::Error),
}

/// Why one plugin was left out.
#[derive(Debug, thiserror::Error)]
pub enum PluginRefused {
    /// The host config does not grant a permission the plugin asks for.
    #[error(
        "plugin `{plugin}` asks for {verbs} on {kind}{where_}, which the host config does not \
         grant; grant it under `plugins.{plugin}.grants`"
    )]
    NotGranted {
        /// The plugin.
        plugin: PluginName,
        /// `group/Kind`.
        kind: String,
        /// Verbs not granted.
        verbs: String,
        /// ` in namespace x` or empty.
        where_: String,
    },
    /// Another component already declared this plugin name.
    #[error("plugin `{plugin}` from {} is refused: {} already declares that name", .path.display(), .first.display())]
    Duplicate {
        /// The name.
        plugin: PluginName,
        /// The refused component.
        path: std::path::PathBuf,
        /// The component that runs.
        first: std::path::PathBuf,
    },
}

/// Checks the permissions a plugin asks for (beyond its kinds) against the operator's grants:
/// each asked verb must be granted for the same kind, in every namespace it asks for.
pub fn check_grants(info: &PluginInfo, settings: &PluginSettings) -> Result<(), PluginRefused> {
    // What the plugin's own kinds imply needs no grant (a plugin may restate it).
    let implied = Grants::new(
        &PluginInfo {
            permissions: Vec::new(),
            ..info.clone()
        },
        &Policy::default(),
    )
    .ok();
    for asked in &info.permissions {
        let grants: Vec<&Permission> = settings
            .grants
            .iter()
            .filter(|g| g.group == asked.group && g.kind == asked.kind)
            .collect();
        let covers = |verb: Verb, ns: Option<&String>| {
            grants.iter().any(|g| {
                g.verbs.contains(&verb)
                    && (g.namespaces.is_empty() || ns.is_some_and(|ns| g.namespaces.contains(ns)))
            })
        };
        let namespaces: Vec<Option<&String>> = if asked.namespaces.is_empty() {
            vec![None]
        } else {
            asked.namespaces.iter().map(Some).collect()
        };
        for ns in namespaces {
            let is_implied = |verb: Verb| {
                implied.as_ref().is_some_and(|g| {
                    g.check(verb, &asked.group, &asked.kind, ns.map(String::as_str))
                        .is_ok()
                })
            };
            let missing: Vec<String> = asked
                .verbs
                .iter()
                .filter(|v| !is_implied(**v) && !covers(**v, ns))
                .map(Verb::to_string)
                .collect();
            if !missing.is_empty() {
                return Err(PluginRefused::NotGranted {
                    plugin: info.name.clone(),
                    kind: kind_label(&asked.group, &asked.kind),
                    verbs: missing.join(", "),
                    where_: ns
                        .map(|n| format!(" in namespace `{n}`"))
                        .unwrap_or_default(),
                });
            }
        }
    }
    Ok(())
}

/// A Kubernetes client from the configured kubeconfig, or the inferred one (in-cluster,
/// then `KUBECONFIG`/`~/.kube/config`).
pub async fn client(config: &Config) -> Result<Client, HostError> {
    match &config.kubeconfig {
        Some(path) => {
            let kubeconfig =
                Kubeconfig::read_from(path).map_err(|source| HostError::Kubeconfig {
                    path: path.clone(),
                    source,
                })?;
            let cfg =
                kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                    .await
                    .map_err(HostError::ClientConfig)?;
            Client::try_from(cfg).map_err(HostError::Client)
        }
        None => Client::try_default().await.map_err(HostError::Client),
    }
}

/// Loads every plugin the sources hold, leaving out (and logging) those that fail.
pub async fn load_plugins(runtime: &Runtime, config: &Config) -> Vec<(Plugin, PluginSettings)> {
    let mut loaded: BTreeMap<PluginName, (Plugin, PluginSettings, std::path::PathBuf)> =
        BTreeMap::new();
    for dir in &config.sources {
        let components = match source::read_directory(dir).await {
            Ok(c) => c,
            Err(error) => {
                tracing::error!(error = %controller::chain(&error), "plugin source skipped");
                continue;
            }
        };
        for component in components {
            let path = component.path.clone();
            // The settings depend on the name, which only `describe` tells: load with the
            // defaults first, then apply the plugin's own (no second compilation).
            let probe = match runtime.load(component.bytes, LoadOptions::default()).await {
                Ok(p) => p,
                Err(error) => {
                    tracing::error!(path = %path.display(), error = %controller::chain(&error), "plugin not loaded");
                    continue;
                }
            };
            let name = probe.info().name.clone();
            if let Some((_, _, first)) = loaded.get(&name) {
                let error = PluginRefused::Duplicate {
                    plugin: name,
                    path,
                    first: first.clone(),
                };
                tracing::error!(error = %error, "plugin not loaded");
                continue;
            }
            let settings = config.plugin(&name).clone();
            if let Err(error) = check_grants(probe.info(), &settings) {
                tracing::error!(path = %path.display(), error = %error, "plugin not loaded");
                continue;
            }
            let options = LoadOptions {
                policy: Policy {
                    namespaces: settings.namespaces.clone(),
                    extra_permissions: ExtraPermissions::Grant,
                },
                config: settings.config.clone(),
                limits: Some(settings.limits.clone()),
            };
            match probe.with_options(options) {
                Ok(plugin) => {
                    tracing::info!(
                        plugin = %name,
                        version = %plugin.info().version,
                        digest = %plugin.digest().short(),
                        path = %path.display(),
                        "plugin loaded"
                    );
                    loaded.insert(name, (plugin, settings, path));
                }
                Err(error) => {
                    tracing::error!(plugin = %name, path = %path.display(), error = %controller::chain(&error), "plugin not loaded");
                }
            }
        }
    }
    for name in config.configured_plugins() {
        if !loaded.contains_key(name) {
            tracing::warn!(plugin = %name, "the host config has settings for plugin `{name}`, but no source provides it");
        }
    }
    loaded.into_values().map(|(p, s, _)| (p, s)).collect()
}

/// Runs the host until SIGINT or SIGTERM (then [`shutdown::sequence`]), or until it loses
/// the leader Lease ([`HostError::LeadershipLost`]).
pub async fn run(config: Config) -> Result<(), HostError> {
    let client = client(&config).await?;
    let metrics = Metrics::new();
    let status = Status::new(if config.leader_election.is_some() {
        Leadership::Standby
    } else {
        Leadership::Disabled
    });
    if let Some(address) = config.metrics_address {
        let listener = http::bind(address)
            .await
            .map_err(|source| HostError::Metrics { address, source })?;
        let bound = listener.local_addr().unwrap_or(address);
        tracing::info!(address = %bound, "serving /metrics");
        let m = metrics.clone();
        tokio::spawn(http::serve(listener, "metrics", move |path| m.route(path)));
    }
    if let Some(address) = config.health_address {
        let listener = http::bind(address)
            .await
            .map_err(|source| HostError::Health { address, source })?;
        let bound = listener.local_addr().unwrap_or(address);
        tracing::info!(address = %bound, "serving /healthz, /readyz and /status");
        let s = status.clone();
        tokio::spawn(http::serve(listener, "health", move |path| {
            health::route(&s, path)
        }));
    }
    let limits = crate::runtime::Limits {
        memory: config.max_memory(),
        ..crate::runtime::Limits::default()
    };
    let mut runtime_config = RuntimeConfig::default()
        .concurrency(config.concurrency)
        .limits(limits);
    if let Some(dir) = &config.cache_directory {
        runtime_config = runtime_config.cache_dir(dir);
    }
    let runtime = Runtime::new(runtime_config).map_err(HostError::Runtime)?;
    let plugins = load_plugins(&runtime, &config).await;
    for (plugin, _) in &plugins {
        let (info, digest, stats) = (plugin.info(), plugin.digest().short(), plugin.load_stats());
        status.loaded(info.name.as_str(), &info.version, &digest);
        metrics.plugin_loaded(
            info.name.as_str(),
            &info.version,
            &digest,
            stats.compile_time,
            stats.from_cache,
        );
    }
    status.plugins_loaded();
    tracing::info!(plugins = plugins.len(), "plugins loaded");

    // Leadership: constant `true` without election; else the elector's view.
    let (leading_tx, leading) = watch::channel(config.leader_election.is_none());
    let (release, released) = watch::channel(false);
    let mut election = None;
    if let Some(settings) = config.leader_election.clone() {
        let elector = Elector::new(client.clone(), settings, leader::identity().await);
        election = Some(tokio::spawn(leader::run(
            elector,
            leading_tx,
            released,
            metrics.clone(),
        )));
        let (status, mut leading) = (status.clone(), leading.clone());
        tokio::spawn(async move {
            while leading.changed().await.is_ok() {
                let now = *leading.borrow_and_update();
                status.set_leadership(if now {
                    Leadership::Leader
                } else {
                    Leadership::Standby
                });
            }
        });
    }

    let resolver = Resolver::new(client.clone());
    let watches = Watches::new(client.clone());
    let events = Arc::new(EventSink::new(client.clone(), metrics.clone()));
    let cluster = KubeCluster::new(
        client.clone(),
        resolver.clone(),
        watches.clone(),
        events.clone(),
    );
    let orphans = Orphans::new(client.clone(), &config.namespace);
    let running: BTreeMap<String, orphans::Entry> = plugins
        .iter()
        .filter_map(|(p, s)| {
            Some((
                p.info().name.to_string(),
                controller::finalizer_entry(p.info(), s)?,
            ))
        })
        .collect();
    // Releasing orphaned finalizers writes to the cluster: only the leader does it.
    {
        let (orphans, client, resolver, events) = (
            orphans.clone(),
            client.clone(),
            resolver.clone(),
            events.clone(),
        );
        let grace = config.orphaned_finalizer_grace;
        let mut leading = leading.clone();
        tokio::spawn(async move {
            if leading.wait_for(|l| *l).await.is_err() {
                return;
            }
            release_orphans(orphans, client, resolver, events, running, grace).await;
        });
    }
    let (stop, shutdown) = watch::channel(false);
    let shared = Shared {
        client,
        resolver,
        watches,
        cluster,
        events,
        metrics,
        global: Arc::new(Semaphore::new(
            usize::try_from(config.concurrency).unwrap_or(usize::MAX),
        )),
        resync: config.resync_period,
        shutdown,
        leading,
        status: status.clone(),
        orphans,
    };
    let mut tasks = tokio::task::JoinSet::new();
    for (plugin, settings) in plugins {
        let shared = shared.clone();
        tasks.spawn(async move {
            let name = plugin.info().name.clone();
            if let Err(error) = controller::run(plugin, settings, shared.clone()).await {
                let error = controller::chain(&error);
                tracing::error!(plugin = %name, error = %error, "plugin controller failed");
                shared
                    .status
                    .record(name.as_str(), State::Failed, Some(error));
            }
        });
    }
    // Before the release signal the elector ends only when leadership is lost, or when its
    // task failed (then nobody renews the Lease either): both stop the host.
    let lost = async {
        match &mut election {
            Some(task) => match task.await {
                Ok(Err(error)) => HostError::LeadershipLost(error),
                Ok(Ok(())) => std::future::pending().await,
                Err(error) => HostError::Election(error),
            },
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        signal = shutdown::signal() => signal.map_err(HostError::Signal)?,
        error = lost => {
            tracing::error!(error = %controller::chain(&error), "leader election lost; exiting so that only the new leader reconciles");
            return Err(error);
        }
    }
    shutdown::exit_on_second_signal().map_err(HostError::Signal)?;
    shutdown::sequence(
        &stop,
        &mut tasks,
        config.shutdown_timeout,
        &release,
        election,
    )
    .await;
    Ok(())
}

/// Releases the finalizers of plugins that are recorded but no longer run, after the grace.
async fn release_orphans(
    orphans: Orphans,
    client: Client,
    resolver: Resolver,
    events: Arc<EventSink>,
    running: BTreeMap<String, orphans::Entry>,
    grace: Duration,
) {
    match orphans.entries().await {
        Ok(recorded) => {
            for (plugin, entry) in orphans::orphaned(recorded, &running) {
                tokio::spawn(orphans::release(
                    orphans.clone(),
                    client.clone(),
                    resolver.clone(),
                    events.clone(),
                    plugin,
                    entry,
                    grace,
                ));
            }
        }
        Err(error) => {
            tracing::error!(error = %controller::chain(&error), "cannot read the finalizer record; orphaned finalizers are not released")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::GroupVersionKind;

    fn info(permissions: Vec<Permission>) -> PluginInfo {
        PluginInfo {
            name: PluginName::new("db").expect("name"),
            version: "1".into(),
            primary: GroupVersionKind::gvk("example.com", "v1", "Database"),
            primary_selector: None,
            owns: vec![],
            watches: vec![],
            finalizer: None,
            reconcile_on_metadata_change: false,
            permissions,
        }
    }

    fn perm(verbs: &[Verb], namespaces: &[&str]) -> Permission {
        Permission {
            group: String::new(),
            kind: "Secret".into(),
            verbs: verbs.iter().copied().collect(),
            namespaces: namespaces.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    fn settings(grants: Vec<Permission>) -> PluginSettings {
        let raw = crate::config::Config::parse_raw("", std::path::Path::new("x")).expect("raw");
        let mut s = crate::config::Config::from_raw(raw, None)
            .expect("config")
            .plugin(&PluginName::new("db").expect("name"))
            .clone();
        s.grants = grants;
        s
    }

    #[test]
    fn asked_permission_needs_an_operator_grant() {
        let err = check_grants(&info(vec![perm(&[Verb::Get], &[])]), &settings(vec![]))
            .expect_err("refused");
        assert_eq!(
            err.to_string(),
            "plugin `db` asks for get on core/Secret, which the host config does not grant; \
             grant it under `plugins.db.grants`"
        );
        check_grants(
            &info(vec![perm(&[Verb::Get], &[])]),
            &settings(vec![perm(&[Verb::Get, Verb::List], &[])]),
        )
        .expect("granted");
    }

    #[test]
    fn restating_an_implied_permission_needs_no_grant() {
        let mut i = info(vec![Permission {
            group: "example.com".into(),
            kind: "Database".into(),
            verbs: [Verb::PatchStatus].into(),
            namespaces: vec![],
        }]);
        check_grants(&i, &settings(vec![])).expect("implied by the primary kind");
        i.permissions[0].verbs.insert(Verb::Delete);
        check_grants(&i, &settings(vec![]))
            .expect_err("delete is not implied for the primary kind");
    }

    #[test]
    fn namespaced_grant_covers_only_its_namespaces() {
        let granted = settings(vec![perm(&[Verb::Get], &["a"])]);
        check_grants(&info(vec![perm(&[Verb::Get], &["a"])]), &granted).expect("in a");
        let err = check_grants(&info(vec![perm(&[Verb::Get], &["b"])]), &granted).expect_err("b");
        assert!(err.to_string().contains("in namespace `b`"), "{err}");
        check_grants(&info(vec![perm(&[Verb::Get], &[])]), &granted).expect_err("everywhere");
    }
}
