//! The control plane process: builds `wasmop-control-plane` through `tests/control-plane/cp`,
//! starts its launcher (`up --output=json`), and talks to it over the launcher's stdin/stdout.
//!
//! One control plane is shared by every test of a test binary. The launcher stops etcd,
//! kube-apiserver and kube-controller-manager when its stdin closes, which the kernel does when
//! the test process ends in any way (normal exit, panic, SIGKILL), so nothing outlives the tests.

use std::env;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Deserialize;

/// Names a prebuilt `wasmop-control-plane` binary to use instead of building one.
pub const BIN_ENV: &str = "WASMOP_CONTROL_PLANE_BIN";

/// When set (to anything), the run directory (logs, etcd data, kubeconfigs) is kept after the
/// test binary ends, for debugging; its path is in [`ControlPlaneState::dir`].
pub const KEEP_ENV: &str = "WASMOP_TESTENV_KEEP";

/// Errors of starting and driving the control plane.
#[derive(Debug, thiserror::Error)]
pub enum ControlPlaneError {
    /// The build script could not be run at all.
    #[error("cannot run the control plane build script {script}")]
    RunBuild {
        /// The script's path.
        script: PathBuf,
        /// Why it could not run.
        #[source]
        source: std::io::Error,
    },
    /// The build script ran and failed; its output went to the test's stderr.
    #[error("building the control plane with {script} failed ({status}); its output is above")]
    BuildFailed {
        /// The script's path.
        script: PathBuf,
        /// How it exited.
        status: ExitStatus,
    },
    /// The launcher process could not be started.
    #[error("cannot start the control plane launcher {binary}")]
    Spawn {
        /// The binary that was run.
        binary: PathBuf,
        /// Why it could not start.
        #[source]
        source: std::io::Error,
    },
    /// Talking to the launcher over its pipes failed.
    #[error("cannot talk to the control plane launcher")]
    Pipe(#[source] std::io::Error),
    /// The launcher ended without answering.
    #[error("the control plane launcher exited without answering `{command}`; its stderr is above")]
    LauncherExited {
        /// The command (or `start`) it was answering.
        command: String,
    },
    /// The launcher answered with a line that is not its JSON reply.
    #[error("the control plane launcher answered `{command}` with an unreadable line: {line}")]
    BadReply {
        /// The command it was answering.
        command: String,
        /// The line it printed.
        line: String,
        /// Why the line could not be read.
        #[source]
        source: serde_json::Error,
    },
    /// The launcher reported a failure (for `start`, this includes the failed component's log tail).
    #[error("control plane `{command}` failed: {message}")]
    Failed {
        /// The command (or `start`) that failed.
        command: String,
        /// The launcher's explanation.
        message: String,
    },
    /// The shared control plane failed to start earlier in this test binary.
    #[error("the shared control plane is unavailable")]
    Unavailable(#[source] Arc<ControlPlaneError>),
    /// The blocking task that talks to the launcher panicked or was cancelled.
    #[error("the control plane task did not complete")]
    Task(#[source] tokio::task::JoinError),
}

/// The audit policy the test API server runs with: every request at the Metadata level
/// except the control plane's own chatter (the controller-manager's controllers, health
/// probes), whose volume would only slow the reads of tests.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    userGroups: [\"system:serviceaccounts:kube-system\"]
  - level: None
    users: [\"system:kube-controller-manager\", \"system:apiserver\"]
  - level: None
    nonResourceURLs: [\"/healthz*\", \"/readyz*\", \"/livez*\", \"/version\"]
  - level: Metadata
";
const AUDIT_POLICY_FILE: &str = "audit-policy.yaml";
const AUDIT_LOG_FILE: &str = "audit.log";

/// Where the running control plane is: what the launcher writes into `state.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct ControlPlaneState {
    /// The run directory (logs, PKI, etcd data, kubeconfigs).
    pub dir: PathBuf,
    /// The admin kubeconfig (user `wasmop-admin` in group `system:masters`).
    pub kubeconfig: PathBuf,
    /// The apiserver's URL, `https://127.0.0.1:PORT`.
    pub server: String,
    /// The CA that signed the apiserver's serving certificate and every client certificate.
    pub ca_file: PathBuf,
    /// The launcher's process id.
    pub launcher_pid: u32,
    /// The Kubernetes version of the components, e.g. `v1.35.4`.
    pub kubernetes_version: String,
    /// etcd.
    pub etcd: ComponentState,
    /// kube-apiserver.
    pub kube_apiserver: ComponentState,
    /// kube-controller-manager.
    pub kube_controller_manager: ComponentState,
}

/// One component of the control plane.
#[derive(Debug, Clone, Deserialize)]
pub struct ComponentState {
    /// Where it serves.
    pub url: String,
    /// Its process id, 0 while it is stopped.
    pub pid: u32,
    /// Its log file.
    pub log: PathBuf,
}

/// The launcher's answer to a command (one JSON line).
#[derive(Debug, Deserialize)]
struct Reply {
    ok: bool,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    kubeconfig: Option<PathBuf>,
    #[serde(default)]
    state: Option<ControlPlaneState>,
}

/// The pipes to the launcher. The child handle is kept so that the process is not reaped
/// behind our back; the launcher ends when `stdin` closes.
struct Launcher {
    _child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// A running control plane and the launcher that owns it.
///
/// # Guarantees
/// Every process it started stops when the test process ends, however it ends.
///
/// # Assumptions
/// [`stop_apiserver`](Self::stop_apiserver) affects every test sharing this control plane, so
/// tests that stop the apiserver live in a test binary of their own.
pub struct ControlPlane {
    launcher: Mutex<Launcher>,
    state: ControlPlaneState,
}

static SHARED: OnceLock<Result<Arc<ControlPlane>, Arc<ControlPlaneError>>> = OnceLock::new();

impl ControlPlane {
    /// The control plane shared by this test binary, started (and built if needed) on first use.
    ///
    /// # Errors
    /// The build or start failure, for the first caller and (as [`ControlPlaneError::Unavailable`])
    /// for every later one.
    pub async fn shared() -> Result<Arc<ControlPlane>, ControlPlaneError> {
        // Building and starting block for minutes on a cold machine: off the async threads.
        tokio::task::spawn_blocking(|| {
            SHARED
                .get_or_init(|| ControlPlane::start().map(Arc::new).map_err(Arc::new))
                .clone()
                .map_err(ControlPlaneError::Unavailable)
        })
        .await
        .map_err(ControlPlaneError::Task)?
    }

    /// The API server's audit log: one JSON line (`audit.k8s.io/v1` Event) per request.
    pub fn audit_log(&self) -> PathBuf {
        self.state.dir.join(AUDIT_LOG_FILE)
    }

    /// Where the control plane is.
    pub fn state(&self) -> &ControlPlaneState {
        &self.state
    }

    /// Stops kube-apiserver; etcd keeps the data. Returns once the process has exited.
    ///
    /// # Errors
    /// When the launcher cannot be reached or reports a failure.
    pub async fn stop_apiserver(self: &Arc<Self>) -> Result<(), ControlPlaneError> {
        self.command(vec!["stop-apiserver".to_owned()])
            .await
            .map(drop)
    }

    /// Starts kube-apiserver again on the same address. Returns once it answers `/readyz`.
    ///
    /// # Errors
    /// When it fails to start (the message holds its log tail) or is already running.
    pub async fn start_apiserver(self: &Arc<Self>) -> Result<(), ControlPlaneError> {
        self.command(vec!["start-apiserver".to_owned()])
            .await
            .map(drop)
    }

    /// Writes a kubeconfig that authenticates as `user` in `groups` with a client certificate
    /// signed by the control plane's CA, and returns its path.
    ///
    /// # Errors
    /// When the name or a group is empty or contains whitespace, or the launcher fails.
    pub async fn mint_user(
        self: &Arc<Self>,
        user: &str,
        groups: &[String],
    ) -> Result<PathBuf, ControlPlaneError> {
        let mut words = vec!["mint-user".to_owned(), user.to_owned()];
        if !groups.is_empty() {
            words.push(groups.join(","));
        }
        let bad = |w: &str| w.is_empty() || w.chars().any(char::is_whitespace);
        if bad(user) || groups.iter().any(|g| bad(g) || g.contains(',')) {
            return Err(ControlPlaneError::Failed {
                command: words.join(" "),
                message: "a user or group name is empty or contains whitespace or a comma".into(),
            });
        }
        let command = words.join(" ");
        let reply = self.command(words).await?;
        reply.kubeconfig.ok_or(ControlPlaneError::Failed {
            command,
            message: "the reply names no kubeconfig".into(),
        })
    }

    async fn command(self: &Arc<Self>, words: Vec<String>) -> Result<Reply, ControlPlaneError> {
        let this = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let mut launcher = this
                .launcher
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            launcher.call(&words.join(" "))
        })
        .await
        .map_err(ControlPlaneError::Task)?
    }

    /// The `wasmop-control-plane` binary: `WASMOP_CONTROL_PLANE_BIN` if set, else the cached
    /// build of `tests/control-plane` (built now if its sources changed). Blocks while building.
    ///
    /// # Errors
    /// When the build fails; its output goes to stderr.
    pub fn binary() -> Result<PathBuf, ControlPlaneError> {
        match env::var_os(BIN_ENV) {
            Some(path) => Ok(PathBuf::from(path)),
            None => build(),
        }
    }

    fn start() -> Result<ControlPlane, ControlPlaneError> {
        let binary = Self::binary()?;
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = env::temp_dir().join(format!("wasmop-testenv-{}-{nanos:x}", std::process::id()));
        // The API server's audit log records every request it receives (at the Metadata
        // level: who, verb, URI, response code): what tests of the trust boundary read to
        // prove which requests the host made, and which it never did.
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(dir.join(AUDIT_POLICY_FILE), AUDIT_POLICY))
            .map_err(|source| ControlPlaneError::Spawn {
                binary: binary.clone(),
                source,
            })?;
        let mut cmd = Command::new(&binary);
        cmd.arg("up")
            .arg("--output=json")
            .arg("--dir")
            .arg(&dir)
            .arg(format!(
                "--apiserver-arg=--audit-policy-file={}",
                dir.join(AUDIT_POLICY_FILE).display()
            ))
            .arg(format!(
                "--apiserver-arg=--audit-log-path={}",
                dir.join(AUDIT_LOG_FILE).display()
            ))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if env::var_os(KEEP_ENV).is_none() {
            cmd.arg("--remove-on-exit");
        }
        let mut child = cmd.spawn().map_err(|source| ControlPlaneError::Spawn {
            binary: binary.clone(),
            source,
        })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(ControlPlaneError::Pipe(std::io::Error::other(
                "the launcher's stdin or stdout is not piped",
            )));
        };
        let mut launcher = Launcher {
            _child: child,
            stdin,
            stdout: BufReader::new(stdout),
        };
        let reply = launcher.read_reply("start")?;
        let state = reply.state.ok_or_else(|| ControlPlaneError::Failed {
            command: "start".into(),
            message: "the ready message has no state".into(),
        })?;
        Ok(ControlPlane {
            launcher: Mutex::new(launcher),
            state,
        })
    }
}

impl Launcher {
    fn call(&mut self, command: &str) -> Result<Reply, ControlPlaneError> {
        writeln!(self.stdin, "{command}")
            .and_then(|()| self.stdin.flush())
            .map_err(ControlPlaneError::Pipe)?;
        self.read_reply(command)
    }

