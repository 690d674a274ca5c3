//! The webhook server: HTTPS (HTTP/1.1) on `admission.address`, `POST /validate/<plugin>` and
//! `POST /mutate/<plugin>` with an `admission.k8s.io/v1` AdmissionReview, answered by the
//! plugin's current version in a fresh instance.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube::core::{DynamicObject, Status};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio_rustls::TlsAcceptor;

use super::{Catalog, Webhook};
use crate::http::Connections;
use wasmop_controller::metrics::Metrics;
use wasmop_core::plugin::PluginName;
use wasmop_core::plugin::text::cut;
use wasmop_runtime::admission::{
    FailurePolicy, Operation, Review, ReviewCall, ReviewKind, Verdict,
};

/// How long a client has to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections the webhook server holds at once (each closed after `http::IDLE_TIMEOUT`
/// without a request): the API servers keep a few each; a client that opens more waits for a
/// slot instead of taking the host's file descriptors.
const MAX_CONNECTIONS: usize = 256;
/// The longest cause quoted in a failure's message or warning.
const MAX_CAUSE_BYTES: usize = 512;

/// What the server shares between connections.
pub(crate) struct Server {
    catalog: watch::Receiver<Catalog>,
    metrics: Metrics,
    permits: Semaphore,
    concurrency: usize,
    max_body: usize,
    /// Plugins this host has served: a request for one that left (or no longer registers
    /// that review) is admitted, not refused, while the API server still has the old
    /// configuration. Bounded by the plugins ever loaded.
    served: Mutex<BTreeSet<PluginName>>,
}

/// An HTTP answer.
type Reply = Response<Full<Bytes>>;

impl Server {
    /// A server answering from `catalog`, `concurrency` reviews at once, bodies of at most
    /// `max_body` bytes.
    pub(crate) fn new(
        catalog: watch::Receiver<Catalog>,
        metrics: Metrics,
        concurrency: usize,
        max_body: usize,
    ) -> Arc<Self> {
        Arc::new(Self {
            catalog,
            metrics,
            permits: Semaphore::new(concurrency),
            concurrency,
            max_body,
            served: Mutex::default(),
        })
    }

    /// Accepts TLS connections on `listener` for ever (the task is dropped at exit).
    pub(crate) async fn serve(
        self: Arc<Self>,
        listener: TcpListener,
        tls: Arc<rustls::ServerConfig>,
    ) {
        let acceptor = TlsAcceptor::from(tls);
        let connections = Connections::new(MAX_CONNECTIONS);
        loop {
            let (stream, peer, permit) = connections.accept(&listener, "webhook").await;
            let _ = stream.set_nodelay(true);
            let (server, acceptor) = (self.clone(), acceptor.clone());
            let builder = connections.http1();
            tokio::spawn(async move {
                let _permit = permit;
                let tls =
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => tls,
                        Ok(Err(error)) => {
                            tracing::debug!(%error, %peer, "webhook server: TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(%peer, "webhook server: TLS handshake timed out");
                            return;
                        }
                    };
                let service = hyper::service::service_fn(move |req| {
                    let server = server.clone();
                    async move { Ok::<_, std::convert::Infallible>(server.answer(req).await) }
                });
                if let Err(error) = builder.serve_connection(TokioIo::new(tls), service).await {
                    tracing::debug!(%error, %peer, "webhook connection ended with an error");
                }
            });
        }
    }

    /// Answers one request.
    pub(crate) async fn answer(&self, req: Request<Incoming>) -> Reply {
        let started = Instant::now();
        let Some((kind, name)) = route(req.uri().path()) else {
            return self.plain(
                "other",
                StatusCode::NOT_FOUND,
                "not found: the webhook paths are /validate/<plugin> and /mutate/<plugin>\n",
            );
        };
        let webhook = self.catalog.borrow().get(&name).cloned();
        let known = webhook.is_some() || self.was_served(&name);
        if !known {
            return self.plain(
                "other",
                StatusCode::NOT_FOUND,
                &format!("not found: this host serves no plugin `{name}`\n"),
            );
        }
        let path = format!("/{}/{name}", kind.as_str());
        let request = self.metrics.webhook_request(&path);
        let (code, reply) = self.review(req, kind, &name, webhook, started).await;
        request.done(code.as_u16());
        reply
    }

