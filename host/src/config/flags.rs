//! `wasmop run`'s flags and their `WASMOP_*` environment variables. A flag (or its variable)
//! overrides the same setting in the config file.

use std::path::PathBuf;

use super::raw::{RawConfig, RawConfigMapSource, RawSource};
use super::{Config, ConfigError};

/// Flags of `wasmop run`.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct RunArgs {
    /// The host configuration file (YAML).
    #[arg(long, env = "WASMOP_CONFIG", value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// A directory of `*.wasm` plugins; replaces the file's `sources` (repeatable).
    #[arg(
        long = "plugins",
        env = "WASMOP_PLUGINS",
        value_name = "DIR",
        value_delimiter = ','
    )]
    pub(crate) plugins: Vec<PathBuf>,
    /// A ConfigMap (`NAMESPACE/NAME`, or `NAME` in the host's namespace) whose `binaryData`
    /// keys `*.wasm` are plugins, read through the API; with `--plugins`, after those
    /// directories. Either flag replaces the file's `sources`.
    #[arg(long, env = "WASMOP_PLUGINS_CONFIGMAP", value_name = "NS/NAME")]
    pub(crate) plugins_configmap: Option<String>,
    /// Reconciles that may run at once over all plugins.
    #[arg(long, env = "WASMOP_CONCURRENCY")]
    pub(crate) concurrency: Option<u32>,
    /// How often every object is reconciled again (`10m`; `0s` disables it).
    #[arg(long, env = "WASMOP_RESYNC_PERIOD", value_name = "DURATION")]
    pub(crate) resync_period: Option<String>,
    /// `text` or `json`.
    #[arg(long, env = "WASMOP_LOG_FORMAT")]
    pub(crate) log_format: Option<String>,
    /// Where `/metrics` is served (`host:port`; `""` disables it).
    #[arg(long, env = "WASMOP_METRICS_ADDRESS", value_name = "ADDR")]
    pub(crate) metrics_address: Option<String>,
    /// Where `/healthz`, `/readyz` and `/status` are served (`host:port`; `""` disables it).
    #[arg(long, env = "WASMOP_HEALTH_ADDRESS", value_name = "ADDR")]
    pub(crate) health_address: Option<String>,
    /// How long running reconciles get to finish after SIGTERM/SIGINT (`30s`).
    #[arg(long, env = "WASMOP_SHUTDOWN_TIMEOUT", value_name = "DURATION")]
    pub(crate) shutdown_timeout: Option<String>,
    /// Take part in leader election (only the Lease holder reconciles).
    #[arg(long, env = "WASMOP_LEADER_ELECT", value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub(crate) leader_elect: Option<bool>,
    /// Directory for precompiled plugin artefacts.
    #[arg(long = "cache-dir", env = "WASMOP_CACHE_DIR", value_name = "DIR")]
    pub(crate) cache_directory: Option<PathBuf>,
    /// Directory of artefacts made by `wasmop compile`, loaded instead of compiling.
    #[arg(
        long = "precompiled-dir",
        env = "WASMOP_PRECOMPILED_DIR",
        value_name = "DIR"
    )]
    pub(crate) precompiled_directory: Option<PathBuf>,
    /// Write /tmp/perf-<pid>.map as plugins load, so that `perf record`/`perf report` name
    /// their functions (`true`/`false`; the config's `perfMap`).
    #[arg(long, env = "WASMOP_PERF_MAP", value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub(crate) perf_map: Option<bool>,
    /// Guest computing after which a call moves to low-priority threads (`50ms`; `0s`: never).
    #[arg(long, env = "WASMOP_DEMOTE_AFTER", value_name = "DURATION")]
    pub(crate) demote_after: Option<String>,
    /// The host's own namespace (where it records plugins' finalizers).
    #[arg(long, env = "WASMOP_NAMESPACE")]
    pub(crate) namespace: Option<String>,
    /// Kubeconfig file; without it, the in-cluster config or `KUBECONFIG` is used.
    #[arg(long, env = "WASMOP_KUBECONFIG", value_name = "FILE")]
    pub(crate) kubeconfig: Option<PathBuf>,
}

impl RunArgs {
    /// Reads the config file (if any), lays the flags over it and validates the result.
    pub(crate) async fn load(&self) -> Result<Config, ConfigError> {
        let raw = match &self.config {
            Some(path) => Config::read_raw(path).await?,
            None => RawConfig::default(),
        };
        Config::from_raw(self.overlay(raw)?, self.kubeconfig.clone())
    }

