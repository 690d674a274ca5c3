//! Running `wasmop run` (the real binary) against the test control plane, as the restricted
//! ServiceAccount that `deploy/rbac/rbac.yaml` defines, and reading what it reports: its JSON
//! log lines and its `/metrics`.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wasmop_testenv::{Identity, TestEnv};

/// The host's RBAC, exactly as deployed.
pub const RBAC: &str = include_str!("../../../deploy/rbac/rbac.yaml");
/// Where `deploy/rbac/rbac.yaml` puts the host.
pub const HOST_NAMESPACE: &str = "wasmop-system";
/// The host's ServiceAccount.
pub const HOST_ACCOUNT: &str = "wasmop";
/// Waits until the ConfigMap `<name>-mirror`, which the `well-behaved` test plugin writes for
/// the Target `name`, holds `value`.
pub async fn wait_mirrored(env: &TestEnv, name: &str, value: &str) {
    let api: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    let want = value.to_owned();
    env.wait_for(
        &api,
        &format!("{name}-mirror"),
        "to mirror the Target",
        PATIENCE,
        |cm| {
            cm.and_then(|c| c.data.as_ref())
                .and_then(|d| d.get("value"))
                == Some(&want)
        },
    )
    .await
    .unwrap();
}

/// The name of the object an Event is about.
pub fn regarding(event: &Event) -> Option<&str> {
    event.regarding.as_ref().and_then(|r| r.name.as_deref())
}

/// Polls the test namespace's Events until `done` holds for the list, and returns that list.
/// The host writes Events in the background, after the log line or the object change a test
/// saw, so reading them once can come too early. Fails after [`PATIENCE`] naming `what` and
/// listing the Events there were.
pub async fn wait_events(env: &TestEnv, what: &str, done: impl Fn(&[Event]) -> bool) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(env.client(), env.namespace());
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let events = api.list(&ListParams::default()).await.unwrap().items;
        if done(&events) {
            return events;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {what} after {PATIENCE:?}; the Events (regarding, type, reason, note): {:?}",
            events
                .iter()
                .map(|e| (regarding(e), &e.type_, &e.reason, &e.note))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// How many `-mirror` ConfigMaps (the `well-behaved` plugin's output) the test namespace holds.
pub async fn count_mirrors(env: &TestEnv) -> usize {
    let api: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|c| {
            c.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.ends_with("-mirror"))
        })
        .count()
}

