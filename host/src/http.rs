//! The tiny HTTP/1 server behind `/metrics` and the health probes: `GET` a path, get a
//! plain-text (or JSON) body. Each server has its own listener, so the metrics and probe
//! addresses are configured separately (as in controller-runtime).
//!
//! [`Connections`] bounds what clients can hold of the host, here and in the webhook server:
//! a connection that sends no complete request head for [`IDLE_TIMEOUT`] (a stalled client,
//! or an idle keep-alive one) is closed, at most a fixed number are open at once (past it, new
//! ones wait in the listen backlog), and a failing `accept` (out of file descriptors) is
//! retried after a pause instead of in a hot loop.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmop_controller::metrics::Metrics;

/// How long a connection may go without sending a complete request head: while it is idle
/// between requests, or while it sends one. Longer than the 90 s after which Go's default
/// HTTP transport closes an idle connection (the API server's webhook client takes it), so
/// that the client, not the host, closes an idle keep-alive connection, and a review is never
/// sent on one the host is closing. (The kubelet's probes do not keep connections; Prometheus
/// keeps them for 5 minutes, but scrapes more often than every 120 s.)
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// How long `accept` waits after it failed (out of file descriptors, say).
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// The connections one server may hold open at once, and how each is served.
#[derive(Debug, Clone)]
pub(crate) struct Connections {
    permits: Arc<Semaphore>,
}

impl Connections {
    /// At most `max` connections at once, each closed after `IDLE_TIMEOUT` without a request.
    pub(crate) fn new(max: usize) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(max)),
        }
    }

    /// The next connection on `listener`, once fewer than the maximum are open; the permit is
    /// held for as long as the connection is served. `server` names it in the log.
    pub(crate) async fn accept(
        &self,
        listener: &TcpListener,
        server: &'static str,
    ) -> (TcpStream, std::net::SocketAddr, OwnedSemaphorePermit) {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        loop {
            match listener.accept().await {
                Ok((stream, peer)) => return (stream, peer, permit),
                Err(error) => {
                    tracing::warn!(%error, server, "cannot accept a connection");
                    tokio::time::sleep(ACCEPT_RETRY).await;
                }
            }
        }
    }

    /// An HTTP/1 connection builder that closes a connection silent for the idle timeout.
    pub(crate) fn http1(&self) -> hyper::server::conn::http1::Builder {
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(IDLE_TIMEOUT);
        builder
    }
}

/// Connections the metrics and probe servers each hold at once: Prometheus and the kubelet
/// need a few.
const MAX_CONNECTIONS: usize = 64;

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
    serve_with(listener, name, route, Connections::new(MAX_CONNECTIONS)).await;
}

async fn serve_with<F>(listener: TcpListener, name: &'static str, route: F, limits: Connections)
where
    F: Fn(&str) -> Reply + Clone + Send + Sync + 'static,
{
    loop {
        let (stream, peer, permit) = limits.accept(&listener, name).await;
        let route = route.clone();
        let builder = limits.http1();
        tokio::spawn(async move {
            let _permit = permit;
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let reply = route(req.uri().path());
                async move { Ok::<_, std::convert::Infallible>(response(reply)) }
            });
            if let Err(error) = builder
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

    /// A server answering 200 `ok` on `127.0.0.1:<port>`, holding at most `max` connections.
    async fn server(max: usize) -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let route = |_: &str| Reply::text(StatusCode::OK, "ok\n");
        tokio::spawn(serve_with(listener, "test", route, Connections::new(max)));
        address
    }

    /// Everything the server sends until it closes the connection (which it must within
    /// twice the idle timeout: a server that never does fails the test instead of hanging it).
    async fn read_all(stream: &mut TcpStream) -> String {
        use tokio::io::AsyncReadExt;
        let mut out = Vec::new();
        tokio::time::timeout(IDLE_TIMEOUT * 2, stream.read_to_end(&mut out))
            .await
            .expect("the server closes the connection")
            .ok();
        String::from_utf8_lossy(&out).into_owned()
    }

    // Paused time: the runtime skips ahead to the idle timeout once nothing else can run.
    #[tokio::test(start_paused = true)]
    async fn a_stalled_client_is_cut_off_after_the_idle_timeout_and_its_slot_goes_to_the_next() {
        use tokio::io::AsyncWriteExt;
        let address = server(1).await;
        let started = tokio::time::Instant::now();
        // Half a request head, then nothing: the one connection the server holds.
        let mut stalled = TcpStream::connect(address).await.expect("connect");
        stalled
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            .await
            .expect("write");
        // A whole request on a second connection waits in the backlog until the first goes.
        let mut next = TcpStream::connect(address).await.expect("connect");
        next.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .expect("write");
        let answer = read_all(&mut next).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(
            started.elapsed() >= IDLE_TIMEOUT,
            "answered after {:?}, before the stalled connection timed out",
            started.elapsed()
        );
        // The stalled one was closed without an answer to its half request (hyper may say 408).
        let cut = read_all(&mut stalled).await;
        assert!(!cut.contains("200 OK"), "{cut}");
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let address = server(4).await;
        let mut client = TcpStream::connect(address).await.expect("connect");
        client
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .expect("write");
        let mut buf = [0u8; 512];
        let n = client.read(&mut buf).await.expect("read");
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
        let idle_from = tokio::time::Instant::now();
        // Kept alive, then silent: the server closes it once the idle timeout has passed.
        let closed = tokio::time::timeout(IDLE_TIMEOUT * 2, client.read(&mut buf))
            .await
            .expect("the server closes the idle connection");
        assert_eq!(closed.expect("read"), 0);
        assert!(
            idle_from.elapsed() >= IDLE_TIMEOUT,
            "{:?}",
            idle_from.elapsed()
        );
    }

    #[test]
    fn only_metrics_is_served() {
        let m = Metrics::new();
        assert_eq!(metrics_route(&m, "/metrics").status, StatusCode::OK);
        assert_eq!(metrics_route(&m, "/").status, StatusCode::NOT_FOUND);
    }
}
