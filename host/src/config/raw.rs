//! The host configuration file as written: every field optional, unknown keys refused. This is
//! the `Raw*` form; [`super::Config::from_raw`] validates it into the config the host uses.
//!
//! The YAML below shows every field (`deploy/config/wasmop.yaml` is the commented example):
//!
//! ```yaml
//! # Where plugin components come from, watched for new versions (hot reload). The earlier
//! # source wins when two provide the same plugin name.
//! sources:
//!   - directory: /etc/wasmop/plugins          # every `*.wasm` file (a volume, a mounted ConfigMap)
//!   - configMap: {name: wasmop-plugins}        # `binaryData` keys `*.wasm`, read through the API;
//!                                              # namespace defaults to `namespace` below
//! # Calls that may run at once over all plugins (default 64).
//! concurrency: 64
//! # How often every object is reconciled again even if nothing changed (default 10m; 0s = never).
//! resyncPeriod: 10m
//! # `text` (the default) or `json`.
//! logFormat: text
//! # Where `/metrics` is served (default 0.0.0.0:9090; `""` disables it).
//! metricsAddress: 127.0.0.1:9090
//! # Where `/healthz`, `/readyz` and `/status` are served (default 0.0.0.0:8081; `""` disables).
//! healthAddress: 127.0.0.1:8081
//! # How long running reconciles get to finish after SIGTERM/SIGINT (default 30s).
//! shutdownTimeout: 30s
//! # Only the holder of a Lease reconciles; the others keep their caches warm (default: off).
//! leaderElection:
//!   enabled: true
//!   leaseName: wasmop-leader       # default wasmop-leader
//!   leaseNamespace: wasmop-system  # default: `namespace`
//!   leaseDuration: 15s
//!   renewDeadline: 10s
//!   retryPeriod: 2s
//! # Directory for precompiled plugin artefacts (default: none, compile at every start).
//! cacheDirectory: /var/cache/wasmop
//! # Artefacts made ahead of time by `wasmop compile` (read-only; default: none).
//! precompiledDirectory: /usr/lib/wasmop/precompiled
//! # The largest component compiled here (default: any); a bigger one without an artefact in
//! # either directory is refused, saying to precompile it (compiling takes many times its size).
//! maxCompileBytes: 8Mi
//! # A version without an artefact runs on Winch code at once, Cranelift's later (default: true).
//! tieredCompilation: true
//! # Write /tmp/perf-<pid>.map, so that `perf` names the plugins' functions (default: false).
//! perfMap: false
//! # A call whose guest code computes this long moves to nice-19 threads (default 50ms; 0s = never).
//! demoteAfter: 50ms
//! # How long a plugin's `describe` may run at load (default 1s, at most 5m).
//! describeDeadline: 1s
//! # The host's own namespace, where it records plugins' finalizers (default: $POD_NAMESPACE,
//! # else wasmop-system).
//! namespace: wasmop-system
//! # How long a recorded plugin may be missing before its finalizers are released (default 10m).
//! orphanedFinalizerGrace: 10m
//! # Kinds whose implied verbs need an explicit grant, beyond the built-in ones (Secret,
//! # ServiceAccount, Node, RBAC, admission configuration, CRDs, APIService, CSRs).
//! sensitiveKinds:
//!   - {group: "", kind: Pod}
//! # Serve the plugins' admission webhooks (validate/mutate) over HTTPS (default: off).
//! admission:
//!   address: 0.0.0.0:9443                 # default
//!   service: {name: wasmop-webhook}       # how the API server reaches the host in a cluster;
//!   # url: https://127.0.0.1:9443         # or a URL (outside a cluster)
//!   configurationName: wasmop-wasmop-system  # default wasmop-<namespace>
//!   concurrency: 32                       # reviews at once over all plugins
//!   maxRequestBytes: 8Mi                  # larger AdmissionReviews are answered 413
//!   excludeNamespaces: [kube-system, wasmop-system]  # never reviewed (default: these two)
//!   certificate:                          # one of three sources:
//!     caSecretName: wasmop-webhook-ca     # the host issues: the CA every replica issues from
//!     validity: 168h                      #   (host namespace); renewed after 2/3 of validity
//!     # certFile: /tls/tls.crt            # or PEM files (a mounted Secret), read again when
//!     # keyFile: /tls/tls.key             #   they change; caFile becomes the caBundle
//!     # caFile: /tls/ca.crt
//!     # secretName: wasmop-webhook-tls    # or a kubernetes.io/tls Secret (cert-manager's)
//! # Settings every plugin gets unless its own entry says otherwise.
//! defaults:
//!   memory: 64Mi
//!   deadline: 10s
//!   concurrency: 4
//!   failureThreshold: 5   # traps/timeouts in a row that make a version "failing" (0: never)
//!   rollback: true        # roll a failing version back to the one it replaced
//!   minRequeueAfter: 1s   # a plugin's shorter requeue-after is raised to this
//!   objectRateLimit: {burst: 10, interval: 1s}   # per object: 10 at once, then 1 a second
//! # Per plugin, by the name its `describe` returns.
//! plugins:
//!   database-config:
//!     namespaces: [team-a, team-b]   # confine it (default: every namespace)
//!     grants:                         # permissions beyond its primary/owned/watched kinds
//!       - group: ""
//!         kind: Secret
//!         verbs: [get]
//!         namespaces: [team-a]        # empty: every namespace it may touch
//!     memory: 32Mi
//!     deadline: 5s
//!     fuel: 100000000
//!     concurrency: 2
//!     config: {prefix: db-}           # the plugin's own settings (`config.get`)
//!     admission:                      # its admission webhooks (with `admission` above)
//!       enabled: true                 # false: serve and register none of them
//!       validating: true              # false: not its validating webhook
//!       mutating: true                # false: not its mutating webhook
//!       failurePolicy: Ignore         # replaces the plugin's own (Fail or Ignore)
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawConfig {
    /// Where plugins come from.
    #[serde(default)]
    pub(crate) sources: Vec<RawSource>,
    /// Global concurrency.
    pub(crate) concurrency: Option<u32>,
    /// Periodic resync, as a duration (`10m`, `30s`, `0s`).
    pub(crate) resync_period: Option<String>,
    /// `text` or `json`.
    pub(crate) log_format: Option<String>,
    /// Address of the metrics server, or `""` for none.
    pub(crate) metrics_address: Option<String>,
    /// Address of the health-probe server, or `""` for none.
    pub(crate) health_address: Option<String>,
    /// Grace for running reconciles after a shutdown signal, as a duration.
    pub(crate) shutdown_timeout: Option<String>,
    /// Leader election.
    pub(crate) leader_election: Option<RawLeaderElection>,
    /// Artefact cache directory.
    pub(crate) cache_directory: Option<String>,
    /// Directory of artefacts made by `wasmop compile`.
    pub(crate) precompiled_directory: Option<String>,
    /// The largest component the host compiles itself (`8Mi`); bigger ones need an artefact.
    pub(crate) max_compile_bytes: Option<RawQuantity>,
    /// Tiered loading: Winch code first, Cranelift's once compiled in the background.
    pub(crate) tiered_compilation: Option<bool>,
    /// `/tmp/perf-<pid>.map` for `perf`.
    pub(crate) perf_map: Option<bool>,
    /// Guest computing after which a call is demoted to the low-priority lane, as a duration
    /// (`0s`: never).
    pub(crate) demote_after: Option<String>,
    /// How long `describe` may run at load, as a duration.
    pub(crate) describe_deadline: Option<String>,
    /// The host's own namespace.
    pub(crate) namespace: Option<String>,
    /// Grace period before a missing plugin's finalizers are released.
    pub(crate) orphaned_finalizer_grace: Option<String>,
    /// Kinds added to the built-in sensitive kinds, whose implied verbs need explicit grants.
    #[serde(default)]
    pub(crate) sensitive_kinds: Vec<RawKind>,
    /// Settings for every plugin.
    pub(crate) defaults: Option<RawPluginSettings>,
    /// Settings per plugin name.
    #[serde(default)]
    pub(crate) plugins: BTreeMap<String, RawPluginSettings>,
    /// Serving the plugins' admission webhooks.
    pub(crate) admission: Option<RawAdmission>,
}

