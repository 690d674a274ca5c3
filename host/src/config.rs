//! The host configuration: one YAML file ([`raw::RawConfig`], unknown keys refused) overlaid
//! with flags and `WASMOP_*` environment variables (`flags::RunArgs`), then validated into
//! [`Config`], which is what the rest of the host uses. A bad value is refused at start with
//! the path of the field that holds it (`plugins.database-config.memory`).
//!
//! Each consumer owns its settings type and a module here converts into it: `plugin` into
//! the controller's `PluginSettings`, `leader` into its `LeaderElection`, `sources` into
//! its `Source`s, `runtime` into the runtime's `RuntimeConfig`; `policy` reads grants and
//! sensitive kinds, `fields` the host-wide addresses and durations.

pub(crate) mod admission;
mod fairness;
mod fields;
pub(crate) mod flags;
mod leader;
mod plugin;
mod policy;
pub mod raw;
mod runtime;
mod sources;
pub mod units;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use self::raw::RawConfig;
use self::units::UnitError;
use wasmop_controller::PluginSettings;
use wasmop_controller::leader::LeaderElection;
use wasmop_controller::source::Source;
use wasmop_core::plugin::{PluginName, PluginNameError};
use wasmop_core::policy::SensitiveKinds;

/// 64 calls at once over all plugins: the runtime's pooling allocator is sized for it, and it is
/// more than a 2-core node can run without reconciles queueing on the CPU anyway.
pub(crate) const DEFAULT_CONCURRENCY: u32 = 64;
/// 4 reconciles at once per plugin: enough to hide API latency, and one busy plugin cannot take
/// more than a sixteenth of the global slots.
pub(crate) const DEFAULT_PLUGIN_CONCURRENCY: u16 = 4;
/// Every object is reconciled again every 10 minutes, as controller-runtime's default sync
/// period suggests: drift that no watch event reports is repaired within that time.
pub(crate) const DEFAULT_RESYNC: Duration = Duration::from_secs(600);
/// `/metrics` on port 9090 of every interface, where Prometheus' conventions expect it.
pub(crate) const DEFAULT_METRICS_ADDRESS: &str = "0.0.0.0:9090";
/// `/healthz`, `/readyz` and `/status` on port 8081, controller-runtime's probe port.
pub(crate) const DEFAULT_HEALTH_ADDRESS: &str = "0.0.0.0:8081";
/// Running reconciles get 30 s after SIGTERM: Kubernetes' default termination grace period.
pub(crate) const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);
/// The host's namespace when neither the config nor `POD_NAMESPACE` names one: where
/// `deploy/` installs it.
pub(crate) const DEFAULT_NAMESPACE: &str = "wasmop-system";
/// A missing plugin's finalizers are released after 10 minutes: long enough to replace or fix a
/// plugin, short enough that a namespace deletion is not blocked for long.
pub(crate) const DEFAULT_ORPHAN_GRACE: Duration = Duration::from_secs(600);
/// 1 GiB of linear memory is the most a plugin can be given: the pooling allocator reserves
/// address space for every slot at this size.
pub(crate) const MAX_PLUGIN_MEMORY: u64 = 1 << 30;
/// 5 minutes is the longest deadline: a reconcile holding a worker longer is a bug, and a
/// graceful shutdown must not wait for it.
pub(crate) const MAX_DEADLINE: Duration = Duration::from_secs(300);
/// A call is demoted to the low-priority lane after 50 ms of guest computing: a healthy
/// reconcile computes for well under a millisecond between host calls, so only a plugin that
/// spins (or does real heavy work, which then runs on spare CPU) gets there, and a spinning
/// one holds the host's workers for at most this long per call.
pub(crate) const DEFAULT_DEMOTE_AFTER: Duration = Duration::from_millis(50);
/// A version is failing after 5 traps or timeouts in a row: one object's backoff (0.5 s
/// doubling) reaches it in about 8 s, and a version that fails 5 times without one success is
/// broken rather than unlucky.
pub(crate) const DEFAULT_FAILURE_THRESHOLD: u32 = 5;

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// The validated host configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Where plugin components come from, in precedence order.
    pub(crate) sources: Vec<Source>,
    /// Calls that may run at once over all plugins.
    pub(crate) concurrency: u32,
    /// Periodic resync; `None` disables it.
    pub(crate) resync_period: Option<Duration>,
    /// Reconcile a plugin's objects again when a new version is swapped in: set by `wasmop
    /// dev`, not by the config file.
    pub(crate) reconcile_on_new_version: bool,
    /// Run the sources a `wasmop dev` build carries (see
    /// [`wasmop_runtime::RuntimeConfig::dev_sources`]): set by `wasmop dev`, not by the
    /// config file.
    pub(crate) dev_sources: bool,
    /// Log line format.
    pub(crate) log_format: LogFormat,
    /// Where `/metrics` is served; `None` disables it.
    pub(crate) metrics_address: Option<SocketAddr>,
    /// Where `/healthz`, `/readyz` and `/status` are served; `None` disables it.
    pub(crate) health_address: Option<SocketAddr>,
    /// How long running reconciles get to finish after a shutdown signal.
    pub(crate) shutdown_timeout: Duration,
    /// Leader election; `None` when disabled (this host always reconciles).
    pub(crate) leader_election: Option<LeaderElection>,
    /// Where precompiled artefacts are kept.
    pub(crate) cache_directory: Option<PathBuf>,
    /// Artefacts made by `wasmop compile`, loaded instead of compiling.
    pub(crate) precompiled_directory: Option<PathBuf>,
    /// The largest component compiled here; `None`: any (see
    /// [`wasmop_runtime::RuntimeConfig::max_compile_bytes`]).
    pub(crate) max_compile_bytes: Option<u64>,
    /// Tiered loading: a version without an artefact runs on Winch code at once and on
    /// Cranelift's once compiled in the background. On by default: a cold reload of a 450 KB
    /// plugin goes from hundreds of ms of Cranelift to tens of ms of Winch (README, "Reload
    /// latency"), for calls about a third slower until Cranelift's code takes over.
    pub(crate) tiered_compilation: bool,
    /// Whether the engine writes `/tmp/perf-<pid>.map`, so that `perf` names the plugins'
    /// functions; see [`wasmop_runtime::RuntimeConfig::perf_map`].
    pub(crate) perf_map: bool,
    /// Guest computing after which a call moves to the low-priority lane (threads at nice
    /// 19); `None` never moves one.
    pub(crate) demote_after: Option<Duration>,
    /// Wall-clock time a plugin's `describe` gets at load (default 1 s, at most
    /// [`MAX_DEADLINE`]); see [`wasmop_runtime::RuntimeConfig::describe_deadline`].
    pub(crate) describe_deadline: Duration,
    /// The host's own namespace.
    pub(crate) namespace: String,
    /// How long a recorded plugin may be missing before its finalizers are released.
    pub(crate) orphaned_finalizer_grace: Duration,
    /// Kubeconfig to use instead of the inferred one (in-cluster or `KUBECONFIG`).
    pub(crate) kubeconfig: Option<PathBuf>,
    /// Serving the plugins' admission webhooks; `None` when off.
    pub(crate) admission: Option<admission::AdmissionConfig>,
    /// The operator's sensitive kinds, added to the built-in ones.
    sensitive_kinds: Vec<(String, String)>,
    defaults: PluginSettings,
    plugins: BTreeMap<PluginName, PluginSettings>,
}

