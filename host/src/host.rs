//! `wasmop run`: wires the configuration, the Kubernetes client, the runtime, the shared
//! watches, leader election, the metrics and probe servers, the plugin sources and the
//! [`Registry`] (which runs one controller per plugin) together, and runs until
//! SIGINT/SIGTERM ([`crate::shutdown`]).
//!
//! # Guarantees
//! - A plugin that cannot be read or loaded, or that asks for permissions the host config
//!   does not grant, is reported and left out; the other plugins run (see
//!   [`crate::registry`] for what happens to a new version while the host runs).
//! - Two components declaring the same plugin name: the first (in source order) runs, the
//!   second is refused.
//!
//! # Errors
//! Start-up fails only when the host itself cannot run: no Kubernetes client, the metrics
//! or probe address cannot be bound, the runtime cannot start. A running host fails (exit
//! non-zero) when it loses the leader Lease, so that it restarts as a standby, as
//! controller-runtime does.

use std::sync::Arc;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::sync::{Semaphore, mpsc, watch};

use crate::config::{Config, PluginSettings};
use crate::controller::{self, Shared};
use crate::events::EventSink;
use crate::kubeapi::KubeCluster;
use crate::kubeapi::discovery::Resolver;
use crate::leader::{self, Elector, LeaderError};
use crate::metrics::Metrics;
use crate::orphans::Orphans;
use crate::plugin::{Permission, PluginInfo, PluginName, Verb};
use crate::policy::{
    Grants, OWNED_VERBS, PRIMARY_VERBS, Policy, SensitiveKinds, WATCHED_VERBS, kind_label,
};
use crate::registry::Registry;
use crate::runtime::Runtime;
use crate::source::Source;
use crate::status::{Leadership, Status};
use crate::watches::{Skipped, Watches};
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
    /// A kind the plugin declares is sensitive, and the operator granted nothing on it.
    #[error(
        "plugin `{plugin}` {role} {}, a sensitive kind: what that implies ({verbs}) needs \
         an explicit grant; add `{{group: \"{group}\", kind: {kind_name}, verbs: [{verbs}]}}` \
         (or the verbs it needs) under `plugins.{plugin}.grants`",
        kind_label(.group, .kind_name)
    )]
    SensitiveKind {
        /// The plugin.
        plugin: PluginName,
        /// How it declares the kind: `reconciles`, `owns` or `watches`.
        role: &'static str,
        /// The group.
        group: String,
        /// The kind.
        kind_name: String,
        /// The verbs the declaration implies, comma-separated.
        verbs: String,
    },
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
}