/// The admission webhook server and the webhook configurations the host manages.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawAdmission {
    /// Whether to serve (default true when the section is present).
    pub(crate) enabled: Option<bool>,
    /// Where HTTPS is served, `host:port`.
    pub(crate) address: Option<String>,
    /// The URL the API server calls (outside a cluster).
    pub(crate) url: Option<String>,
    /// The Service the API server calls (in a cluster).
    pub(crate) service: Option<RawWebhookService>,
    /// The name of the webhook configurations.
    pub(crate) configuration_name: Option<String>,
    /// Reviews that may run at once.
    pub(crate) concurrency: Option<u32>,
    /// The largest request body read.
    pub(crate) max_request_bytes: Option<RawQuantity>,
    /// The certificates the host issues.
    pub(crate) certificate: Option<RawCertificate>,
    /// Namespaces no webhook reviews (default: `kube-system` and the host's own).
    pub(crate) exclude_namespaces: Option<Vec<String>>,
}

/// The Service in front of the host's webhook server.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawWebhookService {
    /// Its name.
    pub(crate) name: String,
    /// Its namespace (default: the host's).
    pub(crate) namespace: Option<String>,
    /// Its port (default 443).
    pub(crate) port: Option<u16>,
}

/// The webhook server's certificate: issued by the host, from files, or from a Secret.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawCertificate {
    /// The Secret holding the CA (in the host's namespace).
    pub(crate) ca_secret_name: Option<String>,
    /// How long a serving certificate is valid, as a duration.
    pub(crate) validity: Option<String>,
    /// A PEM certificate chain.
    pub(crate) cert_file: Option<String>,
    /// Its PEM private key.
    pub(crate) key_file: Option<String>,
    /// The PEM CA the API server should trust.
    pub(crate) ca_file: Option<String>,
    /// A `kubernetes.io/tls` Secret in the host's namespace.
    pub(crate) secret_name: Option<String>,
}