/// Why the configuration is refused. Each case names the field (as a path into the file) or
/// the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("cannot read the config file {}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not YAML of the expected shape (an unknown key, a wrong type).
    #[error("the config file {} is not a valid wasmop configuration", .path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What serde found, with the line and column.
        #[source]
        source: serde_yaml::Error,
    },
    /// A duration or size is malformed.
    #[error("`{field}` is invalid")]
    Unit {
        /// The field's path.
        field: String,
        /// Why.
        #[source]
        source: UnitError,
    },
    /// A plugin name in `plugins` is not a valid plugin name.
    #[error("`{field}` does not name a plugin")]
    PluginName {
        /// The field's path.
        field: String,
        /// Why.
        #[source]
        source: PluginNameError,
    },
    /// A value is out of range or otherwise unusable.
    #[error("`{field}` is invalid: {problem}")]
    Value {
        /// The field's path.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
}

fn value_error(field: impl Into<String>, problem: impl Into<String>) -> ConfigError {
    ConfigError::Value {
        field: field.into(),
        problem: problem.into(),
    }
}

impl Config {
    /// Reads and parses `path` without validating it.
    pub async fn read_raw(path: &Path) -> Result<RawConfig, ConfigError> {
        let text = tokio::fs::read_to_string(path)
            .await
            .map_err(|source| ConfigError::Read {
                path: path.to_owned(),
                source,
            })?;
        Self::parse_raw(&text, path)
    }

