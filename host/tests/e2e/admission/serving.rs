//! The webhook server itself: TLS with the certificates it issues and renews or is given
//! (files, a TLS Secret), what it refuses before any plugin runs, and every replica serving.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, PostParams};
use serde_json::json;
use wasmop_testenv::TestEnv;

use super::{
    admission_config, database, free_port, probe, refusal, review_stream, wait_probe,
    wait_registered,
};
use crate::database::{DATABASE_CRD, databases};
use crate::harness::{Host, PATIENCE, message};

/// The CA the host issued and keeps in the Secret `wasmop-webhook-ca`, as PEM.
async fn issued_ca(env: &TestEnv) -> Vec<u8> {
    let secrets: Api<Secret> = Api::namespaced(env.client(), env.namespace());
    secrets
        .get("wasmop-webhook-ca")
        .await
        .unwrap()
        .data
        .unwrap()["ca.crt"]
        .0
        .clone()
}

/// A TLS connection to the webhook server on loopback, trusting only the CA `ca_pem` for the
/// name 127.0.0.1.
async fn connect(
    port: u16,
    ca_pem: &[u8],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from_pem_slice(ca_pem).unwrap())
        .unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    connector
        .connect(name, tcp)
        .await
        .expect("the CA verifies the served certificate")
}

/// The certificate the webhook server presents to a new TLS connection, checked against the
/// CA in `ca_pem` for the name 127.0.0.1.
async fn served_certificate(port: u16, ca_pem: &[u8]) -> Vec<u8> {
    let tls = connect(port, ca_pem).await;
    tls.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

#[tokio::test(flavor = "multi_thread")]
async fn certificate_rotation_under_a_steady_stream_of_reviews_loses_none() {
    let env = TestEnv::start().await.unwrap();
    let port = free_port();
    // Serving certificates valid for 12 s are renewed every 8 s.
    let config = format!(
        "{}  certificate: {{validity: 12s}}\n",
        admission_config(
            &env,
            &["admission-probe"],
            "    grants: [{kind: ConfigMap, verbs: [create]}]\n",
            port
        )
    );
    let mut host = Host::start(&env, &["admission"], &config).await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    wait_probe(&cms, &host).await;
    let ca = issued_ca(&env).await;
    let before = served_certificate(port, &ca).await;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let stream = review_stream(cms.clone(), stopped);
    // Two renewals while the reviews go on.
    host.wait_lines("two certificate renewals", |lines| {
        (lines
            .iter()
            .filter(|l| message(l) == "renewed the webhook serving certificate")
            .count()
            >= 2)
            .then_some(())
    })
    .await;
    let after = served_certificate(port, &ca).await;
    stop.send(true).unwrap();
    let (versions, failures) = stream.await.unwrap();
    assert!(
        failures.is_empty(),
        "reviews failed across the rotation: {failures:?}"
    );
    assert!(versions.len() > 20, "only {} reviews ran", versions.len());
    assert!(
        versions.iter().all(|v| v == "0.1.0"),
        "every create was reviewed"
    );
    assert_ne!(before, after, "new connections get the renewed certificate");
    host.stop().await;
}

/// Sends one HTTP/1.1 request over TLS to the webhook server and returns the status code
/// and body.
async fn raw_request(port: u16, ca_pem: &[u8], head: &str, body: &[u8]) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tls = connect(port, ca_pem).await;
    let request = format!(
        "{head}\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    tls.write_all(request.as_bytes()).await.unwrap();
    // The server may answer (413) before it has read the whole body, and close.
    let _ = tls.write_all(body).await;
    let mut answer = Vec::new();
    let _ = tls.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let code = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP answer: {answer:?}"));
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (code, body)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_webhook_server_refuses_what_is_not_a_review_it_serves() {
    let env = TestEnv::start().await.unwrap();
    env.apply_yaml(DATABASE_CRD).await.unwrap();
    let port = free_port();
    let config = format!(
        "{}  maxRequestBytes: 64Ki\n",
        admission_config(&env, &["database-config"], "", port)
    );
    let mut host = Host::start(&env, &["database-config"], &config).await;
    host.wait_log("the webhook server", |l| {
        message(l) == "serving admission webhooks"
    })
    .await;
    host.wait_log("the plugin to run", |l| {
        message(l) == "plugin loaded" && l["fields"]["key"].is_string()
    })
    .await;
    let ca = issued_ca(&env).await;
    let post = "POST /validate/database-config HTTP/1.1";
    let (code, body) = raw_request(port, &ca, post, b"{not json").await;
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("malformed AdmissionReview"), "{body}");
    let (code, body) = raw_request(
        port,
        &ca,
        post,
        br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
    )
    .await;
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("it has no request"), "{body}");
    let (code, body) = raw_request(port, &ca, post, &vec![b' '; 100 << 10]).await;
    assert_eq!(code, 413, "{body}");
    assert!(body.contains("admission.maxRequestBytes"), "{body}");
    let (code, _) = raw_request(port, &ca, "POST /validate/nobody HTTP/1.1", b"{}").await;
    assert_eq!(code, 404);
    let (code, _) = raw_request(port, &ca, "POST /metrics HTTP/1.1", b"{}").await;
    assert_eq!(code, 404);
    let (code, _) = raw_request(port, &ca, "GET /validate/database-config HTTP/1.1", b"").await;
    assert_eq!(code, 405);
    let counted = host
        .metric("controller_runtime_webhook_requests_total{webhook=\"/validate/database-config\",code=\"400\"}")
        .await;
    assert_eq!(counted, 2.0);
    let other = host
        .metric("controller_runtime_webhook_requests_total{webhook=\"other\",code=\"404\"}")
        .await;
    assert_eq!(other, 2.0);
    host.stop().await;
}