    fn overlay(&self, mut raw: RawConfig) -> Result<RawConfig, ConfigError> {
        if !self.plugins.is_empty() || self.plugins_configmap.is_some() {
            raw.sources = self
                .plugins
                .iter()
                .map(|dir| {
                    dir.to_str()
                        .map(|d| RawSource {
                            directory: Some(d.to_owned()),
                            config_map: None,
                        })
                        .ok_or_else(|| ConfigError::Value {
                            field: "--plugins".into(),
                            problem: format!("{} is not UTF-8", dir.display()),
                        })
                })
                .collect::<Result<_, _>>()?;
            if let Some(text) = &self.plugins_configmap {
                let (namespace, name) = match text.split_once('/') {
                    Some((ns, name)) => (Some(ns.to_owned()), name.to_owned()),
                    None => (None, text.clone()),
                };
                raw.sources.push(RawSource {
                    directory: None,
                    config_map: Some(RawConfigMapSource { name, namespace }),
                });
            }
        }
        if let Some(n) = self.concurrency {
            raw.concurrency = Some(n);
        }
        if let Some(d) = &self.resync_period {
            raw.resync_period = Some(d.clone());
        }
        if let Some(f) = &self.log_format {
            raw.log_format = Some(f.clone());
        }
        if let Some(a) = &self.metrics_address {
            raw.metrics_address = Some(a.clone());
        }
        if let Some(a) = &self.health_address {
            raw.health_address = Some(a.clone());
        }
        if let Some(t) = &self.shutdown_timeout {
            raw.shutdown_timeout = Some(t.clone());
        }
        if let Some(on) = self.leader_elect {
            raw.leader_election
                .get_or_insert_with(Default::default)
                .enabled = Some(on);
        }
        if let Some(d) = &self.demote_after {
            raw.demote_after = Some(d.clone());
        }
        if let Some(on) = self.perf_map {
            raw.perf_map = Some(on);
        }
        if let Some(ns) = &self.namespace {
            raw.namespace = Some(ns.clone());
        }
        if let Some(dir) = &self.cache_directory {
            raw.cache_directory = Some(dir.to_string_lossy().into_owned());
        }
        if let Some(dir) = &self.precompiled_directory {
            raw.precompiled_directory = Some(dir.to_string_lossy().into_owned());
        }
        Ok(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LogFormat;
    use wasmop_controller::source::Source;

    #[tokio::test]
    async fn flags_override_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("wasmop.yaml");
        tokio::fs::write(
            &file,
            "concurrency: 8\nlogFormat: text\nsources: [{directory: /a}]\n",
        )
        .await
        .expect("write");
        let args = RunArgs {
            config: Some(file),
            plugins: vec!["/b".into()],
            log_format: Some("json".into()),
            ..RunArgs::default()
        };
        let c = args.load().await.expect("valid");
        assert_eq!(c.concurrency, 8);
        assert_eq!(c.log_format, LogFormat::Json);
        assert_eq!(c.sources, vec![Source::Directory("/b".into())]);
    }

    #[tokio::test]
    async fn configmap_flag_adds_a_source_after_the_directories() {
        let args = RunArgs {
            plugins: vec!["/b".into()],
            plugins_configmap: Some("ops/plugins".into()),
            namespace: Some("host".into()),
            ..RunArgs::default()
        };
        let c = args.load().await.expect("valid");
        assert_eq!(
            c.sources,
            [
                Source::Directory("/b".into()),
                Source::ConfigMap {
                    namespace: "ops".into(),
                    name: "plugins".into()
                }
            ]
        );
        let args = RunArgs {
            plugins_configmap: Some("plugins".into()),
            namespace: Some("host".into()),
            ..RunArgs::default()
        };
        let c = args.load().await.expect("valid");
        assert_eq!(
            c.sources,
            [Source::ConfigMap {
                namespace: "host".into(),
                name: "plugins".into()
            }]
        );
    }

    #[tokio::test]
    async fn leader_elect_flag_enables_election_configured_in_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("wasmop.yaml");
        tokio::fs::write(&file, "leaderElection: {leaseName: mine, enabled: false}\n")
            .await
            .expect("write");
        let args = RunArgs {
            config: Some(file),
            leader_elect: Some(true),
            ..RunArgs::default()
        };
        let c = args.load().await.expect("valid");
        assert_eq!(c.leader_election.expect("enabled").lease_name, "mine");
    }

    #[tokio::test]
    async fn missing_file_is_named() {
        let args = RunArgs {
            config: Some("/nonexistent/wasmop.yaml".into()),
            ..RunArgs::default()
        };
        let err = args.load().await.expect_err("missing");
        assert_eq!(
            err.to_string(),
            "cannot read the config file /nonexistent/wasmop.yaml"
        );
    }
}