    /// Parses YAML text (an empty document is an empty configuration).
    pub(crate) fn parse_raw(text: &str, path: &Path) -> Result<RawConfig, ConfigError> {
        if text.trim().is_empty() {
            return Ok(RawConfig::default());
        }
        serde_yaml::from_str(text).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source,
        })
    }

    /// Validates a raw configuration: the host-wide fields here, then each consumer's part
    /// in its own module (sources, leader election, policy, the plugins' settings). The
    /// fields are checked in the order they have always been, so that of several bad
    /// fields the same one is reported.
    pub fn from_raw(raw: RawConfig, kubeconfig: Option<PathBuf>) -> Result<Self, ConfigError> {
        let concurrency = raw.concurrency.unwrap_or(DEFAULT_CONCURRENCY);
        if concurrency == 0 {
            return Err(value_error("concurrency", "must be at least 1"));
        }
        let resync_period =
            fields::zero_disables("resyncPeriod", raw.resync_period.as_deref(), DEFAULT_RESYNC)?;
        let demote_after = fields::zero_disables(
            "demoteAfter",
            raw.demote_after.as_deref(),
            DEFAULT_DEMOTE_AFTER,
        )?;
        let describe_deadline = match raw.describe_deadline.as_deref() {
            None => wasmop_runtime::DEFAULT_DESCRIBE_DEADLINE,
            Some(text) => fields::deadline("describeDeadline", text)?,
        };
        let max_compile_bytes = raw
            .max_compile_bytes
            .as_ref()
            .map(|q| fields::quantity("maxCompileBytes", q))
            .transpose()?;
        let log_format = fields::log_format(raw.log_format.as_deref())?;
        let metrics_address = fields::address(
            "metricsAddress",
            raw.metrics_address.as_deref(),
            DEFAULT_METRICS_ADDRESS,
        )?;
        let health_address = fields::address(
            "healthAddress",
            raw.health_address.as_deref(),
            DEFAULT_HEALTH_ADDRESS,
        )?;
        let shutdown_timeout = fields::duration_or(
            "shutdownTimeout",
            raw.shutdown_timeout.as_deref(),
            DEFAULT_SHUTDOWN_TIMEOUT,
        )?;
        let namespace = fields::host_namespace(raw.namespace.as_deref())?;
        let sources = sources::sources(&raw.sources, &namespace)?;
        let orphaned_finalizer_grace = fields::duration_or(
            "orphanedFinalizerGrace",
            raw.orphaned_finalizer_grace.as_deref(),
            DEFAULT_ORPHAN_GRACE,
        )?;
        let leader_election = match &raw.leader_election {
            Some(le) if le.enabled.unwrap_or(false) => Some(leader::validate(le, &namespace)?),
            _ => None,
        };
        let sensitive_kinds = policy::sensitive_kinds(&raw.sensitive_kinds)?;
        let admission = admission::validate(raw.admission.as_ref(), &namespace)?;
        let (defaults, plugins) = plugin::all(&raw.defaults.unwrap_or_default(), &raw.plugins)?;
        Ok(Self {
            sources,
            concurrency,
            resync_period,
            reconcile_on_new_version: false,
            dev_sources: false,
            log_format,
            metrics_address,
            health_address,
            shutdown_timeout,
            leader_election,
            cache_directory: raw.cache_directory.map(PathBuf::from),
            precompiled_directory: raw.precompiled_directory.map(PathBuf::from),
            max_compile_bytes,
            tiered_compilation: raw.tiered_compilation.unwrap_or(true),
            perf_map: raw.perf_map.unwrap_or(false),
            demote_after,
            describe_deadline,
            namespace,
            orphaned_finalizer_grace,
            kubeconfig,
            admission,
            sensitive_kinds,
            defaults,
            plugins,
        })
    }

    /// The kinds whose implied verbs need explicit grants: the built-in ones and the
    /// operator's (`sensitiveKinds`).
    pub(crate) fn sensitive_kinds(&self) -> SensitiveKinds {
        self.sensitive_kinds
            .iter()
            .fold(SensitiveKinds::builtin(), |all, (g, k)| {
                all.with(g.clone(), k.clone())
            })
    }

    /// The settings of the plugin named `name`: its own entry, or the defaults.
    pub(crate) fn plugin(&self, name: &PluginName) -> &PluginSettings {
        self.plugins.get(name).unwrap_or(&self.defaults)
    }

    /// The plugins that have an entry of their own.
    pub(crate) fn configured_plugins(&self) -> impl Iterator<Item = &PluginName> {
        self.plugins.keys()
    }
}

