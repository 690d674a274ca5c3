//! `admission`: where the host serves its plugins' admission webhooks, how the API server
//! reaches it (a Service in the cluster, or a URL), the webhook configurations it manages,
//! and the certificates it issues itself.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::fields::{address, duration_or};
use super::raw::{RawAdmission, RawCertificate};
use super::{ConfigError, value_error};
use wasmop_core::plugin::PluginName;

/// HTTPS on port 9443 of every interface: controller-runtime's webhook port.
pub(crate) const DEFAULT_ADDRESS: &str = "0.0.0.0:9443";
/// 32 reviews at once: a review is a fresh instance and a few host calls at most, so this
/// keeps both cores busy while bounding the memory that reviews can hold at once.
pub(crate) const DEFAULT_CONCURRENCY: u32 = 32;
/// An AdmissionReview carries the object and the old object (3 MiB each at most, the API
/// server's own limit) and some metadata: 8 MiB holds the largest the API server sends.
pub(crate) const DEFAULT_MAX_REQUEST_BYTES: u64 = 8 << 20;
/// Serving certificates live a week and are renewed after two thirds of it: a host that
/// cannot renew (its CA Secret unreadable) has more than two days to be noticed.
pub(crate) const DEFAULT_CERTIFICATE_VALIDITY: Duration = Duration::from_secs(7 * 24 * 3600);
/// The shortest serving-certificate validity: renewal must not become a busy loop.
const MIN_CERTIFICATE_VALIDITY: Duration = Duration::from_secs(10);

/// How the API server reaches the host's webhooks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// A Service in front of the host's Pods (in a cluster).
    Service {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Its port.
        port: u16,
    },
    /// An HTTPS URL (outside a cluster, or a fixed address): `https://host[:port][/prefix]`.
    Url {
        /// The URL without a trailing `/`; `/validate/<plugin>` is appended.
        base: String,
        /// Its host, which the serving certificate names.
        host: String,
    },
}

/// Where the webhook server's certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Certificates {
    /// The host issues them: a CA kept in a Secret, a serving certificate per replica.
    Issued {
        /// The Secret (in the host's namespace) that keeps the CA every replica issues from.
        ca_secret: String,
        /// How long a serving certificate is valid; it is renewed after two thirds of it.
        validity: Duration,
    },
    /// PEM files (a mounted Secret), read again when they change.
    Files {
        /// The certificate chain.
        cert: PathBuf,
        /// Its private key.
        key: PathBuf,
        /// The CA the API server should trust (the configurations' `caBundle`); without it
        /// the host leaves `caBundle` to whoever injects it.
        ca: Option<PathBuf>,
    },
    /// A `kubernetes.io/tls` Secret of the host's namespace (`tls.crt`, `tls.key`, and
    /// `ca.crt` when the issuer writes one, as cert-manager does), read again when it changes.
    Secret {
        /// Its name.
        name: String,
    },
}

/// The validated `admission` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AdmissionConfig {
    /// Where HTTPS is served.
    pub(crate) address: SocketAddr,
    /// How the API server reaches it.
    pub(crate) endpoint: Endpoint,
    /// The name of the Validating/MutatingWebhookConfiguration this host deployment manages.
    pub(crate) configuration_name: String,
    /// Reviews that may run at once over all plugins.
    pub(crate) concurrency: usize,
    /// The largest request body read; a larger one is answered 413.
    pub(crate) max_request_bytes: usize,
    /// Where the serving certificate comes from.
    pub(crate) certificates: Certificates,
    /// Namespaces no webhook reviews: by default `kube-system` and the host's own, so that
    /// no plugin can stop the control plane's or the host's own objects from being written.
    pub(crate) exclude_namespaces: Vec<String>,
}

impl AdmissionConfig {
    /// The names the serving certificate must carry: the Service's DNS names, or the URL's
    /// host.
    pub(crate) fn certificate_names(&self) -> Vec<String> {
        match &self.endpoint {
            Endpoint::Service {
                namespace, name, ..
            } => vec![
                format!("{name}.{namespace}.svc"),
                format!("{name}.{namespace}.svc.cluster.local"),
            ],
            Endpoint::Url { host, .. } => vec![host.clone()],
        }
    }
}