    async fn review(
        &self,
        req: Request<Incoming>,
        kind: ReviewKind,
        name: &PluginName,
        webhook: Option<Webhook>,
        started: Instant,
    ) -> (StatusCode, Reply) {
        if req.method() != Method::POST {
            return status_reply(StatusCode::METHOD_NOT_ALLOWED, "only POST is served\n");
        }
        let body = match self.body(req).await {
            Ok(body) => body,
            Err(reply) => return reply,
        };
        let request = match parse(&body) {
            Ok(request) => request,
            Err(problem) => {
                tracing::debug!(plugin = %name, review = kind.as_str(), problem, "malformed AdmissionReview");
                return status_reply(
                    StatusCode::BAD_REQUEST,
                    &format!("malformed AdmissionReview: {problem}\n"),
                );
            }
        };
        drop(body);
        let response = AdmissionResponse::from(&request);
        let answer = match webhook {
            Some(webhook) => self.decide(webhook, kind, request, response, started).await,
            // The plugin left, or no longer registers this review; the API server's
            // configuration has not caught up yet.
            None => response,
        };
        match serde_json::to_vec(&answer.into_review()) {
            Ok(json) => (StatusCode::OK, json_reply(json)),
            Err(error) => status_reply(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("cannot write the AdmissionReview: {error}\n"),
            ),
        }
    }

    /// Reads the body, refusing one over the cap with 413 (from its `Content-Length` when it
    /// has one, else as soon as the cap is passed).
    async fn body(&self, req: Request<Incoming>) -> Result<Bytes, (StatusCode, Reply)> {
        let too_large = || {
            status_reply(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!(
                    "the AdmissionReview is larger than the {} bytes this host reads (admission.maxRequestBytes)\n",
                    self.max_body
                ),
            )
        };
        let declared = req
            .headers()
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > self.max_body as u64) {
            return Err(too_large());
        }
        match Limited::new(req.into_body(), self.max_body).collect().await {
            Ok(collected) => Ok(collected.to_bytes()),
            Err(error) if error.is::<http_body_util::LengthLimitError>() => Err(too_large()),
            Err(error) => Err(status_reply(
                StatusCode::BAD_REQUEST,
                &format!("cannot read the request body: {error}\n"),
            )),
        }
    }

    /// Runs the review and turns its result into the response.
    async fn decide(
        &self,
        webhook: Webhook,
        kind: ReviewKind,
        request: AdmissionRequest<DynamicObject>,
        response: AdmissionResponse,
        started: Instant,
    ) -> AdmissionResponse {
        let plugin = webhook.plugin.clone();
        let name = plugin.name().clone();
        let Some(registration) = webhook.registration(kind).cloned() else {
            return response;
        };
        let policy = webhook.failure_policy(&registration);
        let operation = Operation::from(request.operation.clone());
        let count = |outcome: &str| {
            self.metrics.admission_review(
                name.as_str(),
                kind.as_str(),
                operation.as_api(),
                outcome,
            );
        };
        let review = match Review::from_request(request) {
            Ok(review) => review,
            Err(error) => {
                let (answer, label) = failure(response, &name, policy, &error.to_string());
                count(label);
                return answer;
            }
        };
        if !registration.covers(&review.kind, review.sub_resource.as_deref(), operation) {
            // An old configuration sends what this version no longer reviews.
            return response;
        }
        let budget = review_budget(registration.timeout).saturating_sub(started.elapsed());
        let Ok(Ok(_permit)) = tokio::time::timeout(budget, self.permits.acquire()).await else {
            let cause = format!(
                "the host is already running {} reviews and none ended in time",
                self.concurrency
            );
            let (answer, label) = failure(response, &name, policy, &cause);
            count(label);
            return answer;
        };
        let remaining = review_budget(registration.timeout).saturating_sub(started.elapsed());
        let report = plugin
            .review(
                webhook.cluster.clone(),
                ReviewCall::new(kind, review).within(remaining.max(Duration::from_millis(1))),
            )
            .await;
        match report.result {
            Ok(verdict) => {
                count(verdict.label());
                match answer(response.clone(), verdict) {
                    Ok(answer) => answer,
                    Err(cause) => {
                        let (answer, label) = failure(response, &name, policy, &cause);
                        count(label);
                        answer
                    }
                }
            }
            Err(outcome) => {
                let cause = outcome.to_string();
                tracing::warn!(plugin = %name, review = kind.as_str(), operation = %operation, outcome = outcome.label(), cause = %cut(&cause, MAX_CAUSE_BYTES), policy = policy.as_api(), "a plugin could not answer an admission review");
                let (answer, label) = failure(response, &name, policy, &cause);
                count(label);
                answer
            }
        }
    }

    fn was_served(&self, name: &PluginName) -> bool {
        self.served.lock().is_ok_and(|s| s.contains(name))
    }

    /// Remembers the plugins of a published catalog as served.
    pub(crate) fn remember(&self, catalog: &Catalog) {
        if let Ok(mut served) = self.served.lock() {
            served.extend(catalog.keys().cloned());
        }
    }

    fn plain(&self, webhook: &str, status: StatusCode, text: &str) -> Reply {
        self.metrics.webhook_request(webhook).done(status.as_u16());
        status_reply(status, text).1
    }
}