#[cfg(test)]
mod tests {
    use wasmop_core::plugin::Verb;
    use wasmop_runtime::Limits;

    use super::*;

    fn parse(yaml: &str) -> Result<Config, ConfigError> {
        let raw = Config::parse_raw(yaml, Path::new("wasmop.yaml"))?;
        Config::from_raw(raw, None)
    }

    #[test]
    fn empty_file_gives_documented_defaults() {
        let c = parse("").expect("valid");
        assert_eq!(c.concurrency, DEFAULT_CONCURRENCY);
        assert_eq!(c.resync_period, Some(DEFAULT_RESYNC));
        assert_eq!(c.log_format, LogFormat::Text);
        let any = PluginName::new("anything").expect("name");
        assert_eq!(c.plugin(&any).concurrency, DEFAULT_PLUGIN_CONCURRENCY);
        assert_eq!(c.plugin(&any).limits, Limits::default());
        assert_eq!(c.plugin(&any).failure_threshold, DEFAULT_FAILURE_THRESHOLD);
        assert!(c.plugin(&any).rollback);
    }

    #[test]
    fn plugin_entry_overrides_defaults_field_by_field() {
        let c = parse(
            "defaults: {memory: 32Mi, deadline: 2s}\n\
             plugins:\n  database-config:\n    memory: 16Mi\n    concurrency: 2\n    \
             config: {prefix: db-}\n    grants:\n    - {kind: Secret, verbs: [get], namespaces: [a]}\n",
        )
        .expect("valid");
        let s = c.plugin(&PluginName::new("database-config").expect("name"));
        assert_eq!(s.limits.memory, 16 << 20);
        assert_eq!(s.limits.deadline, Duration::from_secs(2));
        assert_eq!(s.concurrency, 2);
        assert_eq!(s.config["prefix"], "db-");
        assert_eq!(s.grants[0].kind, "Secret");
        assert_eq!(c.max_memory(), 32 << 20);
    }

    #[test]
    fn runtime_meters_fuel_only_when_some_plugin_has_a_budget() {
        let none = parse("plugins:\n  db: {memory: 16Mi}\n").expect("valid");
        assert!(!none.runtime_config().fuel_enabled());
        let one = parse("plugins:\n  db: {fuel: 1000}\n  other: {}\n").expect("valid");
        let rt = one.runtime_config();
        assert!(rt.fuel_enabled(), "a plugin's own budget turns metering on");
        // The runtime's defaults stay budget-less: plugins without one run unmetered in effect.
        assert_eq!(rt.limits.fuel, None);
        let other = PluginName::new("other").expect("name");
        assert_eq!(one.plugin(&other).limits.fuel, None);
        let defaults = parse("defaults: {fuel: 5000}\n").expect("valid");
        assert!(defaults.runtime_config().fuel_enabled());
        // A plugin that appears later without an entry gets the defaults' budget.
        let later = PluginName::new("added-later").expect("name");
        assert_eq!(defaults.plugin(&later).limits.fuel, Some(5000));
    }