    fn read_reply(&mut self, command: &str) -> Result<Reply, ControlPlaneError> {
        let mut line = String::new();
        let read = self
            .stdout
            .read_line(&mut line)
            .map_err(ControlPlaneError::Pipe)?;
        if read == 0 {
            return Err(ControlPlaneError::LauncherExited {
                command: command.to_owned(),
            });
        }
        let reply: Reply =
            serde_json::from_str(&line).map_err(|source| ControlPlaneError::BadReply {
                command: command.to_owned(),
                line: line.trim_end().to_owned(),
                source,
            })?;
        if !reply.ok {
            return Err(ControlPlaneError::Failed {
                command: command.to_owned(),
                message: reply.error.unwrap_or_else(|| "no reason given".into()),
            });
        }
        Ok(reply)
    }
}

/// Builds the control plane binary (or finds it in the cache) with `tests/control-plane/cp build`,
/// which owns the cache logic, and returns its path.
fn build() -> Result<PathBuf, ControlPlaneError> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../control-plane/cp");
    let output = Command::new("bash")
        .arg(&script)
        .arg("build")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|source| ControlPlaneError::RunBuild {
            script: script.clone(),
            source,
        })?;
    if !output.status.success() {
        return Err(ControlPlaneError::BuildFailed {
            script,
            status: output.status,
        });
    }
    let path = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    Ok(PathBuf::from(path))
}