/// `/validate/<plugin>` or `/mutate/<plugin>`.
fn route(path: &str) -> Option<(ReviewKind, PluginName)> {
    let (kind, name) = path.strip_prefix('/')?.split_once('/')?;
    let kind = match kind {
        "validate" => ReviewKind::Validate,
        "mutate" => ReviewKind::Mutate,
        _ => return None,
    };
    Some((kind, PluginName::new(name.to_owned()).ok()?))
}

/// The AdmissionReview's request, or what is wrong with it.
fn parse(body: &[u8]) -> Result<AdmissionRequest<DynamicObject>, String> {
    let review: AdmissionReview<DynamicObject> =
        serde_json::from_slice(body).map_err(|e| e.to_string())?;
    review
        .try_into()
        .map_err(|_| "it has no request".to_owned())
}

/// The time a review may take: the webhook's timeout less a tenth of it (at least 100 ms),
/// left for the answer to travel back before the API server gives up.
fn review_budget(timeout: Duration) -> Duration {
    timeout.saturating_sub((timeout / 10).max(Duration::from_millis(100)))
}

/// The response for a verdict; `Err` with the cause when a patch cannot be written.
fn answer(mut response: AdmissionResponse, verdict: Verdict) -> Result<AdmissionResponse, String> {
    let warnings = |w: Vec<wasmop_core::plugin::text::PluginText>| {
        (!w.is_empty()).then(|| w.into_iter().map(|w| w.into_string()).collect())
    };
    match verdict {
        Verdict::Allowed { warnings: w, patch } => {
            response.warnings = warnings(w);
            match patch {
                Some(patch) => response
                    .with_patch(patch)
                    .map_err(|e| format!("the host cannot write the plugin's patch: {e}")),
                None => Ok(response),
            }
        }
        Verdict::Denied {
            message,
            reason,
            code,
            warnings: w,
        } => {
            response.allowed = false;
            response.warnings = warnings(w);
            response.result = Status::failure(message.as_str(), &reason).with_code(code);
            Ok(response)
        }
    }
}

