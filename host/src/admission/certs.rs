//! The certificates the webhook server presents: a CA kept in a Secret of the host's
//! namespace (created by the first replica that needs it, read by the others, so that one
//! `caBundle` in the webhook configurations trusts every replica), and a serving certificate
//! per replica, issued from it in memory and renewed after two thirds of its validity.
//!
//! Renewal swaps the certificate the TLS acceptor hands to new connections
//! ([`Rotating`]); connections already open keep theirs (still valid: it is renewed well
//! before it expires), so no request is dropped.
//!
//! The CA is valid for ten years. To replace it, delete the Secret and restart the host's
//! replicas: the first creates a new CA and the leader puts it into the configurations.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use time::OffsetDateTime;

/// The CA certificate in the Secret, PEM.
const CA_CERT_KEY: &str = "ca.crt";
/// The CA's private key in the Secret, PKCS#8 PEM.
const CA_KEY_KEY: &str = "ca.key";
/// The CA's common name; the issuer is rebuilt from it and the key.
const CA_NAME: &str = "wasmop webhook CA";
/// Ten years: the CA is replaced by hand (delete the Secret), serving certificates by the host.
const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// Certificates start five minutes in the past, for clocks a little behind the host's.
const BACKDATE: Duration = Duration::from_secs(300);

