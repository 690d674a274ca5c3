//! The host's Prometheus metrics and the `/metrics` endpoint that serves them.
//!
//! Names follow controller-runtime where the meaning is the same, so existing dashboards work:
//! `controller_runtime_reconcile_total{controller,result}` and
//! `controller_runtime_reconcile_errors_total{controller}`, with the plugin name as the
//! controller. wasmop's own are prefixed `wasmop_`. Labels are bounded: plugin names, verbs,
//! result labels and states, never object names.

use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeniedLabels {
    plugin: String,
    verb: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    plugin: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReloadLabels {
    plugin: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    plugin: String,
    state: String,
}

/// A plugin's lifecycle state, as reported by `wasmop_plugin_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginState {
    /// One of its kinds is not served by the API server yet (its CRD is missing).
    WaitingForKinds,
    /// Its controller runs.
    Running,
}

impl PluginState {
    const ALL: [PluginState; 2] = [PluginState::WaitingForKinds, PluginState::Running];

    fn label(self) -> &'static str {
        match self {
            PluginState::WaitingForKinds => "waiting-for-kinds",
            PluginState::Running => "running",
        }
    }
}

/// Every metric the host records. Cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    reconciles: Family<ResultLabels, Counter>,
    reconcile_errors: Family<ControllerLabels, Counter>,
    denied: Family<DeniedLabels, Counter>,
    events_dropped: Family<PluginLabels, Counter>,
    plugin_state: Family<StateLabels, Gauge>,
    reloads: Family<ReloadLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric in a fresh registry.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let reconciles = Family::<ResultLabels, Counter>::default();
        registry.register(
            "controller_runtime_reconcile",
            "Reconciles per plugin (controller) and result",
            reconciles.clone(),
        );
        let reconcile_errors = Family::<ControllerLabels, Counter>::default();
        registry.register(
            "controller_runtime_reconcile_errors",
            "Reconciles that did not succeed, per plugin (controller)",
            reconcile_errors.clone(),
        );
        let denied = Family::<DeniedLabels, Counter>::default();
        registry.register(
            "wasmop_host_calls_denied",
            "Host calls refused by the plugin's grants, per plugin and verb",
            denied.clone(),
        );
        let events_dropped = Family::<PluginLabels, Counter>::default();
        registry.register(
            "wasmop_events_dropped",
            "Kubernetes Events not written because of the per-object rate limit",
            events_dropped.clone(),
        );
        let plugin_state = Family::<StateLabels, Gauge>::default();
        registry.register(
            "wasmop_plugin_state",
            "1 for the state each plugin is in (waiting-for-kinds, running)",
            plugin_state.clone(),
        );
        let reloads = Family::<ReloadLabels, Counter>::default();
        registry.register(
            "wasmop_plugin_reloads",
            "Plugin versions offered by the sources, per plugin and result (loaded, unchanged, \
             rejected, removed); `unknown` when a rejected component never said its name",
            reloads.clone(),
        );
        Self {
            registry: Arc::new(registry),
            reconciles,
            reconcile_errors,
            denied,
            events_dropped,
            plugin_state,
            reloads,
        }
    }

    /// Counts one finished reconcile; `result` is a bounded label (an outcome label).
    pub fn reconciled(&self, plugin: &str, result: &str, success: bool) {
        self.reconciles
            .get_or_create(&ResultLabels {
                controller: plugin.to_owned(),
                result: result.to_owned(),
            })
            .inc();
        if !success {
            self.reconcile_errors
                .get_or_create(&ControllerLabels {
                    controller: plugin.to_owned(),
                })
                .inc();
        }
    }

    /// Counts one denied host call.
    pub fn denied(&self, plugin: &str, verb: &str) {
        self.denied
            .get_or_create(&DeniedLabels {
                plugin: plugin.to_owned(),
                verb: verb.to_owned(),
            })
            .inc();
    }

    /// Counts one Event dropped by the rate limit.
    pub fn event_dropped(&self, plugin: &str) {
        self.events_dropped
            .get_or_create(&PluginLabels {
                plugin: plugin.to_owned(),
            })
            .inc();
    }

    /// Records the state a plugin is in (1 for it, 0 for the others).
    pub fn plugin_state(&self, plugin: &str, state: PluginState) {
        for s in PluginState::ALL {
            self.plugin_state
                .get_or_create(&StateLabels {
                    plugin: plugin.to_owned(),
                    state: s.label().to_owned(),
                })
                .set(i64::from(s == state));
        }
    }

    /// Counts one reload of a plugin; `result` is one of the registry's bounded result labels.
    pub fn plugin_reload(&self, plugin: &str, result: &str) {
        self.reloads
            .get_or_create(&ReloadLabels {
                plugin: plugin.to_owned(),
                result: result.to_owned(),
            })
            .inc();
    }

    /// Forgets the state of a plugin that no longer runs (removed from its source).
    pub fn plugin_gone(&self, plugin: &str) {
        for s in PluginState::ALL {
            self.plugin_state.remove(&StateLabels {
                plugin: plugin.to_owned(),
                state: s.label().to_owned(),
            });
        }
    }

    /// The metrics in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Serves `GET /metrics` on `listener` until the task is dropped.
    pub async fn serve(self, listener: TcpListener) {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(conn) => conn,
                Err(error) => {
                    tracing::warn!(%error, "metrics server cannot accept a connection");
                    continue;
                }
            };
            let metrics = self.clone();
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                        let metrics = metrics.clone();
                        async move { Ok::<_, std::convert::Infallible>(metrics.respond(&req)) }
                    });
                if let Err(error) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    tracing::debug!(%error, %peer, "metrics connection ended with an error");
                }
            });
        }
    }

    fn respond<B>(&self, req: &Request<B>) -> Response<Full<Bytes>> {
        let (status, body) = if req.uri().path() == "/metrics" {
            (StatusCode::OK, self.render())
        } else {
            (
                StatusCode::NOT_FOUND,
                "not found: try /metrics\n".to_owned(),
            )
        };
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        response.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        );
        response
    }
}

/// Binds the metrics address; the caller spawns [`Metrics::serve`] with the listener.
pub async fn bind(address: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(address).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denied_calls_are_counted_per_plugin_and_verb() {
        let m = Metrics::new();
        m.denied("database-config", "get");
        m.denied("database-config", "get");
        let text = m.render();
        assert!(
            text.contains(
                r#"wasmop_host_calls_denied_total{plugin="database-config",verb="get"} 2"#
            ),
            "{text}"
        );
    }

    #[test]
    fn plugin_state_is_one_hot() {
        let m = Metrics::new();
        m.plugin_state("p", PluginState::WaitingForKinds);
        m.plugin_state("p", PluginState::Running);
        let text = m.render();
        assert!(
            text.contains(r#"wasmop_plugin_state{plugin="p",state="running"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"wasmop_plugin_state{plugin="p",state="waiting-for-kinds"} 0"#));
    }
}