/// Validates the `admission` section; `None` when it is absent or `enabled: false`.
pub(super) fn validate(
    raw: Option<&RawAdmission>,
    namespace: &str,
) -> Result<Option<AdmissionConfig>, ConfigError> {
    let Some(raw) = raw.filter(|r| r.enabled.unwrap_or(true)) else {
        return Ok(None);
    };
    let address = address("admission.address", raw.address.as_deref(), DEFAULT_ADDRESS)?
        .ok_or_else(|| value_error("admission.address", "must be `host:port`"))?;
    let endpoint = match (&raw.url, &raw.service) {
        (Some(_), Some(_)) => {
            return Err(value_error(
                "admission",
                "give either `url` or `service`, not both",
            ));
        }
        (None, None) => {
            return Err(value_error(
                "admission",
                "say how the API server reaches the host: `service: {name: ...}` in a cluster, \
                 or `url: https://...`",
            ));
        }
        (Some(url), None) => url_endpoint(url)?,
        (None, Some(service)) => {
            let name = dns_label("admission.service.name", &service.name)?;
            let namespace = dns_label(
                "admission.service.namespace",
                service.namespace.as_deref().unwrap_or(namespace),
            )?;
            let port = service.port.unwrap_or(443);
            if port == 0 {
                return Err(value_error("admission.service.port", "must be 1..=65535"));
            }
            Endpoint::Service {
                namespace,
                name,
                port,
            }
        }
    };
    let configuration_name = raw
        .configuration_name
        .clone()
        .unwrap_or_else(|| format!("wasmop-{namespace}"));
    dns_label("admission.configurationName", &configuration_name)?;
    let concurrency = raw.concurrency.unwrap_or(DEFAULT_CONCURRENCY);
    if concurrency == 0 {
        return Err(value_error("admission.concurrency", "must be at least 1"));
    }
    let max_request_bytes = match &raw.max_request_bytes {
        None => DEFAULT_MAX_REQUEST_BYTES,
        Some(q) => super::fields::quantity("admission.maxRequestBytes", q)?,
    };
    if !(64 << 10..=64 << 20).contains(&max_request_bytes) {
        return Err(value_error(
            "admission.maxRequestBytes",
            "must be 64Ki..=64Mi (the API server sends objects of up to 3 MiB, twice on an update)",
        ));
    }
    let certificates = certificates(raw.certificate.clone().unwrap_or_default())?;
    let exclude_namespaces = match &raw.exclude_namespaces {
        None => vec!["kube-system".to_owned(), namespace.to_owned()],
        Some(list) => list
            .iter()
            .enumerate()
            .map(|(i, n)| dns_label(&format!("admission.excludeNamespaces[{i}]"), n))
            .collect::<Result<_, _>>()?,
    };
    Ok(Some(AdmissionConfig {
        address,
        endpoint,
        configuration_name,
        concurrency: usize::try_from(concurrency).unwrap_or(usize::MAX),
        max_request_bytes: usize::try_from(max_request_bytes).unwrap_or(usize::MAX),
        certificates,
        exclude_namespaces,
    }))
}

/// `admission.certificate`: issued by the host (the default: `caSecretName`, `validity`),
/// PEM files (`certFile`, `keyFile`, `caFile`) or a `kubernetes.io/tls` Secret
/// (`secretName`); one of the three.
fn certificates(raw: RawCertificate) -> Result<Certificates, ConfigError> {
    const AT: &str = "admission.certificate";
    let issued = raw.ca_secret_name.is_some() || raw.validity.is_some();
    let files = raw.cert_file.is_some() || raw.key_file.is_some() || raw.ca_file.is_some();
    let secret = raw.secret_name.is_some();
    if [issued, files, secret].iter().filter(|b| **b).count() > 1 {
        return Err(value_error(
            AT,
            "give one of: `caSecretName`/`validity` (the host issues the certificates), \
             `certFile`/`keyFile`/`caFile` (PEM files), or `secretName` (a kubernetes.io/tls \
             Secret)",
        ));
    }
    if files {
        let (Some(cert), Some(key)) = (raw.cert_file, raw.key_file) else {
            return Err(value_error(
                AT,
                "`certFile` and `keyFile` go together (and `caFile`, the CA the API server \
                 should trust, with them)",
            ));
        };
        return Ok(Certificates::Files {
            cert: cert.into(),
            key: key.into(),
            ca: raw.ca_file.map(Into::into),
        });
    }
    if let Some(name) = raw.secret_name {
        return Ok(Certificates::Secret {
            name: dns_label(&format!("{AT}.secretName"), &name)?,
        });
    }
    let ca_secret = raw
        .ca_secret_name
        .unwrap_or_else(|| "wasmop-webhook-ca".to_owned());
    dns_label(&format!("{AT}.caSecretName"), &ca_secret)?;
    let validity = duration_or(
        &format!("{AT}.validity"),
        raw.validity.as_deref(),
        DEFAULT_CERTIFICATE_VALIDITY,
    )?;
    if validity < MIN_CERTIFICATE_VALIDITY {
        return Err(value_error(
            format!("{AT}.validity"),
            "must be at least 10s",
        ));
    }
    Ok(Certificates::Issued {
        ca_secret,
        validity,
    })
}