/// Leader election over a `coordination.k8s.io/v1` Lease.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawLeaderElection {
    /// Whether to take part in leader election.
    pub(crate) enabled: Option<bool>,
    /// The Lease's name.
    pub(crate) lease_name: Option<String>,
    /// The Lease's namespace.
    pub(crate) lease_namespace: Option<String>,
    /// How long a lease is valid after its last renewal, as a duration.
    pub(crate) lease_duration: Option<String>,
    /// How long the leader keeps trying to renew before it gives up, as a duration.
    pub(crate) renew_deadline: Option<String>,
    /// How often acquiring or renewing is tried, as a duration.
    pub(crate) retry_period: Option<String>,
}

/// One plugin source: exactly one of its fields.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawSource {
    /// A directory of `*.wasm` components.
    pub(crate) directory: Option<String>,
    /// A ConfigMap whose `binaryData` keys ending in `.wasm` are components.
    pub(crate) config_map: Option<RawConfigMapSource>,
}

/// A ConfigMap source.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawConfigMapSource {
    /// The ConfigMap's name.
    pub(crate) name: String,
    /// Its namespace (default: the host's namespace).
    pub(crate) namespace: Option<String>,
}

/// Settings of one plugin (or the defaults).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawPluginSettings {
    /// Namespaces the plugin is confined to.
    pub(crate) namespaces: Option<Vec<String>>,
    /// Permissions granted beyond its own kinds.
    pub(crate) grants: Option<Vec<RawGrant>>,
    /// Linear memory per call (`64Mi`, `1Gi`, or bytes).
    pub(crate) memory: Option<RawQuantity>,
    /// Wall-clock time per call (`10s`, `500ms`).
    pub(crate) deadline: Option<String>,
    /// Fuel per call.
    pub(crate) fuel: Option<u64>,
    /// Reconciles of this plugin that may run at once.
    pub(crate) concurrency: Option<u16>,
    /// The plugin's own settings.
    pub(crate) config: Option<Value>,
    /// Traps or timeouts with no success between after which a version is reported as
    /// failing (0: never).
    pub(crate) failure_threshold: Option<u32>,
    /// Whether a failing version is rolled back to the version it replaced.
    pub(crate) rollback: Option<bool>,
    /// The shortest requeue-after honoured, as a duration; shorter ones are raised to it.
    pub(crate) min_requeue_after: Option<String>,
    /// The per-object rate limit of reconciles.
    pub(crate) object_rate_limit: Option<RawObjectRate>,
    /// What the plugin's admission webhooks may do.
    pub(crate) admission: Option<RawPluginAdmission>,
}

/// A plugin's admission webhooks, as the operator bounds them.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawPluginAdmission {
    /// Whether they are served and registered.
    pub(crate) enabled: Option<bool>,
    /// Whether its validating webhook is.
    pub(crate) validating: Option<bool>,
    /// Whether its mutating webhook is.
    pub(crate) mutating: Option<bool>,
    /// `Fail` or `Ignore`, replacing what the plugin declares.
    pub(crate) failure_policy: Option<String>,
}

/// A token bucket per object: `burst` reconciles at once, then one per `interval`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawObjectRate {
    /// Reconciles an object may start at once.
    pub(crate) burst: Option<u32>,
    /// The time that refills one, as a duration (`0s`: no limit).
    pub(crate) interval: Option<String>,
}

/// A quantity written as a number of bytes or with a binary suffix.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawQuantity {
    /// Bytes.
    Bytes(u64),
    /// `64Mi` and friends.
    Text(String),
}

/// A kind named by group and kind.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawKind {
    /// API group, `""` for core.
    #[serde(default)]
    pub(crate) group: String,
    /// The kind.
    pub(crate) kind: String,
}

/// One granted permission.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RawGrant {
    /// API group, `""` for core.
    #[serde(default)]
    pub(crate) group: String,
    /// The kind.
    pub(crate) kind: String,
    /// Verbs: get, list, create, patch, apply, delete, patch-status.
    pub(crate) verbs: Vec<String>,
    /// Namespaces; empty means every namespace the plugin may touch.
    #[serde(default)]
    pub(crate) namespaces: Vec<String>,
}
