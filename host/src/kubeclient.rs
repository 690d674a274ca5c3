//! The Kubernetes client the host talks to the API server with: kube's, on connections with
//! `TCP_NODELAY`.
//!
//! kube-client 5 builds its connections with hyper's `HttpConnector`, which leaves Nagle's
//! algorithm on (kube-rs issue #2056), and offers no setting for it. A small write that follows
//! an unacknowledged one then waits for the API server's acknowledgement, which Linux delays by
//! up to 40 ms: some of a start's discovery requests and first LISTs took 40–46 ms where the
//! rest took 1–5 ms, and ten cached plugins were ready in 74–83 ms instead of 33–44 ms (the
//! README, "Start-up and the API server's connections"). Go's client, and so every
//! controller-runtime controller, sets `TCP_NODELAY`. [`client`] builds the same stack as
//! kube's `Client::try_from(Config)`, from the layers kube's [`ConfigExt`] gives, on a
//! connector that sets it.

use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::client::ConfigExt;
use kube::client::retry::RetryPolicy;
use tower::retry::RetryLayer;
use tower::{BoxError, ServiceBuilder};
use tower_http::trace::TraceLayer;

/// A client for `config` whose connections have `TCP_NODELAY`. Where kube's own builder does
/// something this stack cannot do as faithfully, it is kube's client as it comes: a proxy (HTTP
/// or SOCKS5, which kube's builder handles itself) and an exec credential plugin (a client
/// certificate it issues carries an expiry that only kube's builder reads).
pub(crate) fn client(config: kube::Config) -> Result<kube::Client, kube::Error> {
    if config.proxy_url.is_some() || config.auth_info.exec.is_some() {
        return kube::Client::try_from(config);
    }
    let https = config.rustls_https_connector_with_connector(connector())?;
    let mut timeouts = TimeoutConnector::new(https);
    timeouts.set_connect_timeout(config.connect_timeout);
    timeouts.set_read_timeout(config.read_timeout);
    timeouts.set_write_timeout(config.write_timeout);
    timeouts.set_reset_reader_on_write(config.reset_reader_on_write);
    let http = hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(timeouts);
    // In kube's order, outermost first: the cluster's URL, retries of the server's transient
    // failures, credentials, the configured headers, then a debug span per request.
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .layer(TraceLayer::new_for_http())
        .map_err(BoxError::from)
        .service(http);
    Ok(kube::Client::new(service, config.default_namespace))
}

/// The TCP connector under TLS: any scheme (TLS is the layer above), `TCP_NODELAY` on.
fn connector() -> HttpConnector {
    let mut connector = HttpConnector::new();
    connector.enforce_http(false);
    connector.set_nodelay(true);
    connector
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt as _;

    #[tokio::test]
    async fn connections_have_tcp_nodelay() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let uri = format!("http://{}", listener.local_addr().expect("address"))
            .parse()
            .expect("a URI");
        let accept = tokio::spawn(async move { listener.accept().await.expect("accept") });
        let io = connector().oneshot(uri).await.expect("connect");
        assert!(
            io.inner().nodelay().expect("getsockopt"),
            "Nagle's algorithm is on"
        );
        accept.await.expect("the listener");
    }

    #[tokio::test]
    async fn a_client_builds_from_a_plain_config() {
        // The stack itself is exercised by every test that talks to the API server
        // (host/tests/e2e); a proxy or an exec plugin takes kube's own builder unchanged.
        let config = kube::Config::new("https://127.0.0.1:6443".parse().expect("a URI"));
        client(config).expect("a client");
    }
}
