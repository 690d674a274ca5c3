//! `admission-native`: database-config's validating webhook as a native Rust HTTPS server
//! (hyper, rustls, kube's admission types), the contender of section 11 of `bench/run`.
//!
//! ```text
//! admission-native ADDRESS CA_FILE    serve POST /validate/database-config on ADDRESS
//!                                     (127.0.0.1:PORT) with a certificate for 127.0.0.1
//!                                     issued by a fresh CA, whose PEM goes to CA_FILE
//! ```
//! It prints `ready` once it listens.

#[path = "../review.rs"]
mod review;

use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use tokio::net::TcpListener;

type Error = Box<dyn std::error::Error + Send + Sync>;

fn certificates(ca_file: &str) -> Result<Arc<rustls::ServerConfig>, Error> {
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key)?;
    std::fs::write(ca_file, ca_cert.pem())?;
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate()?;
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_owned()])?.signed_by(&key, &issuer)?;
    let der = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone()], der)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

async fn serve(req: Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, body: Vec<u8>| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        r
    };
    if req.uri().path() != "/validate/database-config" {
        return reply(StatusCode::NOT_FOUND, b"not found\n".to_vec());
    }
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return reply(StatusCode::BAD_REQUEST, e.to_string().into_bytes()),
    };
    match review::answer(&body) {
        Ok(json) => reply(StatusCode::OK, json),
        Err(e) => reply(StatusCode::BAD_REQUEST, e.into_bytes()),
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let (Some(address), Some(ca_file)) = (args.next(), args.next()) else {
        return Err("usage: admission-native ADDRESS CA_FILE".into());
    };
    let tls = tokio_rustls::TlsAcceptor::from(certificates(&ca_file)?);
    let listener = TcpListener::bind(&address).await?;
    println!("ready");
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let tls = tls.clone();
        tokio::spawn(async move {
            let Ok(stream) = tls.accept(stream).await else {
                return;
            };
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(
                    TokioIo::new(stream),
                    hyper::service::service_fn(|req| async {
                        Ok::<_, std::convert::Infallible>(serve(req).await)
                    }),
                )
                .await;
        });
    }
}
