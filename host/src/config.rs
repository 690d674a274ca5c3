//! The host configuration: one YAML file ([`raw::RawConfig`], unknown keys refused) overlaid
//! with flags and `WASMOP_*` environment variables ([`flags::RunArgs`]), then validated into
//! [`Config`], which is what the rest of the host uses. A bad value is refused at start with
//! the path of the field that holds it (`plugins.database-config.memory`).

pub mod fairness;
pub mod flags;
pub mod leader;
pub mod raw;
pub mod units;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use self::raw::{RawConfig, RawGrant, RawKind, RawPluginSettings, RawQuantity};
use self::units::{UnitError, parse_duration, parse_quantity};
use wasmop_controller::PluginSettings;
use wasmop_controller::leader::LeaderElection;
use wasmop_controller::source::Source;
use wasmop_core::plugin::{Permission, PluginName, PluginNameError, Verb};
use wasmop_core::policy::SensitiveKinds;
use wasmop_runtime::Limits;

/// 64 calls at once over all plugins: the runtime's pooling allocator is sized for it, and it is
/// more than a 2-core node can run without reconciles queueing on the CPU anyway.
pub const DEFAULT_CONCURRENCY: u32 = 64;
/// 4 reconciles at once per plugin: enough to hide API latency, and one busy plugin cannot take
/// more than a sixteenth of the global slots.
pub const DEFAULT_PLUGIN_CONCURRENCY: u16 = 4;
/// Every object is reconciled again every 10 minutes, as controller-runtime's default sync
/// period suggests: drift that no watch event reports is repaired within that time.
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(600);
/// `/metrics` on port 9090 of every interface, where Prometheus' conventions expect it.
pub const DEFAULT_METRICS_ADDRESS: &str = "0.0.0.0:9090";
/// `/healthz`, `/readyz` and `/status` on port 8081, controller-runtime's probe port.
pub const DEFAULT_HEALTH_ADDRESS: &str = "0.0.0.0:8081";
/// Running reconciles get 30 s after SIGTERM: Kubernetes' default termination grace period.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);
/// The host's namespace when neither the config nor `POD_NAMESPACE` names one: where
/// `deploy/` installs it.
pub const DEFAULT_NAMESPACE: &str = "wasmop-system";
/// A missing plugin's finalizers are released after 10 minutes: long enough to replace or fix a
/// plugin, short enough that a namespace deletion is not blocked for long.
pub const DEFAULT_ORPHAN_GRACE: Duration = Duration::from_secs(600);
/// 1 GiB of linear memory is the most a plugin can be given: the pooling allocator reserves
/// address space for every slot at this size.
pub const MAX_PLUGIN_MEMORY: u64 = 1 << 30;
/// 5 minutes is the longest deadline: a reconcile holding a worker longer is a bug, and a
/// graceful shutdown must not wait for it.
pub const MAX_DEADLINE: Duration = Duration::from_secs(300);
/// A call is demoted to the low-priority lane after 50 ms of guest computing: a healthy
/// reconcile computes for well under a millisecond between host calls, so only a plugin that
/// spins (or does real heavy work, which then runs on spare CPU) gets there, and a spinning
/// one holds the host's workers for at most this long per call.
pub const DEFAULT_DEMOTE_AFTER: Duration = Duration::from_millis(50);
/// A version is failing after 5 traps or timeouts in a row: one object's backoff (0.5 s
/// doubling) reaches it in about 8 s, and a version that fails 5 times without one success is
/// broken rather than unlucky.
pub const DEFAULT_FAILURE_THRESHOLD: u32 = 5;

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogFormat {
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
    pub sources: Vec<Source>,
    /// Calls that may run at once over all plugins.
    pub concurrency: u32,
    /// Periodic resync; `None` disables it.
    pub resync_period: Option<Duration>,
    /// Log line format.
    pub log_format: LogFormat,
    /// Where `/metrics` is served; `None` disables it.
    pub metrics_address: Option<SocketAddr>,
    /// Where `/healthz`, `/readyz` and `/status` are served; `None` disables it.
    pub health_address: Option<SocketAddr>,
    /// How long running reconciles get to finish after a shutdown signal.
    pub shutdown_timeout: Duration,
    /// Leader election; `None` when disabled (this host always reconciles).
    pub leader_election: Option<LeaderElection>,
    /// Where precompiled artefacts are kept.
    pub cache_directory: Option<PathBuf>,
    /// Artefacts made by `wasmop compile`, loaded instead of compiling.
    pub precompiled_directory: Option<PathBuf>,
    /// Tiered loading: a version without an artefact runs on Winch code at once and on
    /// Cranelift's once compiled in the background. On by default: a cold reload of a 450 KB
    /// plugin goes from hundreds of ms of Cranelift to tens of ms of Winch (README, "Reload
    /// latency"), for calls about a third slower until Cranelift's code takes over.
    pub tiered_compilation: bool,
    /// Guest computing after which a call moves to the low-priority lane (threads at nice
    /// 19); `None` never moves one.
    pub demote_after: Option<Duration>,
    /// Wall-clock time a plugin's `describe` gets at load (default 1 s, at most
    /// [`MAX_DEADLINE`]); see [`wasmop_runtime::RuntimeConfig::describe_deadline`].
    pub describe_deadline: Duration,
    /// The host's own namespace.
    pub namespace: String,
    /// How long a recorded plugin may be missing before its finalizers are released.
    pub orphaned_finalizer_grace: Duration,
    /// Kubeconfig to use instead of the inferred one (in-cluster or `KUBECONFIG`).
    pub kubeconfig: Option<PathBuf>,
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
    pub fn parse_raw(text: &str, path: &Path) -> Result<RawConfig, ConfigError> {
        if text.trim().is_empty() {
            return Ok(RawConfig::default());
        }
        serde_yaml::from_str(text).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source,
        })
    }

    /// Validates a raw configuration.
    pub fn from_raw(raw: RawConfig, kubeconfig: Option<PathBuf>) -> Result<Self, ConfigError> {
        let concurrency = raw.concurrency.unwrap_or(DEFAULT_CONCURRENCY);
        if concurrency == 0 {
            return Err(value_error("concurrency", "must be at least 1"));
        }
        let resync_period = match raw.resync_period.as_deref() {
            None => Some(DEFAULT_RESYNC),
            Some(text) => {
                let d = parse_duration(text).map_err(|source| ConfigError::Unit {
                    field: "resyncPeriod".into(),
                    source,
                })?;
                (!d.is_zero()).then_some(d)
            }
        };
        let demote_after = match raw.demote_after.as_deref() {
            None => Some(DEFAULT_DEMOTE_AFTER),
            Some(text) => {
                let d = parse_duration(text).map_err(|source| ConfigError::Unit {
                    field: "demoteAfter".into(),
                    source,
                })?;
                (!d.is_zero()).then_some(d)
            }
        };
        let describe_deadline = match raw.describe_deadline.as_deref() {
            None => wasmop_runtime::DEFAULT_DESCRIBE_DEADLINE,
            Some(text) => {
                let field = "describeDeadline";
                let d = parse_duration(text).map_err(|source| ConfigError::Unit {
                    field: field.into(),
                    source,
                })?;
                if d.is_zero() || d > MAX_DEADLINE {
                    return Err(value_error(field, format!("`{text}` is outside 1ms..=5m")));
                }
                d
            }
        };
        let log_format = match raw.log_format.as_deref() {
            None | Some("text") => LogFormat::Text,
            Some("json") => LogFormat::Json,
            Some(other) => {
                return Err(value_error(
                    "logFormat",
                    format!("`{other}` is neither `text` nor `json`"),
                ));
            }
        };
        let metrics_address = address(
            "metricsAddress",
            raw.metrics_address.as_deref(),
            DEFAULT_METRICS_ADDRESS,
        )?;
        let health_address = address(
            "healthAddress",
            raw.health_address.as_deref(),
            DEFAULT_HEALTH_ADDRESS,
        )?;
        let shutdown_timeout = duration_or(
            "shutdownTimeout",
            raw.shutdown_timeout.as_deref(),
            DEFAULT_SHUTDOWN_TIMEOUT,
        )?;
        let namespace = raw
            .namespace
            .clone()
            .or_else(|| {
                std::env::var("POD_NAMESPACE")
                    .ok()
                    .filter(|n| !n.is_empty())
            })
            .unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned());
        if PluginName::new(namespace.clone()).is_err() {
            return Err(value_error(
                "namespace",
                format!("`{namespace}` is not a namespace name"),
            ));
        }
        let sources = raw
            .sources
            .iter()
            .enumerate()
            .map(|(i, s)| source(&format!("sources[{i}]"), s, &namespace))
            .collect::<Result<Vec<_>, _>>()?;
        let orphaned_finalizer_grace = match raw.orphaned_finalizer_grace.as_deref() {
            None => DEFAULT_ORPHAN_GRACE,
            Some(text) => parse_duration(text).map_err(|source| ConfigError::Unit {
                field: "orphanedFinalizerGrace".into(),
                source,
            })?,
        };
        let leader_election = match &raw.leader_election {
            Some(le) if le.enabled.unwrap_or(false) => Some(leader::validate(le, &namespace)?),
            _ => None,
        };
        let sensitive_kinds = raw
            .sensitive_kinds
            .iter()
            .enumerate()
            .map(|(i, k)| sensitive_kind(&format!("sensitiveKinds[{i}]"), k))
            .collect::<Result<Vec<_>, _>>()?;
        let raw_defaults = raw.defaults.unwrap_or_default();
        let defaults = settings("defaults", &raw_defaults, &RawPluginSettings::default())?;
        let mut plugins = BTreeMap::new();
        for (name, entry) in &raw.plugins {
            let parsed =
                PluginName::new(name.clone()).map_err(|source| ConfigError::PluginName {
                    field: format!("plugins.{name}"),
                    source,
                })?;
            let merged = settings(&format!("plugins.{name}"), entry, &raw_defaults)?;
            plugins.insert(parsed, merged);
        }
        Ok(Self {
            sources,
            concurrency,
            resync_period,
            log_format,
            metrics_address,
            health_address,
            shutdown_timeout,
            leader_election,
            cache_directory: raw.cache_directory.map(PathBuf::from),
            precompiled_directory: raw.precompiled_directory.map(PathBuf::from),
            tiered_compilation: raw.tiered_compilation.unwrap_or(true),
            demote_after,
            describe_deadline,
            namespace,
            orphaned_finalizer_grace,
            kubeconfig,
            sensitive_kinds,
            defaults,
            plugins,
        })
    }

    /// The kinds whose implied verbs need explicit grants: the built-in ones and the
    /// operator's (`sensitiveKinds`).
    pub fn sensitive_kinds(&self) -> SensitiveKinds {
        self.sensitive_kinds
            .iter()
            .fold(SensitiveKinds::builtin(), |all, (g, k)| {
                all.with(g.clone(), k.clone())
            })
    }

    /// The settings of the plugin named `name`: its own entry, or the defaults.
    pub fn plugin(&self, name: &PluginName) -> &PluginSettings {
        self.plugins.get(name).unwrap_or(&self.defaults)
    }

    /// The plugins that have an entry of their own.
    pub fn configured_plugins(&self) -> impl Iterator<Item = &PluginName> {
        self.plugins.keys()
    }

    /// The plugin runtime's configuration for this host. `wasmop run` and `wasmop compile
    /// --config` both build it here, so that artefacts compiled ahead of time are made with
    /// exactly the engine settings the host uses.
    ///
    /// The engine meters fuel when any plugin's settings (its own, or the defaults) have a
    /// budget. Every plugin a source may bring later, while the host runs, gets one of these
    /// settings, so the decision made here at start holds for all of them.
    pub fn runtime_config(&self) -> wasmop_runtime::RuntimeConfig {
        let limits = wasmop_runtime::Limits {
            memory: self.max_memory(),
            ..wasmop_runtime::Limits::default()
        };
        let mut config = wasmop_runtime::RuntimeConfig::default()
            .concurrency(self.concurrency)
            .limits(limits)
            .consume_fuel(self.any_fuel_budget())
            .tiered(self.tiered_compilation)
            .demote_after(self.demote_after)
            .describe_deadline(self.describe_deadline);
        if let Some(dir) = &self.cache_directory {
            config = config.cache_dir(dir);
        }
        if let Some(dir) = &self.precompiled_directory {
            config = config.precompiled_dir(dir);
        }
        config
    }

    /// Whether any plugin (or the defaults) has a fuel budget.
    pub fn any_fuel_budget(&self) -> bool {
        self.plugins
            .values()
            .chain(std::iter::once(&self.defaults))
            .any(|s| s.limits.fuel.is_some())
    }

    /// The largest memory limit of any plugin: the runtime sizes its instance slots by it.
    pub fn max_memory(&self) -> u64 {
        self.plugins
            .values()
            .chain(std::iter::once(&self.defaults))
            .map(|s| s.limits.memory)
            .max()
            .unwrap_or(self.defaults.limits.memory)
    }
}