    #[test]
    fn calls_are_demoted_after_50ms_unless_the_config_says_otherwise() {
        let default = parse("").expect("valid").runtime_config();
        assert_eq!(default.demote_after, Some(Duration::from_millis(50)));
        let sooner = parse("demoteAfter: 10ms\n").expect("valid");
        assert_eq!(
            sooner.runtime_config().demote_after,
            Some(Duration::from_millis(10))
        );
        let never = parse("demoteAfter: 0s\n").expect("valid");
        assert_eq!(
            default.describe_deadline,
            wasmop_runtime::DEFAULT_DESCRIBE_DEADLINE
        );
        let short = parse("describeDeadline: 200ms\n").expect("valid");
        assert_eq!(
            short.runtime_config().describe_deadline,
            Duration::from_millis(200)
        );
        let err = parse("describeDeadline: 0s\n").expect_err("zero");
        assert!(err.to_string().contains("describeDeadline"), "{err}");
        assert_eq!(never.runtime_config().demote_after, None);
        let err = parse("demoteAfter: soon\n").expect_err("not a duration");
        let text = format!("{:#}", anyhow::Error::from(err));
        assert!(text.contains("demoteAfter"), "{text}");
    }

    #[test]
    fn components_of_any_size_compile_unless_max_compile_bytes_bounds_them() {
        assert_eq!(
            parse("").expect("valid").runtime_config().max_compile_bytes,
            None
        );
        let bounded = parse("maxCompileBytes: 8Mi\n").expect("valid");
        assert_eq!(bounded.runtime_config().max_compile_bytes, Some(8 << 20));
        let bytes = parse("maxCompileBytes: 4096\n").expect("valid");
        assert_eq!(bytes.runtime_config().max_compile_bytes, Some(4096));
        // Zero: nothing is compiled here, every plugin needs an artefact.
        let none = parse("maxCompileBytes: 0\n").expect("valid");
        assert_eq!(none.runtime_config().max_compile_bytes, Some(0));
        let err = parse("maxCompileBytes: 8MB\n").expect_err("not a quantity");
        let text = format!("{:#}", anyhow::Error::from(err));
        assert!(text.contains("maxCompileBytes"), "{text}");
    }

    #[test]
    fn the_perf_map_is_off_unless_the_config_turns_it_on() {
        assert!(!parse("").expect("valid").runtime_config().perf_map);
        assert!(
            parse("perfMap: true\n")
                .expect("valid")
                .runtime_config()
                .perf_map
        );
        let err = parse("perfMap: 1\n").expect_err("not a boolean");
        let text = format!("{:#}", anyhow::Error::from(err));
        assert!(text.contains("perfMap"), "{text}");
    }

    #[test]
    fn tiered_compilation_is_on_unless_the_config_turns_it_off() {
        assert!(parse("").expect("valid").runtime_config().tiered);
        let off = parse("tieredCompilation: false\n").expect("valid");
        assert!(!off.runtime_config().tiered);
        let err = parse("tieredCompilation: sometimes\n").expect_err("not a boolean");
        let text = format!("{:#}", anyhow::Error::from(err));
        assert!(text.contains("tieredCompilation"), "{text}");
    }

    #[test]
    fn unknown_key_is_refused_with_its_name() {
        let err = parse("plugins:\n  db:\n    memroy: 1Mi\n").expect_err("typo");
        let text = format!("{:#}", anyhow::Error::from(err));
        assert!(text.contains("memroy"), "{text}");
    }

    #[test]
    fn bad_value_names_the_field_path() {
        let err = parse("plugins:\n  database-config:\n    memory: 12XB\n").expect_err("bad");
        assert_eq!(
            err.to_string(),
            "`plugins.database-config.memory` is invalid"
        );
        let err = parse("plugins:\n  database-config:\n    memory: 4Gi\n").expect_err("big");
        assert!(
            err.to_string()
                .starts_with("`plugins.database-config.memory` is invalid")
        );
        let err = parse("plugins:\n  x:\n    grants: [{kind: Secret, verbs: [read]}]\n")
            .expect_err("verb");
        assert!(
            err.to_string()
                .starts_with("`plugins.x.grants[0].verbs[0]`"),
            "{err}"
        );
        let err = parse("plugins:\n  Bad_Name: {}\n").expect_err("name");
        assert_eq!(err.to_string(), "`plugins.Bad_Name` does not name a plugin");
        let err = parse("logFormat: xml\n").expect_err("format");
        assert!(err.to_string().starts_with("`logFormat`"), "{err}");
    }