/// Waits until a run over `total` Targets is under way: some of their `-mirror` ConfigMaps
/// exist, and not all (else a test that interrupts the run would prove nothing).
pub async fn wait_partway(env: &TestEnv, total: usize) {
    loop {
        let n = count_mirrors(env).await;
        if n > 0 {
            assert!(
                n < total,
                "all {total} objects converged before the interruption; the test proves nothing"
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The user a [`Host::start_broad`] host acts as in `env`: one per test namespace, so the
/// audit log tells its requests apart from every other test's.
pub fn broad_user(env: &TestEnv) -> String {
    format!("wasmop-broad-{}", env.namespace())
}

/// The user a [`Host::start`] host acts as (the deploy RBAC's ServiceAccount).
pub const HOST_USER: &str = "system:serviceaccount:wasmop-system:wasmop";

/// Long enough for a reconcile chain on a loaded 2-core machine; a test only waits this long
/// when it is failing.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// The Targets (`wasmop.test/v1`, the test plugins' primary kind) of the test's namespace.
pub fn targets(env: &TestEnv) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("wasmop.test", "v1", "Target"),
        "targets",
    );
    Api::namespaced_with(env.client(), env.namespace(), &ar)
}

/// Installs the Target CRD and the RBAC the test plugins need beyond the deploy RBAC.
pub async fn test_kinds(env: &TestEnv) {
    env.apply_yaml(&fixture("target-crd.yaml"))
        .await
        .expect("Target CRD");
    env.apply_yaml(&fixture("test-plugins-rbac.yaml"))
        .await
        .expect("test plugins' RBAC");
}

/// The plugin ConfigMap's name: the one `deploy/rbac/rbac.yaml` lets the host read.
pub const PLUGINS_CONFIGMAP: &str = "wasmop-plugins";

/// The host config's source item for [`PLUGINS_CONFIGMAP`], for [`Host::start_with_sources`].
pub fn plugins_configmap_source() -> String {
    format!("{{configMap: {{name: {PLUGINS_CONFIGMAP}}}}}")
}

/// Creates, or replaces, [`PLUGINS_CONFIGMAP`] in the test's namespace, holding `entries`
/// (key, component bytes) under `binaryData`.
pub async fn put_plugins_configmap(env: &TestEnv, entries: Vec<(String, Vec<u8>)>) {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(PLUGINS_CONFIGMAP.into());
    cm.binary_data = Some(
        entries
            .into_iter()
            .map(|(key, bytes)| (key, k8s_openapi::ByteString(bytes)))
            .collect(),
    );
    let api: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    match api.get_opt(PLUGINS_CONFIGMAP).await.unwrap() {
        None => {
            api.create(&PostParams::default(), &cm).await.unwrap();
        }
        Some(old) => {
            cm.metadata.resource_version = old.metadata.resource_version;
            api.replace(PLUGINS_CONFIGMAP, &PostParams::default(), &cm)
                .await
                .unwrap();
        }
    }
}

/// A host config confining every plugin to the test's namespace (so concurrent tests' hosts
/// do not meet), with no resync, and `extra` (YAML at the plugin entry's indentation) for
/// each.
pub fn confined(env: &TestEnv, plugins: &[&str], extra: &str) -> String {
    let mut text = String::from("resyncPeriod: 0s\nplugins:\n");
    for p in plugins {
        text.push_str(&format!(
            "  {p}:\n    namespaces: [{}]\n{extra}",
            env.namespace()
        ));
    }
    text
}

/// Installs the deploy/ RBAC (idempotent), and the finalizer-record Role of the host's own
/// namespace again in the test namespace, where each test's host keeps its record (as
/// kustomize's `namespace:` would).
pub async fn install_rbac(env: &TestEnv) {
    env.apply_yaml(RBAC)
        .await
        .expect("deploy/rbac/rbac.yaml applies");
    let mut local = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(RBAC) {
        let mut value = serde_yaml::Value::deserialize(doc).expect("rbac.yaml parses");
        let kind = value["kind"].as_str().unwrap_or_default().to_owned();
        if kind == "Role" || kind == "RoleBinding" {
            value["metadata"]["namespace"] = env.namespace().into();
            local.push(serde_yaml::to_string(&value).expect("yaml"));
        }
    }
    env.apply_yaml(&local.join("---\n"))
        .await
        .expect("the host's namespaced RBAC applies in the test namespace");
}

/// The host's log format (`logFormat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One JSON object per line (what most tests read).
    Json,
    /// Human-readable lines, the host's default.
    Text,
}

/// A running `wasmop run`.
pub struct Host {
    child: tokio::process::Child,
    log: PathBuf,
    plugin_dir: PathBuf,
    metrics: String,
    health: String,
    _dir: tempfile::TempDir,
}

impl Host {
    /// Starts `wasmop run` with the guests named in `plugins`, and `config` (YAML, without
    /// `sources`, `namespace`, `logFormat`, `metricsAddress` or `healthAddress`, which are set
    /// here).
    pub async fn start(env: &TestEnv, plugins: &[&str], config: &str) -> Host {
        Self::start_with_sources(env, plugins, &[], config).await
    }

    /// [`Host::start`] with more sources after the plugin directory: YAML flow items such as
    /// `{configMap: {name: wasmop-plugins}}`.
    pub async fn start_with_sources(
        env: &TestEnv,
        plugins: &[&str],
        sources: &[&str],
        config: &str,
    ) -> Host {
        Self::start_logging(env, plugins, sources, config, LogFormat::Json).await
    }

    /// [`Host::start_with_sources`] logging in `format`. With [`LogFormat::Text`],
    /// [`Host::lines`] finds nothing: read [`Host::log_text`].
    pub async fn start_logging(
        env: &TestEnv,
        plugins: &[&str],
        sources: &[&str],
        config: &str,
        format: LogFormat,
    ) -> Host {
        install_rbac(env).await;
        let kubeconfig = env
            .kubeconfig_for(&Identity::service_account(HOST_NAMESPACE, HOST_ACCOUNT))
            .await
            .expect("host kubeconfig");
        Self::start_with_kubeconfig(env, plugins, sources, config, format, kubeconfig).await
    }

    /// [`Host::start`] as [`broad_user`]: a member of `system:masters`, whom RBAC lets do
    /// anything, so that wasmop's own policy is the only barrier between a plugin and the
    /// cluster. The API server audits its requests under that user name.
    pub async fn start_broad(env: &TestEnv, plugins: &[&str], config: &str) -> Host {
        let kubeconfig = env
            .kubeconfig_for(&Identity::user(broad_user(env), &["system:masters"]))
            .await
            .expect("broad host kubeconfig");
        Self::start_with_kubeconfig(env, plugins, &[], config, LogFormat::Json, kubeconfig).await
    }

    async fn start_with_kubeconfig(
        env: &TestEnv,
        plugins: &[&str],
        sources: &[&str],
        config: &str,
        format: LogFormat,
        kubeconfig: PathBuf,
    ) -> Host {
        let dir = tempfile::tempdir().expect("tempdir");
        let plugin_dir = dir.path().join("plugins");
        tokio::fs::create_dir(&plugin_dir)
            .await
            .expect("plugin dir");
        for name in plugins {
            let from = wasmop_test_guests::component(name);
            tokio::fs::copy(from, plugin_dir.join(format!("{name}.wasm")))
                .await
                .expect("copy plugin");
        }
        let file = dir.path().join("wasmop.yaml");
        let text = format!(
            "sources: [{{directory: {}}}{}]\nnamespace: {}\nlogFormat: {}\nmetricsAddress: 127.0.0.1:0\nhealthAddress: 127.0.0.1:0\n{config}",
            plugin_dir.display(),
            sources.iter().map(|s| format!(", {s}")).collect::<String>(),
            env.namespace(),
            match format {
                LogFormat::Json => "json",
                LogFormat::Text => "text",
            }
        );
        tokio::fs::write(&file, text).await.expect("config");
        let log = dir.path().join("wasmop.log");
        let out = std::fs::File::create(&log).expect("log file");
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_wasmop"))
            .arg("run")
            .arg("--config")
            .arg(&file)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .env("WASMOP_LOG", "info,wasmop=debug")
            // The test's config says where the artefacts go, or that none are kept: a
            // developer's `WASMOP_CACHE_DIR` (which also moves `./dev`'s tool cache) must not
            // add a cache the test does not expect.
            .env_remove("WASMOP_CACHE_DIR")
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log file"))
            .stderr(out)
            .kill_on_drop(true)
            .spawn()
            .expect("wasmop run starts");
        let mut host = Host {
            child,
            log,
            plugin_dir,
            metrics: String::new(),
            health: String::new(),
            _dir: dir,
        };
        if format == LogFormat::Text {
            host.metrics = host.wait_text_address("serving /metrics").await;
            host.health = host
                .wait_text_address("serving /healthz, /readyz and /status")
                .await;
            return host;
        }
        let line = host
            .wait_log("the metrics server to listen", |l| {
                message(l) == "serving /metrics"
            })
            .await;
        host.metrics = line["fields"]["address"].as_str().unwrap().to_owned();
        let line = host
            .wait_log("the probe server to listen", |l| {
                message(l) == "serving /healthz, /readyz and /status"
            })
            .await;
        host.health = line["fields"]["address"].as_str().unwrap().to_owned();
        host
    }

    /// The `address=` field of the text log line with `message`.
    async fn wait_text_address(&mut self, message: &str) -> String {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let found = self.log_text().lines().find_map(|l| {
                l.contains(message)
                    .then(|| {
                        l.split_whitespace()
                            .find_map(|w| w.strip_prefix("address="))
                    })
                    .flatten()
                    .map(str::to_owned)
            });
            if let Some(address) = found {
                return address;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for `{message}`; log:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The probe server's address (`127.0.0.1:port`).
    pub fn health_address(&self) -> &str {
        &self.health
    }

    /// `GET path` on the probe server: the status code and the body.
    pub async fn probe(&self, path: &str) -> (u16, String) {
        let mut stream = tokio::net::TcpStream::connect(&self.health)
            .await
            .expect("probe connect");
        stream
            .write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
            .await
            .expect("probe request");
        let mut text = String::new();
        stream
            .read_to_string(&mut text)
            .await
            .expect("probe response");
        let (head, body) = text.split_once("\r\n\r\n").expect("http");
        let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        (code, body.to_owned())
    }

    /// Sends SIGTERM (a graceful shutdown).
    pub async fn terminate(&self) {
        let pid = self.child.id().expect("the host is running");
        let status = tokio::process::Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status()
            .await
            .expect("kill runs");
        assert!(status.success(), "kill -TERM {pid} failed");
    }

    /// Waits for the host to exit (at most `PATIENCE`) and returns its exit status.
    pub async fn wait_exit(&mut self) -> std::process::ExitStatus {
        match tokio::time::timeout(PATIENCE, self.child.wait()).await {
            Ok(status) => status.expect("wait"),
            Err(_) => panic!("the host did not exit; log:\n{}", self.log_text()),
        }
    }

    /// The plugin directory the host watches (its first source).
    pub fn plugin_dir(&self) -> &Path {
        &self.plugin_dir
    }

    /// Every JSON line the host has logged so far.
    pub fn lines(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The log, for failure messages.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until a line matching `pred` is logged, and returns it.
    pub async fn wait_log(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        self.wait_lines(what, |lines| lines.iter().find(|l| pred(l)).cloned())
            .await
    }

    /// Waits for `plugin version rejected` in the log and returns its `error`.
    pub async fn wait_rejection(&mut self, what: &str) -> String {
        let line = self
            .wait_log(what, |l| message(l) == "plugin version rejected")
            .await;
        line["fields"]["error"]
            .as_str()
            .unwrap_or_else(|| panic!("a rejection without an error: {line}"))
            .to_owned()
    }

    /// Waits until `check` finds something in the log.
    pub async fn wait_lines<T>(&mut self, what: &str, check: impl Fn(&[Value]) -> Option<T>) -> T {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Some(found) = check(&self.lines()) {
                return found;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "wasmop run exited ({status}) while waiting for {what}; log:\n{}",
                    self.log_text()
                );
            }
            if tokio::time::Instant::now() > deadline {
                panic!("timed out waiting for {what}; log:\n{}", self.log_text());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// `GET /metrics`.
    pub async fn metrics(&self) -> String {
        let mut stream = tokio::net::TcpStream::connect(&self.metrics)
            .await
            .expect("metrics connect");
        stream
            .write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
            .await
            .expect("metrics request");
        let mut body = String::new();
        stream
            .read_to_string(&mut body)
            .await
            .expect("metrics response");
        body
    }

    /// The value of the sample line starting with `series` (`name{labels}`), 0 when absent.
    pub async fn metric(&self, series: &str) -> f64 {
        self.metrics()
            .await
            .lines()
            .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
            .unwrap_or(0.0)
    }

    /// Kills the host (SIGKILL: no graceful shutdown) and waits for it.
    pub async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}

/// A log line's message.
pub fn message(line: &Value) -> &str {
    line["fields"]["message"].as_str().unwrap_or("")
}

/// The object a log line's reconcile span is about.
pub fn object_ref(line: &Value) -> &str {
    line["span"]["object.ref"].as_str().unwrap_or("")
}

/// Reads a fixture file under `host/tests/fixtures/e2e`.
pub fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/e2e")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}
