//! The admission webhook server's requests and the reviews they ran: controller-runtime's
//! `controller_runtime_webhook_*` families (labelled by the webhook's path, which names a
//! plugin the host runs, or `other` for a path it does not serve) and wasmop's
//! `wasmop_admission_reviews_total{plugin,review,operation,outcome}`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::{Histograms, Metrics, latency_histogram, registered};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WebhookLabels {
    webhook: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    webhook: String,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReviewLabels {
    plugin: String,
    review: String,
    operation: String,
    outcome: String,
}

/// The webhook families.
#[derive(Clone)]
pub(super) struct Webhooks {
    requests: Family<RequestLabels, Counter>,
    latency: Histograms<WebhookLabels>,
    in_flight: Family<WebhookLabels, Gauge>,
    reviews: Family<ReviewLabels, Counter>,
}

impl Webhooks {
    /// Registers the webhook families in `r`.
    pub(super) fn register(r: &mut Registry) -> Self {
        Self {
            requests: registered(
                r,
                "controller_runtime_webhook_requests",
                "Admission requests answered, per webhook path and HTTP status code",
                Family::default(),
            ),
            latency: registered(
                r,
                "controller_runtime_webhook_latency_seconds",
                "How long admission requests took to answer, per webhook path",
                Family::new_with_constructor(latency_histogram),
            ),
            in_flight: registered(
                r,
                "controller_runtime_webhook_requests_in_flight",
                "Admission requests being answered now, per webhook path",
                Family::default(),
            ),
            reviews: registered(
                r,
                "wasmop_admission_reviews",
                "Admission reviews per plugin, review (validate, mutate), operation and outcome \
                 (allowed, patched, denied; failed-closed and failed-open when the plugin could \
                 not answer and its failure policy decided)",
                Family::default(),
            ),
        }
    }
}

/// A request being answered: counted in flight until [`WebhookRequest::done`] (or drop).
#[must_use = "a request in flight is counted until it is done"]
pub struct WebhookRequest {
    metrics: Metrics,
    webhook: String,
    started: std::time::Instant,
    done: bool,
}

impl WebhookRequest {
    /// The request ended with HTTP status `code`.
    pub fn done(mut self, code: u16) {
        self.finish(code);
    }

    fn finish(&mut self, code: u16) {
        if self.done {
            return;
        }
        self.done = true;
        let w = &self.metrics.webhooks;
        let labels = WebhookLabels {
            webhook: self.webhook.clone(),
        };
        w.in_flight.get_or_create(&labels).dec();
        w.latency
            .get_or_create(&labels)
            .observe(self.started.elapsed().as_secs_f64());
        w.requests
            .get_or_create(&RequestLabels {
                webhook: std::mem::take(&mut self.webhook),
                code: code.to_string(),
            })
            .inc();
    }
}

impl Drop for WebhookRequest {
    fn drop(&mut self) {
        // A request whose connection went away before the answer: counted as a client error.
        self.finish(499);
    }
}

impl Metrics {
    /// A request on `webhook` (a path the host serves, or `other`) starts.
    pub fn webhook_request(&self, webhook: &str) -> WebhookRequest {
        self.webhooks
            .in_flight
            .get_or_create(&WebhookLabels {
                webhook: webhook.to_owned(),
            })
            .inc();
        WebhookRequest {
            metrics: self.clone(),
            webhook: webhook.to_owned(),
            started: std::time::Instant::now(),
            done: false,
        }
    }

    /// A review of `plugin` ended with `outcome`.
    pub fn admission_review(&self, plugin: &str, review: &str, operation: &str, outcome: &str) {
        self.webhooks
            .reviews
            .get_or_create(&ReviewLabels {
                plugin: plugin.to_owned(),
                review: review.to_owned(),
                operation: operation.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
    }
}