    #[test]
    fn the_documented_example_config_is_valid() {
        let c = parse(include_str!("../../deploy/config/wasmop.yaml")).expect("valid");
        let mirror = c.plugin(&PluginName::new("configmap-mirror").expect("name"));
        assert_eq!(mirror.grants[0].verbs, [Verb::Delete].into());
        assert_eq!(c.log_format, LogFormat::Json);
    }

    #[test]
    fn leader_election_is_off_by_default_and_takes_controller_runtime_defaults() {
        let c = parse("").expect("valid");
        assert_eq!(c.leader_election, None);
        assert_eq!(c.shutdown_timeout, Duration::from_secs(30));
        assert_eq!(
            c.health_address,
            Some("0.0.0.0:8081".parse().expect("addr"))
        );
        let c = parse("namespace: ops\nleaderElection: {enabled: true}\n").expect("valid");
        assert_eq!(
            c.leader_election,
            Some(LeaderElection {
                lease_name: "wasmop-leader".into(),
                lease_namespace: "ops".into(),
                lease_duration: Duration::from_secs(15),
                renew_deadline: Duration::from_secs(10),
                retry_period: Duration::from_secs(2),
            })
        );
    }

    #[test]
    fn configmap_source_defaults_to_the_host_namespace() {
        let c = parse(
            "namespace: ops\nsources:\n- directory: /p\n- configMap: {name: plugins}\n\
             - configMap: {name: more, namespace: other}\n",
        )
        .expect("valid");
        assert_eq!(
            c.sources,
            [
                Source::Directory("/p".into()),
                Source::ConfigMap {
                    namespace: "ops".into(),
                    name: "plugins".into()
                },
                Source::ConfigMap {
                    namespace: "other".into(),
                    name: "more".into()
                },
            ]
        );
    }

    #[test]
    fn leader_election_timings_that_allow_split_brain_are_refused() {
        let err =
            parse("leaderElection: {enabled: true, leaseDuration: 10s, renewDeadline: 10s}\n")
                .expect_err("deadline");
        assert!(
            err.to_string()
                .starts_with("`leaderElection.renewDeadline` is invalid"),
            "{err}"
        );
        let err = parse("leaderElection: {enabled: true, renewDeadline: 2s, retryPeriod: 2s}\n")
            .expect_err("retry");
        assert!(
            err.to_string()
                .starts_with("`leaderElection.retryPeriod` is invalid"),
            "{err}"
        );
        let err =
            parse("leaderElection: {enabled: true, leaseDuration: 1500ms}\n").expect_err("seconds");
        assert!(
            err.to_string()
                .starts_with("`leaderElection.leaseDuration`"),
            "{err}"
        );
        let err =
            parse("leaderElection: {enabled: true, leaseName: Bad_Name}\n").expect_err("name");
        assert!(
            err.to_string().contains("`Bad_Name` is not a Lease name"),
            "{err}"
        );
        let err = parse("shutdownTimeout: soon\n").expect_err("timeout");
        assert!(
            err.to_string().starts_with("`shutdownTimeout` is invalid"),
            "{err}"
        );
    }

    #[test]
    fn source_with_two_kinds_or_a_bad_name_is_refused() {
        let err = parse("sources: [{directory: /p, configMap: {name: x}}]\n").expect_err("two");
        assert_eq!(
            err.to_string(),
            "`sources[0]` is invalid: must have exactly one of `directory` and `configMap`"
        );
        let err = parse("sources: [{configMap: {name: Bad_Name}}]\n").expect_err("name");
        assert_eq!(
            err.to_string(),
            "`sources[0].configMap.name` is invalid: `Bad_Name` is not a Kubernetes name"
        );
    }

    #[test]
    fn zero_resync_disables_it_and_empty_metrics_address_disables_the_server() {
        let c =
            parse("resyncPeriod: 0s\nmetricsAddress: \"\"\nhealthAddress: \"\"\n").expect("valid");
        assert_eq!(c.resync_period, None);
        assert_eq!(c.metrics_address, None);
        assert_eq!(c.health_address, None);
    }
}