/// A CA and the means to issue serving certificates for 127.0.0.1 from it, as cert-manager
/// or an operator's own PKI would.
struct TestCa {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    pem: String,
}

impl TestCa {
    fn new() -> Self {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let pem = params.self_signed(&key).unwrap().pem();
        TestCa {
            issuer: rcgen::Issuer::new(params, key),
            pem,
        }
    }

    /// A serving certificate for 127.0.0.1: (certificate PEM, key PEM, certificate DER).
    fn issue(&self) -> (String, String, Vec<u8>) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
            .unwrap()
            .signed_by(&key, &self.issuer)
            .unwrap();
        (cert.pem(), key.serialize_pem(), cert.der().to_vec())
    }
}

/// Waits until a new TLS connection to the webhook server is served `der`.
async fn wait_served(port: u16, ca_pem: &[u8], der: &[u8], host: &Host) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while served_certificate(port, ca_pem).await != der {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the webhook server never served the new certificate; log:\n{}",
            host.log_text()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_certificate_from_files_is_served_trusted_and_read_again_when_it_changes() {
    let env = TestEnv::start().await.unwrap();
    env.apply_yaml(DATABASE_CRD).await.unwrap();
    let ca = TestCa::new();
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let tmp = dir.path().join(format!(".{name}.tmp"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(tmp, dir.path().join(name)).unwrap();
    };
    let (cert, key, first) = ca.issue();
    write("tls.crt", &cert);
    write("tls.key", &key);
    write("ca.crt", &ca.pem);
    let port = free_port();
    let d = dir.path().display();
    let config = format!(
        "{}  certificate: {{certFile: {d}/tls.crt, keyFile: {d}/tls.key, caFile: {d}/ca.crt}}\n",
        admission_config(&env, &["database-config"], "", port)
    );
    let host = Host::start(&env, &["database-config"], &config).await;
    // The API server trusts the file's CA: the webhooks answer.
    wait_registered(&env).await;
    wait_served(port, ca.pem.as_bytes(), &first, &host).await;
    // The operator's PKI renews the certificate in place (a mounted Secret does the same).
    let (cert, key, second) = ca.issue();
    write("tls.key", &key);
    write("tls.crt", &cert);
    wait_served(port, ca.pem.as_bytes(), &second, &host).await;
    let (code, _, text) = refusal(
        databases(&env)
            .create(
                &PostParams::default(),
                &database("after", "not a host!", Some(1)),
            )
            .await,
    );
    assert_eq!(code, 422, "{text}");
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_certificate_from_a_tls_secret_is_served_and_read_again_when_it_changes() {
    let env = TestEnv::start().await.unwrap();
    let ca = TestCa::new();
    let secret = |cert: &str, key: &str| {
        serde_json::from_value::<Secret>(json!({
            "metadata": {"name": "wasmop-webhook-tls"},
            "type": "kubernetes.io/tls",
            "stringData": {"tls.crt": cert, "tls.key": key, "ca.crt": ca.pem},
        }))
        .unwrap()
    };
    let secrets: Api<Secret> = Api::namespaced(env.client(), env.namespace());
    let (cert, key, first) = ca.issue();
    secrets
        .create(&PostParams::default(), &secret(&cert, &key))
        .await
        .unwrap();
    let port = free_port();
    let config = format!(
        "{}  certificate: {{secretName: wasmop-webhook-tls}}\n",
        admission_config(
            &env,
            &["admission-probe"],
            "    grants: [{kind: ConfigMap, verbs: [create]}]\n",
            port
        )
    );
    let host = Host::start(&env, &["admission"], &config).await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    wait_probe(&cms, &host).await;
    wait_served(port, ca.pem.as_bytes(), &first, &host).await;
    // The configurations trust the Secret's CA.
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(env.client());
    let v = validating
        .get(&format!("wasmop-{}", env.namespace()))
        .await
        .unwrap();
    let bundle = v.webhooks.unwrap()[0]
        .client_config
        .ca_bundle
        .clone()
        .unwrap();
    assert_eq!(bundle.0, ca.pem.as_bytes());
    // cert-manager renews: the Secret changes, the server follows.
    let (cert, key, second) = ca.issue();
    secrets
        .replace(
            "wasmop-webhook-tls",
            &PostParams::default(),
            &secret(&cert, &key),
        )
        .await
        .unwrap();
    wait_served(port, ca.pem.as_bytes(), &second, &host).await;
    let created = cms
        .create(&PostParams::default(), &probe("after", "admit", None))
        .await
        .unwrap();
    assert_eq!(
        created.metadata.labels.unwrap()["probe.wasmop.dev/mutated"],
        "0.1.0"
    );
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_replica_serves_and_the_leader_alone_registers_until_a_standby_takes_over() {
    let env = TestEnv::start().await.unwrap();
    env.apply_yaml(DATABASE_CRD).await.unwrap();
    let config = |port: u16| {
        format!(
            "leaderElection: {{enabled: true, leaseDuration: 3s, renewDeadline: 2s, retryPeriod: 500ms}}\n{}",
            admission_config(&env, &["database-config"], "", port)
        )
    };
    let (first_port, second_port) = (free_port(), free_port());
    let mut first = Host::start(&env, &["database-config"], &config(first_port)).await;
    first
        .wait_log("the first host to lead", |l| {
            message(l) == "became the leader"
        })
        .await;
    wait_registered(&env).await;
    let mut second = Host::start(&env, &["database-config"], &config(second_port)).await;
    second
        .wait_log("the standby to load the plugin", |l| {
            message(l) == "plugin loaded" && l["fields"]["key"].is_string()
        })
        .await;
    // The standby serves reviews too (in a cluster, the Service sends it its share)...
    let ca = issued_ca(&env).await;
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "1", "operation": "CREATE", "name": "x", "namespace": env.namespace(),
            "kind": {"group": "demo.wasmop.dev", "version": "v1", "kind": "Database"},
            "resource": {"group": "demo.wasmop.dev", "version": "v1", "resource": "databases"},
            "userInfo": {"username": "u"},
            "object": {"apiVersion": "demo.wasmop.dev/v1", "kind": "Database",
                       "metadata": {"name": "x"},
                       "spec": {"engine": "oracle", "host": "h", "port": 1}},
            "dryRun": false
        }
    });
    let (code, body) = raw_request(
        second_port,
        &ca,
        "POST /validate/database-config HTTP/1.1",
        review.to_string().as_bytes(),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("spec.engine: Unsupported value"), "{body}");
    // ...with a certificate from the same CA, while the registration stays the leader's.
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(env.client());
    let name = format!("wasmop-{}", env.namespace());
    let url = |c: &ValidatingWebhookConfiguration| {
        c.webhooks.as_ref().unwrap()[0]
            .client_config
            .url
            .clone()
            .unwrap()
    };
    assert!(url(&validating.get(&name).await.unwrap()).contains(&format!(":{first_port}/")));
    // The leader goes: the standby takes over the Lease and points the webhooks at itself.
    first.terminate().await;
    first.wait_exit().await;
    second
        .wait_log("the standby to lead", |l| message(l) == "became the leader")
        .await;
    env.wait_for(
        &validating,
        &name,
        "to point at the new leader",
        PATIENCE,
        |c| c.is_some_and(|c| url(c).contains(&format!(":{second_port}/"))),
    )
    .await
    .unwrap();
    wait_registered(&env).await;
    second.stop().await;
}
