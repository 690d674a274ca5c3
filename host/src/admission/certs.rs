//! The certificate the webhook server presents, from one of three sources
//! (`admission.certificate`, see [`start`]):
//!
//! - **Issued by the host** (the default): a CA kept in a Secret of the host's namespace
//!   (created by the first replica that needs it, read by the others, so that one `caBundle`
//!   in the webhook configurations trusts every replica), and a serving certificate per
//!   replica, issued from it in memory and renewed after two thirds of its validity. The CA is
//!   valid for ten years; to replace it, delete the Secret and restart the host's replicas.
//! - **PEM files** (a mounted Secret): read at start, and again every 10 s; a change is
//!   served from then on (a file that does not parse, or a key that does not match its
//!   certificate, is reported and the previous certificate kept).
//! - **A `kubernetes.io/tls` Secret** (what cert-manager writes): the same, read through the
//!   API.
//!
//! A new certificate is swapped into what the TLS acceptor hands to new connections
//! ([`Rotating`]); connections already open keep theirs, so no request is dropped. The CA the
//! configurations trust (`caBundle`) follows on the returned channel.

use std::future::Future;
use std::path::PathBuf;
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
use tokio::sync::watch;

use crate::config::admission::{AdmissionConfig, Certificates};

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
    /// A certificate file cannot be read.
    #[error("cannot read {}", .path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The certificate or key from `from` cannot be used.
    #[error("the webhook certificate from {from} cannot be used: {problem}")]
    Pem {
        /// Where it came from.
        from: String,
        /// What is wrong.
        problem: String,
    },
}

/// How often certificates from files or a Secret are read again.
const RELOAD_EVERY: Duration = Duration::from_secs(10);

/// A certificate, its key and the CA to trust, as PEM, from files or a Secret.
#[derive(PartialEq, Eq)]
struct Material {
    cert: Vec<u8>,
    key: Vec<u8>,
    ca: Option<String>,
}