/// A `host:port` address, the default when absent, `None` when `""`.
fn address(
    field: &str,
    raw: Option<&str>,
    default: &str,
) -> Result<Option<SocketAddr>, ConfigError> {
    match raw {
        Some("") => Ok(None),
        other => other
            .unwrap_or(default)
            .parse::<SocketAddr>()
            .map(Some)
            .map_err(|e| value_error(field, format!("not `host:port`: {e}"))),
    }
}

/// A duration, or the default when absent.
fn duration_or(field: &str, raw: Option<&str>, default: Duration) -> Result<Duration, ConfigError> {
    match raw {
        None => Ok(default),
        Some(text) => parse_duration(text).map_err(|source| ConfigError::Unit {
            field: field.into(),
            source,
        }),
    }
}

/// Validates one source: exactly one of `directory` and `configMap`.
fn source(at: &str, raw: &raw::RawSource, namespace: &str) -> Result<Source, ConfigError> {
    match (&raw.directory, &raw.config_map) {
        (Some(dir), None) if dir.is_empty() => {
            Err(value_error(format!("{at}.directory"), "is empty"))
        }
        (Some(dir), None) => Ok(Source::Directory(PathBuf::from(dir))),
        (None, Some(cm)) => {
            let namespace = cm.namespace.clone().unwrap_or_else(|| namespace.to_owned());
            for (field, value) in [("name", &cm.name), ("namespace", &namespace)] {
                if PluginName::new(value.clone()).is_err() {
                    return Err(value_error(
                        format!("{at}.configMap.{field}"),
                        format!("`{value}` is not a Kubernetes name"),
                    ));
                }
            }
            Ok(Source::ConfigMap {
                namespace,
                name: cm.name.clone(),
            })
        }
        _ => Err(value_error(
            at,
            "must have exactly one of `directory` and `configMap`",
        )),
    }
}

