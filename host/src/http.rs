//! The tiny HTTP/1 server behind `/metrics` and the health probes: `GET` a path, get a
//! plain-text (or JSON) body. Each server has its own listener, so the metrics and probe
//! addresses are configured separately (as in controller-runtime).

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use wasmop_controller::metrics::Metrics;

/// What a route answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reply {
    /// The HTTP status.
    pub(crate) status: StatusCode,
    /// The body.
    pub(crate) body: String,
    /// The `Content-Type`.
    pub(crate) content_type: &'static str,
}

impl Reply {
    /// A plain-text reply.
    pub(crate) fn text(status: StatusCode, body: impl Into<String>) -> Self {
        Self {
            status,
            body: body.into(),
            content_type: "text/plain; charset=utf-8",
        }
    }
}

/// Answers `GET /metrics` with the metrics in the Prometheus text format.
pub(crate) fn metrics_route(metrics: &Metrics, path: &str) -> Reply {
    if path == "/metrics" {
        Reply {
            status: StatusCode::OK,
            body: metrics.render(),
            content_type: "text/plain; version=0.0.4; charset=utf-8",
        }
    } else {
        Reply::text(StatusCode::NOT_FOUND, "not found: try /metrics\n")
    }
}

/// Serves `route(path)` for every request on `listener` until the task is dropped. `name`
/// says which server a log line is about.
pub(crate) async fn serve<F>(listener: TcpListener, name: &'static str, route: F)
where
    F: Fn(&str) -> Reply + Clone + Send + Sync + 'static,
{
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(conn) => conn,
            Err(error) => {
                tracing::warn!(%error, server = name, "cannot accept a connection");
                continue;
            }
        };
        let route = route.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let reply = route(req.uri().path());
                async move { Ok::<_, std::convert::Infallible>(response(reply)) }
            });
            if let Err(error) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%error, %peer, server = name, "connection ended with an error");
            }
        });
    }
}

fn response(reply: Reply) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(reply.body)));
    *response.status_mut() = reply.status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(reply.content_type),
    );
    response
}

/// Binds an address; the caller spawns [`serve`] with the listener.
pub(crate) async fn bind(address: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(address).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_metrics_is_served() {
        let m = Metrics::new();
        assert_eq!(metrics_route(&m, "/metrics").status, StatusCode::OK);
        assert_eq!(metrics_route(&m, "/").status, StatusCode::NOT_FOUND);
    }
}