impl Material {
    /// The certificate chain and key for rustls, the key checked against the certificate.
    fn certified(&self, from: &str) -> Result<Arc<CertifiedKey>, CertError> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let problem = |problem: String| CertError::Pem {
            from: from.to_owned(),
            problem,
        };
        let chain = CertificateDer::pem_slice_iter(&self.cert)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| problem(format!("the certificate is not PEM: {e}")))?;
        if chain.is_empty() {
            return Err(problem("it holds no certificate".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(&self.key)
            .map_err(|e| problem(format!("the key is not a PEM private key: {e}")))?;
        let certified =
            CertifiedKey::from_der(chain, key, &rustls::crypto::ring::default_provider())
                .map_err(|e| problem(format!("the key does not fit the certificate: {e}")))?;
        Ok(Arc::new(certified))
    }
}

/// Reads the PEM files.
async fn read_files(
    cert: &PathBuf,
    key: &PathBuf,
    ca: Option<&PathBuf>,
) -> Result<Material, CertError> {
    let read = |path: &PathBuf| {
        let path = path.clone();
        async move {
            tokio::fs::read(&path)
                .await
                .map_err(|source| CertError::File { path, source })
        }
    };
    let ca = match ca {
        Some(path) => Some(String::from_utf8_lossy(&read(path).await?).into_owned()),
        None => None,
    };
    Ok(Material {
        cert: read(cert).await?,
        key: read(key).await?,
        ca,
    })
}

/// Reads a `kubernetes.io/tls` Secret: `tls.crt`, `tls.key` and `ca.crt` if present.
async fn read_secret(api: &Api<Secret>, name: &str) -> Result<Material, CertError> {
    let secret = api.get(name).await.map_err(|source| CertError::Secret {
        namespace: api.namespace().unwrap_or_default().to_owned(),
        name: name.to_owned(),
        source,
    })?;
    let data = secret.data.unwrap_or_default();
    let field = |key: &str| {
        data.get(key)
            .map(|b| b.0.clone())
            .ok_or_else(|| CertError::Pem {
                from: format!("the Secret {name}"),
                problem: format!("it has no `{key}`"),
            })
    };
    Ok(Material {
        cert: field("tls.crt")?,
        key: field("tls.key")?,
        ca: data
            .get("ca.crt")
            .map(|b| String::from_utf8_lossy(&b.0).into_owned()),
    })
}

/// Starts the certificate source `admission.certificate` names: returns what the TLS
/// acceptor serves and the CA bundle the webhook configurations carry (`None`: none given),
/// and keeps both current in a task of its own (renewal, or reading again on change).
///
/// # Errors
/// The first certificate cannot be had: the CA Secret cannot be read or created, a file or
/// the Secret cannot be read, or what they hold cannot be used.
pub(crate) async fn start(
    settings: &AdmissionConfig,
    client: kube::Client,
    namespace: &str,
) -> Result<(Arc<Rotating>, watch::Receiver<Option<String>>), CertError> {
    match &settings.certificates {
        Certificates::Issued {
            ca_secret,
            validity,
        } => {
            let authority = Arc::new(Authority::shared(client, namespace, ca_secret).await?);
            let names = settings.certificate_names();
            let rotating = Rotating::new(authority.issue(&names, *validity)?);
            let (bundle, trusted) = watch::channel(Some(authority.ca_pem().to_owned()));
            tokio::spawn(
                rotating
                    .clone()
                    .renew_forever(authority, names, *validity, bundle),
            );
            Ok((rotating, trusted))
        }
        Certificates::Files { cert, key, ca } => {
            let from = format!("{} and {}", cert.display(), key.display());
            let (cert, key, ca) = (cert.clone(), key.clone(), ca.clone());
            let fetch = move || {
                let (cert, key, ca) = (cert.clone(), key.clone(), ca.clone());
                async move { read_files(&cert, &key, ca.as_ref()).await }
            };
            follow(from, fetch).await
        }
        Certificates::Secret { name } => {
            let api: Api<Secret> = Api::namespaced(client, namespace);
            let from = format!("the Secret {namespace}/{name}");
            let name = name.clone();
            let fetch = move || {
                let (api, name) = (api.clone(), name.clone());
                async move { read_secret(&api, &name).await }
            };
            follow(from, fetch).await
        }
    }
}

/// Serves what `fetch` reads now, and reads it again every [`RELOAD_EVERY`], serving each
/// change that can be used.
async fn follow<F, Fut>(
    from: String,
    mut fetch: F,
) -> Result<(Arc<Rotating>, watch::Receiver<Option<String>>), CertError>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = Result<Material, CertError>> + Send,
{
    let first = fetch().await?;
    let rotating = Rotating::new(first.certified(&from)?);
    let (bundle, trusted) = watch::channel(first.ca.clone());
    let serving = rotating.clone();
    tokio::spawn(async move {
        let mut last = first;
        loop {
            tokio::time::sleep(RELOAD_EVERY).await;
            let next = match fetch().await {
                Ok(next) if next == last => continue,
                Ok(next) => next,
                Err(error) => {
                    tracing::warn!(error = %wasmop_core::chain(&error), "cannot read the webhook certificate again; serving the one read before");
                    continue;
                }
            };
            match next.certified(&from) {
                Ok(key) => {
                    serving.set(key);
                    bundle.send_replace(next.ca.clone());
                    tracing::info!(from = %from, "serving the changed webhook certificate");
                    last = next;
                }
                Err(error) => {
                    tracing::warn!(error = %wasmop_core::chain(&error), "the changed webhook certificate cannot be used; serving the one read before");
                    last = next;
                }
            }
        }
    });
    Ok((rotating, trusted))
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
            data: Some(fresh.secret_data()),
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

    /// What the CA Secret holds: the certificate and the key, PEM.
    fn secret_data(&self) -> std::collections::BTreeMap<String, ByteString> {
        [
            (
                CA_CERT_KEY.to_owned(),
                ByteString(self.ca_pem.clone().into_bytes()),
            ),
            (
                CA_KEY_KEY.to_owned(),
                ByteString(self.issuer.key().serialize_pem().into_bytes()),
            ),
        ]
        .into()
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
        // The CA bundle's sender: the CA never changes while the host runs, but its
        // receivers must not see the channel close.
        _bundle: watch::Sender<Option<String>>,
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
            data: Some(fresh.secret_data()),
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