/// The answer when the plugin could not give one, by its failure policy, and its metric
/// label.
fn failure(
    response: AdmissionResponse,
    plugin: &PluginName,
    policy: FailurePolicy,
    cause: &str,
) -> (AdmissionResponse, &'static str) {
    let label = match policy {
        FailurePolicy::Fail => "failed-closed",
        FailurePolicy::Ignore => "failed-open",
    };
    (failed(response, plugin, policy, cause), label)
}

/// The answer by `policy` (see [`failure`]), uncounted.
fn failed(
    mut response: AdmissionResponse,
    plugin: &PluginName,
    policy: FailurePolicy,
    cause: &str,
) -> AdmissionResponse {
    let cause = cut(cause, MAX_CAUSE_BYTES);
    match policy {
        FailurePolicy::Fail => {
            response.allowed = false;
            response.result = Status::failure(
                &format!("plugin {plugin} could not review this request: {cause}"),
                "InternalError",
            )
            .with_code(500);
        }
        FailurePolicy::Ignore => {
            let warning = format!(
                "plugin {plugin} could not review this request, admitted by its failure policy Ignore: {cause}"
            );
            response.warnings = Some(vec![
                cut(&warning, wasmop_runtime::admission::MAX_WARNING_BYTES).to_owned(),
            ]);
        }
    }
    response
}

fn status_reply(status: StatusCode, text: &str) -> (StatusCode, Reply) {
    let mut reply = Response::new(Full::new(Bytes::from(text.to_owned())));
    *reply.status_mut() = status;
    reply.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    (status, reply)
}

fn json_reply(json: Vec<u8>) -> Reply {
    let mut reply = Response::new(Full::new(Bytes::from(json)));
    reply.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_two_review_paths_of_a_valid_plugin_name_route() {
        let ok = route("/validate/database-config").expect("routed");
        assert_eq!(ok.0, ReviewKind::Validate);
        assert_eq!(ok.1.as_str(), "database-config");
        assert_eq!(route("/mutate/db").map(|r| r.0), Some(ReviewKind::Mutate));
        for path in [
            "/",
            "/validate",
            "/validate/",
            "/review/db",
            "/validate/Bad_Name",
            "/validate/a/b",
        ] {
            assert!(route(path).is_none(), "{path}");
        }
    }

    #[test]
    fn a_review_keeps_time_for_its_answer_to_travel_back() {
        assert_eq!(
            review_budget(Duration::from_secs(10)),
            Duration::from_secs(9)
        );
        assert_eq!(
            review_budget(Duration::from_secs(1)),
            Duration::from_millis(900)
        );
    }

    #[test]
    fn a_malformed_review_says_what_is_wrong() {
        assert!(parse(b"{").expect_err("not JSON").contains("EOF"));
        let no_request = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#;
        assert_eq!(
            parse(no_request).expect_err("no request"),
            "it has no request"
        );
    }

    #[test]
    fn failure_policies_answer_as_they_say_and_name_the_plugin() {
        let name = PluginName::new("db").expect("name");
        let base = AdmissionResponse::invalid("x");
        let mut allowed = base.clone();
        allowed.allowed = true;
        let (fail, label) = failure(
            allowed.clone(),
            &name,
            FailurePolicy::Fail,
            "the plugin trapped: boom",
        );
        assert_eq!(label, "failed-closed");
        assert!(!fail.allowed);
        assert_eq!(fail.result.code, 500);
        assert_eq!(
            fail.result.message,
            "plugin db could not review this request: the plugin trapped: boom"
        );
        let (ignore, label) = failure(allowed, &name, FailurePolicy::Ignore, "timeout");
        assert_eq!(label, "failed-open");
        assert!(ignore.allowed);
        let warnings = ignore.warnings.expect("a warning");
        assert!(
            warnings[0].contains("plugin db could not review"),
            "{warnings:?}"
        );
    }
}