/// Checks the permissions a plugin asks for (beyond its kinds) against the operator's grants:
/// each asked verb must be granted for the same kind, in every namespace it asks for. A
/// primary, owned or watched kind that is sensitive needs an explicit grant of its own (its
/// kinds imply nothing there), or the plugin is refused.
pub fn check_grants(
    info: &PluginInfo,
    settings: &PluginSettings,
    sensitive: &SensitiveKinds,
) -> Result<(), PluginRefused> {
    check_sensitive(info, settings, sensitive)?;
    // What the plugin's own kinds imply needs no grant (a plugin may restate it); on a
    // sensitive kind they imply nothing.
    let implied = Grants::new(
        &PluginInfo {
            permissions: Vec::new(),
            ..info.clone()
        },
        &Policy {
            sensitive: sensitive.clone(),
            ..Policy::default()
        },
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
                implied.as_ref().is_some_and(|g| match ns {
                    Some(ns) => g.check(verb, &asked.group, &asked.kind, Some(ns)).is_ok(),
                    None => g.covers_everywhere(verb, &asked.group, &asked.kind),
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

/// Refuses a plugin that declares a sensitive kind the operator granted nothing on.
fn check_sensitive(
    info: &PluginInfo,
    settings: &PluginSettings,
    sensitive: &SensitiveKinds,
) -> Result<(), PluginRefused> {
    let declared = std::iter::once(("reconciles", &info.primary, PRIMARY_VERBS.as_slice()))
        .chain(
            info.owns
                .iter()
                .map(|k| ("owns", k, OWNED_VERBS.as_slice())),
        )
        .chain(
            info.watches
                .iter()
                .map(|w| ("watches", &w.kind, WATCHED_VERBS.as_slice())),
        );
    for (role, kind, verbs) in declared {
        let granted = settings
            .grants
            .iter()
            .any(|g| g.group == kind.group && g.kind == kind.kind);
        if sensitive.contains(&kind.group, &kind.kind) && !granted {
            return Err(PluginRefused::SensitiveKind {
                plugin: info.name.clone(),
                role,
                group: kind.group.clone(),
                kind_name: kind.kind.clone(),
                verbs: verbs
                    .iter()
                    .map(Verb::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
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
    let runtime = Runtime::new(config.runtime_config()).map_err(HostError::Runtime)?;

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
    let events = Arc::new(EventSink::new(client.clone(), metrics.clone()));
    let skipped = Arc::new(Skipped::new(metrics.clone(), Some(events.clone())));
    let watches = Watches::new(client.clone(), skipped);
    let cluster = KubeCluster::new(
        client.clone(),
        resolver.clone(),
        watches.clone(),
        events.clone(),
    );
    let orphans = Orphans::new(client.clone(), &config.namespace);
    let (stop, shutdown) = watch::channel(false);
    let shared = Shared {
        client: client.clone(),
        resolver,
        watches,
        cluster,
        events,
        metrics,
        global: Arc::new(Semaphore::new(
            usize::try_from(config.concurrency).unwrap_or(usize::MAX),
        )),
        resync: config.resync_period,
        shutdown: shutdown.clone(),
        leading,
        status: status.clone(),
        orphans,
    };
    let (updates, received) = mpsc::channel(16);
    for (index, source) in config.sources.iter().enumerate() {
        let (updates, shutdown) = (updates.clone(), shutdown.clone());
        match source.clone() {
            Source::Directory(dir) => {
                tokio::spawn(source::directory::watch(
                    index,
                    dir,
                    source::directory::DEBOUNCE,
                    updates,
                    shutdown,
                ));
            }
            Source::ConfigMap { namespace, name } => {
                tokio::spawn(source::configmap::watch(
                    index,
                    client.clone(),
                    namespace,
                    name,
                    updates,
                    shutdown,
                ));
            }
        }
    }
    drop(updates);
    let shutdown_timeout = config.shutdown_timeout;
    // The registry runs every plugin's controller and returns once they have all ended; then
    // the Events their last reconciles queued are written. The shutdown sequence drains both
    // within the shutdown timeout, before the Lease is released.
    let mut tasks = tokio::task::JoinSet::new();
    let events = shared.events.clone();
    tasks.spawn(async move {
        Registry::new(runtime, config, shared).run(received).await;
        events.flush().await;
    });
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
    shutdown::sequence(&stop, &mut tasks, shutdown_timeout, &release, election).await;
    Ok(())
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

    fn builtin() -> SensitiveKinds {
        SensitiveKinds::builtin()
    }

    #[test]
    fn a_sensitive_owned_kind_needs_an_explicit_grant_and_the_refusal_names_it() {
        let mut i = info(vec![]);
        i.owns = vec![GroupVersionKind::gvk("", "v1", "Secret")];
        let err = check_grants(&i, &settings(vec![]), &builtin()).expect_err("refused");
        assert_eq!(
            err.to_string(),
            "plugin `db` owns core/Secret, a sensitive kind: what that implies (get, list, \
             create, patch, apply, delete) needs an explicit grant; add `{group: \"\", kind: \
             Secret, verbs: [get, list, create, patch, apply, delete]}` (or the verbs it needs) \
             under `plugins.db.grants`"
        );
        check_grants(&i, &settings(vec![perm(&[Verb::Get], &[])]), &builtin())
            .expect("granted explicitly");
        i.owns = vec![GroupVersionKind::gvk(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRoleBinding",
        )];
        let err = check_grants(&i, &settings(vec![]), &builtin()).expect_err("RBAC");
        assert!(
            err.to_string()
                .contains("rbac.authorization.k8s.io/ClusterRoleBinding"),
            "{err}"
        );
        let mut watching = info(vec![]);
        watching.watches = vec![crate::plugin::Watch {
            kind: GroupVersionKind::gvk("", "v1", "ConfigMap"),
            selector: None,
            mapping: crate::plugin::Mapping::All,
        }];
        check_grants(&watching, &settings(vec![]), &builtin()).expect("not sensitive");
        let err = check_grants(
            &watching,
            &settings(vec![]),
            &builtin().with("", "ConfigMap"),
        )
        .expect_err("the operator's own sensitive kind");
        assert!(err.to_string().contains("watches core/ConfigMap"), "{err}");
    }

    #[test]
    fn asked_permission_needs_an_operator_grant() {
        let err = check_grants(
            &info(vec![perm(&[Verb::Get], &[])]),
            &settings(vec![]),
            &builtin(),
        )
        .expect_err("refused");
        assert_eq!(
            err.to_string(),
            "plugin `db` asks for get on core/Secret, which the host config does not grant; \
             grant it under `plugins.db.grants`"
        );
        check_grants(
            &info(vec![perm(&[Verb::Get], &[])]),
            &settings(vec![perm(&[Verb::Get, Verb::List], &[])]),
            &builtin(),
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
        check_grants(&i, &settings(vec![]), &builtin()).expect("implied by the primary kind");
        i.permissions[0].verbs.insert(Verb::Delete);
        check_grants(&i, &settings(vec![]), &builtin())
            .expect_err("delete is not implied for the primary kind");
    }

    #[test]
    fn namespaced_grant_covers_only_its_namespaces() {
        let granted = settings(vec![perm(&[Verb::Get], &["a"])]);
        check_grants(
            &info(vec![perm(&[Verb::Get], &["a"])]),
            &granted,
            &builtin(),
        )
        .expect("in a");
        let err = check_grants(
            &info(vec![perm(&[Verb::Get], &["b"])]),
            &granted,
            &builtin(),
        )
        .expect_err("b");
        assert!(err.to_string().contains("in namespace `b`"), "{err}");
        check_grants(&info(vec![perm(&[Verb::Get], &[])]), &granted, &builtin())
            .expect_err("everywhere");
    }
}
