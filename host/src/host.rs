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
use tokio::task::JoinHandle;

use crate::admission::certs;
use crate::admission::register::Registrar;
use crate::admission::serve::Server;
use crate::config::Config;
use crate::config::admission::AdmissionConfig;
use crate::registry::Registry;
use crate::{admission, health, http, kubeclient, shutdown};
use wasmop_controller::controller::Shared;
use wasmop_controller::events::EventSink;
use wasmop_controller::kubeapi::KubeCluster;
use wasmop_controller::kubeapi::discovery::Resolver;
use wasmop_controller::leader::{self, Elector, LeaderError};
use wasmop_controller::metrics::Metrics;
use wasmop_controller::orphans::Orphans;
use wasmop_controller::source;
use wasmop_controller::source::{Source, Update};
use wasmop_controller::status::{Leadership, Status};
use wasmop_controller::watches::{Skipped, Watches};
use wasmop_runtime::Runtime;

/// Why the host cannot start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HostError {
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
    Runtime(#[source] wasmop_runtime::RuntimeError),
    /// The admission webhook server cannot start: its CA or its certificate.
    #[error("cannot serve admission webhooks")]
    AdmissionCertificates(#[source] crate::admission::certs::CertError),
    /// The admission address cannot be bound.
    #[error("cannot serve admission webhooks on {address}")]
    AdmissionAddress {
        /// The address.
        address: std::net::SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Waiting for a shutdown signal failed.
    #[error("cannot listen for shutdown signals")]
    Signal(#[source] std::io::Error),
}

/// A Kubernetes client from the configured kubeconfig, or the inferred one (in-cluster,
/// then `KUBECONFIG`/`~/.kube/config`).
pub(crate) async fn client(config: &Config) -> Result<Client, HostError> {
    let cfg = match &config.kubeconfig {
        Some(path) => {
            let kubeconfig =
                Kubeconfig::read_from(path).map_err(|source| HostError::Kubeconfig {
                    path: path.clone(),
                    source,
                })?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(HostError::ClientConfig)?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| HostError::Client(kube::Error::InferConfig(e)))?,
    };
    kubeclient::client(cfg).map_err(HostError::Client)
}

/// Runs the host until SIGINT or SIGTERM (then [`shutdown::sequence`]), or until it loses
/// the leader Lease ([`HostError::LeadershipLost`]).
pub(crate) async fn run(config: Config) -> Result<(), HostError> {
    let client = client(&config).await?;
    let metrics = Metrics::new();
    let status = Status::new(if config.leader_election.is_some() {
        Leadership::Standby
    } else {
        Leadership::Disabled
    });
    serve_probes(&config, &metrics, &status).await?;
    let runtime = Runtime::new(config.runtime_config()).map_err(HostError::Runtime)?;
    let mut election = start_election(&config, &client, &metrics, &status).await;
    let (stop, shutdown) = watch::channel(false);
    let shared = shared(
        &config,
        client.clone(),
        metrics,
        status,
        election.leading.clone(),
        shutdown.clone(),
    );
    let (webhooks, catalog) = watch::channel(admission::Catalog::default());
    if let Some(settings) = &config.admission {
        serve_admission(settings, &config.namespace, &shared, catalog, &shutdown).await?;
    }
    let received = watch_sources(&config, &client, &shutdown);
    let shutdown_timeout = config.shutdown_timeout;
    // The registry runs every plugin's controller and returns once they have all ended; then
    // the Events their last reconciles queued are written. The shutdown sequence drains both
    // within the shutdown timeout, before the Lease is released.
    let mut tasks = tokio::task::JoinSet::new();
    let events = shared.events.clone();
    tasks.spawn(async move {
        Registry::new(runtime, config, shared, webhooks)
            .run(received)
            .await;
        events.flush().await;
    });
    tokio::select! {
        signal = shutdown::signal() => signal.map_err(HostError::Signal)?,
        error = leadership_lost(&mut election.task) => {
            tracing::error!(error = %wasmop_core::chain(&error), "leader election lost; exiting so that only the new leader reconciles");
            return Err(error);
        }
    }
    shutdown::exit_on_second_signal().map_err(HostError::Signal)?;
    let Election { release, task, .. } = election;
    shutdown::sequence(&stop, &mut tasks, shutdown_timeout, &release, task).await;
    Ok(())
}

/// Binds and serves `/metrics` and the probes (`/healthz`, `/readyz`, `/status`) on their
/// configured addresses, unless disabled. Binding happens here, at start, so that an address
/// in use fails the start rather than a background task.
async fn serve_probes(
    config: &Config,
    metrics: &Metrics,
    status: &Status,
) -> Result<(), HostError> {
    if let Some(address) = config.metrics_address {
        let listener = http::bind(address)
            .await
            .map_err(|source| HostError::Metrics { address, source })?;
        let bound = listener.local_addr().unwrap_or(address);
        tracing::info!(address = %bound, "serving /metrics");
        let m = metrics.clone();
        tokio::spawn(http::serve(listener, "metrics", move |path| {
            http::metrics_route(&m, path)
        }));
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
    Ok(())
}

/// Starts the admission webhook server on its address, with its certificate (issued by the
/// host from the shared CA and renewed, or read from files or a Secret and read again on
/// change), and the registration of the webhooks (written while this host leads). Every
/// replica serves.
async fn serve_admission(
    settings: &AdmissionConfig,
    namespace: &str,
    shared: &Shared,
    catalog: watch::Receiver<admission::Catalog>,
    shutdown: &watch::Receiver<bool>,
) -> Result<(), HostError> {
    let (rotating, trusted) = certs::start(settings, shared.client.clone(), namespace)
        .await
        .map_err(HostError::AdmissionCertificates)?;
    let tls = certs::server_config(rotating).map_err(HostError::AdmissionCertificates)?;
    let address = settings.address;
    let listener = http::bind(address)
        .await
        .map_err(|source| HostError::AdmissionAddress { address, source })?;
    let bound = listener.local_addr().unwrap_or(address);
    tracing::info!(address = %bound, configuration = settings.configuration_name, "serving admission webhooks");
    let server = Server::new(
        catalog.clone(),
        shared.metrics.clone(),
        settings.concurrency,
        settings.max_request_bytes,
    );
    let mut remembered = catalog.clone();
    let memory = server.clone();
    tokio::spawn(async move {
        loop {
            memory.remember(&remembered.borrow_and_update().clone());
            if remembered.changed().await.is_err() {
                return;
            }
        }
    });
    tokio::spawn(server.serve(listener, tls));
    let registrar = Registrar::new(
        shared.client.clone(),
        shared.resolver.clone(),
        settings.clone(),
        namespace.to_owned(),
        trusted,
    );
    tokio::spawn(registrar.run(catalog, shared.leading.clone(), shutdown.clone()));
    Ok(())
}

/// Leadership as the rest of the host sees it, and the handles the shutdown needs.
struct Election {
    /// Whether this host leads: constant `true` without election; else the elector's view.
    leading: watch::Receiver<bool>,
    /// Set by the shutdown sequence to make the elector release the Lease.
    release: watch::Sender<bool>,
    /// The elector's task; `None` without election.
    task: Option<JoinHandle<Result<(), LeaderError>>>,
    /// Without election, the channel ends an elector would hold, kept open for the host's
    /// lifetime: a closed `leading` would end its receivers' `changed()` at once.
    _idle_ends: Option<(watch::Sender<bool>, watch::Receiver<bool>)>,
}

/// Starts the elector when leader election is on, and keeps `/status`'s leadership in step
/// with it.
async fn start_election(
    config: &Config,
    client: &Client,
    metrics: &Metrics,
    status: &Status,
) -> Election {
    let (leading_tx, leading) = watch::channel(config.leader_election.is_none());
    let (release, released) = watch::channel(false);
    let Some(settings) = config.leader_election.clone() else {
        return Election {
            leading,
            release,
            task: None,
            _idle_ends: Some((leading_tx, released)),
        };
    };
    let elector = Elector::new(client.clone(), settings, leader::identity().await);
    let task = tokio::spawn(leader::run(elector, leading_tx, released, metrics.clone()));
    let (status, mut follow) = (status.clone(), leading.clone());
    tokio::spawn(async move {
        while follow.changed().await.is_ok() {
            let now = *follow.borrow_and_update();
            status.set_leadership(if now {
                Leadership::Leader
            } else {
                Leadership::Standby
            });
        }
    });
    Election {
        leading,
        release,
        task: Some(task),
        _idle_ends: None,
    }
}

/// What every plugin's controller shares: the client and its discovery, the watches and
/// caches, the Event sink, metrics, the global call limit, leadership, the finalizer record.
fn shared(
    config: &Config,
    client: Client,
    metrics: Metrics,
    status: Status,
    leading: watch::Receiver<bool>,
    shutdown: watch::Receiver<bool>,
) -> Shared {
    // Discovery's snapshot is taken while the plugins are read and loaded, so that their
    // controllers start as each load ends rather than after a discovery request of their own.
    let resolver = Resolver::prefetching(client.clone());
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
    Shared {
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
        reconcile_on_new_version: config.reconcile_on_new_version,
        shutdown,
        leading,
        status,
        orphans,
    }
}

/// Starts a watch of every plugin source; their updates arrive on the returned channel,
/// which closes once every watch has ended.
fn watch_sources(
    config: &Config,
    client: &Client,
    shutdown: &watch::Receiver<bool>,
) -> mpsc::Receiver<Update> {
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
    received
}

/// Ends when the elector does before the release signal: only when leadership is lost, or
/// when its task failed (then nobody renews the Lease either); both stop the host. Never
/// without election.
async fn leadership_lost(task: &mut Option<JoinHandle<Result<(), LeaderError>>>) -> HostError {
    match task {
        Some(task) => match task.await {
            Ok(Err(error)) => HostError::LeadershipLost(error),
            Ok(Ok(())) => std::future::pending().await,
            Err(error) => HostError::Election(error),
        },
        None => std::future::pending().await,
    }
}