/// Why certificates cannot be had.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CertError {
    /// The CA Secret cannot be read or created.
    #[error("cannot read or create the webhook CA Secret {namespace}/{name}")]
    Secret {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The Secret exists but does not hold a CA the host can use.
    #[error(
        "the webhook CA Secret {namespace}/{name} {problem}; delete it and the host creates a new CA"
    )]
    Unusable {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// What is wrong.
        problem: String,
    },
    /// Generating or signing failed.
    #[error("cannot issue a certificate")]
    Issue(#[from] rcgen::Error),
    /// rustls refused the key.
    #[error("the TLS library refused the serving key")]
    Key(#[source] rustls::Error),
    /// rustls refused the configuration.
    #[error("cannot configure TLS")]
    Tls(#[source] rustls::Error),
}

/// The CA the host issues serving certificates from.
pub(crate) struct Authority {
    ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Authority {
    /// Generates a new CA.
    pub(crate) fn generate() -> Result<Self, CertError> {
        let key = KeyPair::generate()?;
        let mut params = ca_params();
        let now = OffsetDateTime::now_utc();
        params.not_before = now - BACKDATE;
        params.not_after = now + CA_VALIDITY;
        let cert = params.self_signed(&key)?;
        Ok(Self {
            ca_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA kept in `namespace/name`, created there if absent. Replicas starting together
    /// agree: a create that loses the race reads the winner's CA.
    pub(crate) async fn shared(
        client: kube::Client,
        namespace: &str,
        name: &str,
    ) -> Result<Self, CertError> {
        let api: Api<Secret> = Api::namespaced(client, namespace);
        let secret_error = |source| CertError::Secret {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source,
        };
        if let Some(secret) = api.get_opt(name).await.map_err(secret_error)? {
            return Self::from_secret(&secret, namespace, name);
        }
        let fresh = Self::generate()?;
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                labels: Some(
                    [(
                        "app.kubernetes.io/managed-by".to_owned(),
                        "wasmop".to_owned(),
                    )]
                    .into(),
                ),
                ..ObjectMeta::default()
            },
            type_: Some("Opaque".into()),
            data: Some(
                [
                    (
                        CA_CERT_KEY.to_owned(),
                        ByteString(fresh.ca_pem.clone().into_bytes()),
                    ),
                    (
                        CA_KEY_KEY.to_owned(),
                        ByteString(fresh.issuer.key().serialize_pem().into_bytes()),
                    ),
                ]
                .into(),
            ),
            ..Secret::default()
        };
        match api.create(&PostParams::default(), &secret).await {
            Ok(_) => {
                tracing::info!(secret = %format!("{namespace}/{name}"), "created the webhook CA");
                Ok(fresh)
            }
            Err(kube::Error::Api(status)) if status.code == 409 => {
                let secret = api.get(name).await.map_err(secret_error)?;
                Self::from_secret(&secret, namespace, name)
            }
            Err(source) => Err(secret_error(source)),
        }
    }

    fn from_secret(secret: &Secret, namespace: &str, name: &str) -> Result<Self, CertError> {
        let unusable = |problem: &str| CertError::Unusable {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            problem: problem.to_owned(),
        };
        let field = |key: &str| {
            secret
                .data
                .as_ref()
                .and_then(|d| d.get(key))
                .and_then(|b| String::from_utf8(b.0.clone()).ok())
                .ok_or_else(|| unusable(&format!("has no PEM `{key}`")))
        };
        let ca_pem = field(CA_CERT_KEY)?;
        let key = KeyPair::from_pem(&field(CA_KEY_KEY)?).map_err(|e| {
            unusable(&format!(
                "has a `{CA_KEY_KEY}` that is no private key ({e})"
            ))
        })?;
        Ok(Self {
            ca_pem,
            issuer: Issuer::new(ca_params(), key),
        })
    }

    /// The CA certificate, PEM: the webhook configurations' `caBundle`.
    pub(crate) fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// A serving certificate for `names` (DNS names or IP addresses), valid for `validity`.
    pub(crate) fn issue(
        &self,
        names: &[String],
        validity: Duration,
    ) -> Result<Arc<CertifiedKey>, CertError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(names.to_vec())?;
        let mut dn = DistinguishedName::new();
        dn.push(
            DnType::CommonName,
            names.first().map_or("wasmop", String::as_str),
        );
        params.distinguished_name = dn;
        let now = OffsetDateTime::now_utc();
        params.not_before = now - BACKDATE;
        params.not_after = now + validity;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(&key, &self.issuer)?;
        let der = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
        let signing =
            rustls::crypto::ring::sign::any_supported_type(&der).map_err(CertError::Key)?;
        Ok(Arc::new(CertifiedKey::new(
            vec![cert.der().clone()],
            signing,
        )))
    }
}

/// The CA's parameters, the same at generation and when the issuer is rebuilt from the
/// Secret: the name and key identifier in the certificates it signs must match its own.
fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "wasmop");
    dn.push(DnType::CommonName, CA_NAME);
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

/// The serving certificate new TLS connections get; replaced by [`Rotating::renew_forever`].
#[derive(Debug)]
pub(crate) struct Rotating {
    current: RwLock<Arc<CertifiedKey>>,
}

impl Rotating {
    /// Serves `first` until the first renewal.
    pub(crate) fn new(first: Arc<CertifiedKey>) -> Arc<Self> {
        Arc::new(Self {
            current: RwLock::new(first),
        })
    }

    fn set(&self, next: Arc<CertifiedKey>) {
        if let Ok(mut current) = self.current.write() {
            *current = next;
        }
    }

    /// Issues a new certificate after two thirds of each one's validity, for ever (the
    /// task is dropped at shutdown). A failed issue is tried again a minute later (or
    /// sooner, for short validities), while the current certificate is still valid.
    pub(crate) async fn renew_forever(
        self: Arc<Self>,
        authority: Arc<Authority>,
        names: Vec<String>,
        validity: Duration,
    ) {
        let renew_after = validity * 2 / 3;
        let retry = (validity / 10).min(Duration::from_secs(60));
        let mut wait = renew_after;
        loop {
            tokio::time::sleep(wait).await;
            match authority.issue(&names, validity) {
                Ok(next) => {
                    self.set(next);
                    tracing::info!(
                        valid_for_s = validity.as_secs(),
                        "renewed the webhook serving certificate"
                    );
                    wait = renew_after;
                }
                Err(error) => {
                    tracing::error!(error = %wasmop_core::chain(&error), "cannot renew the webhook serving certificate; trying again");
                    wait = retry;
                }
            }
        }
    }
}

impl ResolvesServerCert for Rotating {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.read().ok().map(|c| c.clone())
    }
}

/// The TLS configuration of the webhook server: HTTP/1.1, the rotating certificate.
pub(crate) fn server_config(certs: Arc<Rotating>) -> Result<Arc<rustls::ServerConfig>, CertError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(CertError::Tls)?
        .with_no_client_auth()
        .with_cert_resolver(certs);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_rebuilt_from_its_secret_issues_certificates_its_own_certificate_verifies() {
        let fresh = Authority::generate().expect("CA");
        let secret = Secret {
            data: Some(
                [
                    (
                        CA_CERT_KEY.to_owned(),
                        ByteString(fresh.ca_pem.clone().into_bytes()),
                    ),
                    (
                        CA_KEY_KEY.to_owned(),
                        ByteString(fresh.issuer.key().serialize_pem().into_bytes()),
                    ),
                ]
                .into(),
            ),
            ..Secret::default()
        };
        let again = Authority::from_secret(&secret, "ns", "ca").expect("usable");
        let leaf = again
            .issue(
                &["127.0.0.1".into(), "wasmop.ns.svc".into()],
                Duration::from_secs(60),
            )
            .expect("issued");
        // Verify the chain with rustls' own verifier, as a client trusting the bundle would.
        let mut roots = rustls::RootCertStore::empty();
        let ca_der = pem_der(fresh.ca_pem());
        roots.add(ca_der).expect("root");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier =
            rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .expect("verifier");
        for name in ["127.0.0.1", "wasmop.ns.svc"] {
            let server_name =
                rustls::pki_types::ServerName::try_from(name.to_owned()).expect("name");
            rustls::client::danger::ServerCertVerifier::verify_server_cert(
                verifier.as_ref(),
                &leaf.cert[0],
                &[],
                &server_name,
                &[],
                rustls::pki_types::UnixTime::now(),
            )
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let other =
            rustls::pki_types::ServerName::try_from("elsewhere.example".to_owned()).expect("name");
        assert!(
            rustls::client::danger::ServerCertVerifier::verify_server_cert(
                verifier.as_ref(),
                &leaf.cert[0],
                &[],
                &other,
                &[],
                rustls::pki_types::UnixTime::now(),
            )
            .is_err()
        );
    }

    #[test]
    fn a_secret_without_a_ca_is_refused_with_its_name() {
        let err = Authority::from_secret(&Secret::default(), "ops", "wasmop-webhook-ca")
            .err()
            .expect("unusable");
        let text = err.to_string();
        assert!(text.contains("ops/wasmop-webhook-ca"), "{text}");
        assert!(text.contains("ca.crt"), "{text}");
    }

    fn pem_der(pem: &str) -> rustls::pki_types::CertificateDer<'static> {
        use rustls::pki_types::pem::PemObject;
        rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).expect("PEM")
    }
}