fn dns_label(field: &str, name: &str) -> Result<String, ConfigError> {
    PluginName::new(name.to_owned())
        .map(|n| n.as_str().to_owned())
        .map_err(|_| {
            value_error(
                field,
                format!("`{name}` is not a name (lowercase letters, digits and `-`)"),
            )
        })
}

/// `https://host[:port][/prefix]`, with no query, fragment or user info: the API server
/// refuses those in a webhook's URL.
fn url_endpoint(url: &str) -> Result<Endpoint, ConfigError> {
    const FIELD: &str = "admission.url";
    let uri: hyper::Uri = url
        .parse()
        .map_err(|e| value_error(FIELD, format!("`{url}` is not a URL: {e}")))?;
    if uri.scheme_str() != Some("https") {
        return Err(value_error(
            FIELD,
            format!("`{url}` must be an https:// URL (the API server calls webhooks over TLS)"),
        ));
    }
    let Some(authority) = uri.authority() else {
        return Err(value_error(FIELD, format!("`{url}` has no host")));
    };
    if authority.as_str().contains('@') || uri.query().is_some() || url.contains('#') {
        return Err(value_error(
            FIELD,
            format!("`{url}` may not carry user info, a query or a fragment"),
        ));
    }
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let base = url.trim_end_matches('/').to_owned();
    Ok(Endpoint::Url { base, host })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn parse(yaml: &str) -> Result<Option<AdmissionConfig>, ConfigError> {
        let raw = Config::parse_raw(yaml, std::path::Path::new("wasmop.yaml"))?;
        Config::from_raw(raw, None).map(|c| c.admission)
    }

    #[test]
    fn admission_is_off_without_its_section() {
        assert_eq!(parse("").expect("valid"), None);
        assert_eq!(
            parse("admission: {enabled: false, url: 'https://127.0.0.1:9443'}\n").expect("valid"),
            None
        );
    }

    #[test]
    fn a_url_endpoint_names_its_host_in_the_certificate() {
        let a = parse("namespace: ops\nadmission: {url: 'https://127.0.0.1:9443/'}\n")
            .expect("valid")
            .expect("on");
        assert_eq!(a.address, DEFAULT_ADDRESS.parse().expect("address"));
        assert_eq!(
            a.endpoint,
            Endpoint::Url {
                base: "https://127.0.0.1:9443".into(),
                host: "127.0.0.1".into()
            }
        );
        assert_eq!(a.certificate_names(), ["127.0.0.1"]);
        assert_eq!(a.configuration_name, "wasmop-ops");
        assert_eq!(
            a.certificates,
            Certificates::Issued {
                ca_secret: "wasmop-webhook-ca".into(),
                validity: DEFAULT_CERTIFICATE_VALIDITY
            }
        );
        assert_eq!(a.exclude_namespaces, ["kube-system", "ops"]);
    }

    #[test]
    fn a_service_endpoint_defaults_to_the_host_namespace_and_port_443() {
        let a = parse("namespace: ops\nadmission: {service: {name: wasmop-webhook}}\n")
            .expect("valid")
            .expect("on");
        assert_eq!(
            a.endpoint,
            Endpoint::Service {
                namespace: "ops".into(),
                name: "wasmop-webhook".into(),
                port: 443
            }
        );
        assert_eq!(
            a.certificate_names(),
            [
                "wasmop-webhook.ops.svc",
                "wasmop-webhook.ops.svc.cluster.local"
            ]
        );
    }

    #[test]
    fn a_plugin_entry_can_turn_its_webhooks_off_or_replace_their_failure_policy() {
        use wasmop_runtime::admission::FailurePolicy;
        let raw = Config::parse_raw(
            "defaults: {admission: {failurePolicy: Ignore}}\n\
             plugins:\n  strict: {admission: {failurePolicy: Fail}}\n  \
             off: {admission: {enabled: false}}\n  \
             validating-only: {admission: {mutating: false}}\n",
            std::path::Path::new("wasmop.yaml"),
        )
        .expect("parses");
        let c = Config::from_raw(raw, None).expect("valid");
        let get = |n: &str| {
            c.plugin(&PluginName::new(n).expect("name"))
                .admission
                .clone()
        };
        assert_eq!(get("strict").failure_policy, Some(FailurePolicy::Fail));
        assert!(get("strict").enabled);
        assert_eq!(get("other").failure_policy, Some(FailurePolicy::Ignore));
        assert!(!get("off").enabled);
        assert_eq!(get("off").failure_policy, Some(FailurePolicy::Ignore));
        let only = get("validating-only");
        assert!(only.validating && !only.mutating && only.enabled);
        let err = parse("plugins:\n  db: {admission: {failurePolicy: Maybe}}\n").expect_err("bad");
        let text = format!("{:#}", anyhow::Error::from(err));
        assert!(
            text.contains("`plugins.db.admission.failurePolicy`"),
            "{text}"
        );
    }

    #[test]
    fn certificates_come_from_the_host_from_files_or_from_a_secret() {
        let on = |cert: &str| {
            parse(&format!(
                "admission: {{url: 'https://x', certificate: {cert}}}\n"
            ))
            .map(|a| a.expect("on").certificates)
        };
        assert_eq!(
            on("{certFile: /tls/tls.crt, keyFile: /tls/tls.key, caFile: /tls/ca.crt}")
                .expect("files"),
            Certificates::Files {
                cert: "/tls/tls.crt".into(),
                key: "/tls/tls.key".into(),
                ca: Some("/tls/ca.crt".into())
            }
        );
        assert_eq!(
            on("{secretName: wasmop-webhook-tls}").expect("secret"),
            Certificates::Secret {
                name: "wasmop-webhook-tls".into()
            }
        );
        for bad in [
            "{certFile: /a, secretName: b}",
            "{validity: 1h, keyFile: /k, certFile: /c}",
            "{certFile: /a}",
        ] {
            let err = on(bad).expect_err(bad);
            let text = format!("{:#}", anyhow::Error::from(err));
            assert!(text.contains("`admission.certificate`"), "{bad}: {text}");
        }
    }

    #[test]
    fn bad_admission_settings_name_their_field() {
        for (yaml, field) in [
            ("admission: {}\n", "admission"),
            ("admission: {url: 'http://x:1'}\n", "admission.url"),
            ("admission: {url: 'https://x:1/?a=b'}\n", "admission.url"),
            (
                "admission: {url: 'https://x', service: {name: a}}\n",
                "admission",
            ),
            (
                "admission: {service: {name: A_B}}\n",
                "admission.service.name",
            ),
            (
                "admission: {url: 'https://x', concurrency: 0}\n",
                "admission.concurrency",
            ),
            (
                "admission: {url: 'https://x', maxRequestBytes: 1Ki}\n",
                "admission.maxRequestBytes",
            ),
            (
                "admission: {url: 'https://x', certificate: {validity: 1s}}\n",
                "admission.certificate.validity",
            ),
            (
                "admission: {url: 'https://x', address: nowhere}\n",
                "admission.address",
            ),
            (
                "admission: {url: 'https://x', excludeNamespaces: [ok, Not_Ok]}\n",
                "admission.excludeNamespaces[1]",
            ),
        ] {
            let err = parse(yaml).expect_err(yaml);
            let text = format!("{:#}", anyhow::Error::from(err));
            assert!(text.contains(&format!("`{field}`")), "{yaml}: {text}");
        }
    }
}