/// Validates one plugin's settings, field by field falling back to `defaults`.
fn settings(
    at: &str,
    raw: &RawPluginSettings,
    defaults: &RawPluginSettings,
) -> Result<PluginSettings, ConfigError> {
    let mut limits = Limits::default();
    if let Some(q) = raw.memory.as_ref().or(defaults.memory.as_ref()) {
        let field = format!("{at}.memory");
        limits.memory = match q {
            RawQuantity::Bytes(n) => *n,
            RawQuantity::Text(t) => parse_quantity(t).map_err(|source| ConfigError::Unit {
                field: field.clone(),
                source,
            })?,
        };
        if limits.memory < (1 << 20) || limits.memory > MAX_PLUGIN_MEMORY {
            return Err(value_error(
                field,
                format!("{} bytes is outside 1Mi..=1Gi", limits.memory),
            ));
        }
    }
    if let Some(t) = raw.deadline.as_ref().or(defaults.deadline.as_ref()) {
        let field = format!("{at}.deadline");
        let d = parse_duration(t).map_err(|source| ConfigError::Unit {
            field: field.clone(),
            source,
        })?;
        if d.is_zero() || d > MAX_DEADLINE {
            return Err(value_error(field, format!("`{t}` is outside 1ms..=5m")));
        }
        limits.deadline = d;
    }
    limits.fuel = raw.fuel.or(defaults.fuel);
    if limits.fuel == Some(0) {
        return Err(value_error(format!("{at}.fuel"), "must be at least 1"));
    }
    let concurrency = raw
        .concurrency
        .or(defaults.concurrency)
        .unwrap_or(DEFAULT_PLUGIN_CONCURRENCY);
    if concurrency == 0 {
        return Err(value_error(
            format!("{at}.concurrency"),
            "must be at least 1",
        ));
    }
    let namespaces = match raw.namespaces.as_ref().or(defaults.namespaces.as_ref()) {
        None => None,
        Some(list) => {
            if list.is_empty() {
                return Err(value_error(
                    format!("{at}.namespaces"),
                    "is empty; leave it out to allow every namespace",
                ));
            }
            for (i, ns) in list.iter().enumerate() {
                if PluginName::new(ns.clone()).is_err() {
                    return Err(value_error(
                        format!("{at}.namespaces[{i}]"),
                        format!("`{ns}` is not a namespace name"),
                    ));
                }
            }
            Some(list.iter().cloned().collect())
        }
    };
    let grants = raw
        .grants
        .as_ref()
        .or(defaults.grants.as_ref())
        .map(|list| {
            list.iter()
                .enumerate()
                .map(|(i, g)| grant(&format!("{at}.grants[{i}]"), g))
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?
        .unwrap_or_default();
    let config = raw
        .config
        .clone()
        .or_else(|| defaults.config.clone())
        .unwrap_or_else(|| Value::Object(Default::default()));
    if !config.is_object() {
        return Err(value_error(format!("{at}.config"), "must be a mapping"));
    }
    let (min_requeue_after, object_rate) = fairness::fairness(at, raw, defaults)?;
    Ok(PluginSettings {
        namespaces,
        grants,
        limits,
        concurrency,
        config,
        failure_threshold: raw
            .failure_threshold
            .or(defaults.failure_threshold)
            .unwrap_or(DEFAULT_FAILURE_THRESHOLD),
        // On by default: a version that only traps serves nobody, and the one it replaced
        // was serving.
        rollback: raw.rollback.or(defaults.rollback).unwrap_or(true),
        min_requeue_after,
        object_rate,
    })
}

fn sensitive_kind(at: &str, raw: &RawKind) -> Result<(String, String), ConfigError> {
    if let Err(e) = wasmop_core::cluster::names::check_group(&format!("{at}.group"), &raw.group)
        .and_then(|()| wasmop_core::cluster::names::check_kind(&format!("{at}.kind"), &raw.kind))
    {
        return Err(value_error(
            e.field.clone(),
            format!("{} {}", e.value, e.problem),
        ));
    }
    Ok((raw.group.clone(), raw.kind.clone()))
}

fn grant(at: &str, raw: &RawGrant) -> Result<Permission, ConfigError> {
    if raw.kind.is_empty() || raw.kind.contains('*') || raw.group.contains('*') {
        return Err(value_error(
            format!("{at}.kind"),
            "must name one kind (wildcards are not accepted)",
        ));
    }
    if raw.verbs.is_empty() {
        return Err(value_error(format!("{at}.verbs"), "is empty"));
    }
    let verbs = raw
        .verbs
        .iter()
        .enumerate()
        .map(|(i, v)| {
            verb(v).ok_or_else(|| {
                value_error(
                    format!("{at}.verbs[{i}]"),
                    format!(
                        "`{v}` is not one of get, list, create, patch, apply, delete, patch-status"
                    ),
                )
            })
        })
        .collect::<Result<BTreeSet<_>, _>>()?;
    Ok(Permission {
        group: raw.group.clone(),
        kind: raw.kind.clone(),
        verbs,
        namespaces: raw.namespaces.clone(),
    })
}

fn verb(text: &str) -> Option<Verb> {
    Some(match text {
        "get" => Verb::Get,
        "list" => Verb::List,
        "create" => Verb::Create,
        "patch" => Verb::Patch,
        "apply" => Verb::Apply,
        "delete" => Verb::Delete,
        "patch-status" => Verb::PatchStatus,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
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
