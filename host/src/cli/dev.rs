//! `wasmop dev [DIR]`: the edit-and-see loop for a plugin project. It builds the plugin,
//! connects to a cluster (or starts the bundled local control plane), installs the project's
//! CRD and samples, runs a host on the plugin, and rebuilds on every saved change: the host
//! hot-reloads the new build, and a build that fails leaves the last good one running.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;

mod build;

use self::build::{Lang, build};
use super::Exit;
use crate::config::flags::RunArgs;

/// What `--help` shows after the options.
const AFTER_HELP: &str = "\
The cluster:
  --kubeconfig, else KUBECONFIG, else the bundled local control plane of the checkout this
  wasmop was built from (started, or reused when it already runs; data under
  ~/.cache/wasmop/dev-control-plane), stopped again on Ctrl-C if dev started it. Compiled
  plugins are cached in ~/.cache/wasmop/dev-artefacts unless --config names a
  cacheDirectory (WASMOP_CACHE_DIR replaces ~/.cache/wasmop in both).

What it does, in order:
  builds the plugin: a Rust project (Cargo.toml) with `cargo build --target wasm32-wasip2`
  (the project's quick dev profile); a Python project (app.py) with `.venv/bin/python
  build.py --dev` (the interpreter is built once, each edit only ships the sources), after
  making .venv and installing requirements.txt into it when .venv is missing or
  requirements.txt changed; a Go project (go.mod) with its `./build`;
  applies crd.yaml and samples/*.yaml when the project has them (server-side apply, field
  manager wasmop-dev); runs a host on the plugin, logging each reconcile, the plugin's log
  lines and every load to stderr (WASMOP_LOG overrides the filter); rebuilds on each saved
  change under the project (target/ aside). A failed build is printed and the last good
  version keeps running.

Exit codes:
  0  stopped with Ctrl-C (SIGINT) or SIGTERM
  1  the first build failed, no cluster could be reached, or a file could not be applied
  2  a usage error (bad or missing arguments)";

/// The log filter of `dev` when `WASMOP_LOG` is not set: what a plugin author watches.
// `kube_client::client::builder` is off: it logs each refused connection while `dev` waits
// for a control plane it started.
const LOG_FILTER: &str = "warn,kube_client::client::builder=off,wasmop::cli::dev=info,wasmop::registry=info,\
wasmop_runtime::hostcalls::log=trace,wasmop_controller::controller::reconcile=info,\
wasmop_controller::writes=debug";

/// Arguments of `wasmop dev`.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub(crate) struct RawDev {
    /// The plugin project: a directory with a Cargo.toml (Rust), an app.py and build.py
    /// (Python), or a go.mod and build (Go); `wasmop new` makes one.
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// Kubeconfig file; without it, KUBECONFIG or the bundled local control plane.
    #[arg(long, env = "WASMOP_KUBECONFIG", value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The namespace of the samples that name none.
    #[arg(long, default_value = "default", value_name = "NS")]
    namespace: String,
    /// A host configuration file (YAML, as `wasmop run --config`): the plugin's grants and
    /// settings. Its `sources` are replaced by the project's build.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

/// Puts `component` into the host's plugin directory whole: copied beside it, then renamed.
fn install(component: &Path, plugins: &Path, name: &str) -> anyhow::Result<()> {
    let staged = plugins.join(format!("{name}.partial"));
    std::fs::copy(component, &staged).with_context(|| {
        format!(
            "cannot copy {} to {}",
            component.display(),
            staged.display()
        )
    })?;
    let target = plugins.join(format!("{name}.wasm"));
    std::fs::rename(&staged, &target)
        .with_context(|| format!("cannot move the build to {}", target.display()))
}

/// Applies every document of `path` (server-side, field manager `wasmop-dev`), namespaced
/// objects without a namespace into `namespace`. After a CRD, waits until its kind is served.
async fn apply_file(client: &Client, path: &Path, namespace: &str) -> anyhow::Result<()> {
    let text = tokio::fs::read_to_string(path)
        .await
        .with_context(|| format!("cannot read {}", path.display()))?;
    for (index, document) in serde_yaml::Deserializer::from_str(&text).enumerate() {
        let what = || format!("{} (document {})", path.display(), index + 1);
        let value: serde_json::Value = serde::Deserialize::deserialize(document)
            .with_context(|| format!("{} is not YAML", what()))?;
        if value.is_null() {
            continue;
        }
        let object: DynamicObject = serde_json::from_value(value.clone())
            .with_context(|| format!("{} is not a Kubernetes object", what()))?;
        let types = object
            .types
            .as_ref()
            .with_context(|| format!("{} has no apiVersion and kind", what()))?;
        let (group, version) = match types.api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", types.api_version.as_str()),
        };
        let gvk = GroupVersionKind::gvk(group, version, &types.kind);
        let name = object
            .metadata
            .name
            .clone()
            .with_context(|| format!("{} has no metadata.name", what()))?;
        let (resource, caps) = kube::discovery::pinned_kind(client, &gvk)
            .await
            .with_context(|| format!("{}: the cluster does not serve {gvk:?}", what()))?;
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Cluster => Api::all_with(client.clone(), &resource),
            Scope::Namespaced => Api::namespaced_with(
                client.clone(),
                object.metadata.namespace.as_deref().unwrap_or(namespace),
                &resource,
            ),
        };
        api.patch(
            &name,
            &PatchParams::apply("wasmop-dev").force(),
            &Patch::Apply(&value),
        )
        .await
        .with_context(|| format!("cannot apply {}: {} {name}", what(), types.kind))?;
        tracing::info!("applied {} {name} from {}", types.kind, path.display());
        if gvk.group == "apiextensions.k8s.io" && types.kind == "CustomResourceDefinition" {
            wait_served(client, &value, &what()).await?;
        }
    }
    Ok(())
}

/// Waits until the kind a CRD defines is served (the CRD is Established).
async fn wait_served(client: &Client, crd: &serde_json::Value, what: &str) -> anyhow::Result<()> {
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or_default();
    let kind = spec["names"]["kind"].as_str().unwrap_or_default();
    let Some(version) = spec["versions"]
        .as_array()
        .and_then(|v| v.first())
        .and_then(|v| v["name"].as_str())
    else {
        return Ok(());
    };
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if kube::discovery::pinned_kind(client, &gvk).await.is_ok() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{what}: {kind} is not served 60 s after its CRD was applied");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The bundled control plane dev started, stopped when dropped.
struct LocalControlPlane {
    child: Option<tokio::process::Child>,
}

impl Drop for LocalControlPlane {
    fn drop(&mut self) {
        if let Some(pid) = self
            .child
            .as_ref()
            .and_then(tokio::process::Child::id)
            .and_then(|p| rustix::process::Pid::from_raw(p.cast_signed()))
        {
            // SIGTERM: it stops its components and keeps its data for the next `dev`.
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
    }
}

/// A client for the cluster: the kubeconfig given, `KUBECONFIG`, or the bundled control plane
/// (reused when it answers, else started).
async fn cluster(
    kubeconfig: Option<&Path>,
) -> anyhow::Result<(Client, PathBuf, LocalControlPlane)> {
    let none = LocalControlPlane { child: None };
    let path = match kubeconfig {
        Some(path) => path.to_owned(),
        None => match std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
            Some(path) => PathBuf::from(path),
            None => return local_control_plane().await,
        },
    };
    let client = client_for(&path).await?;
    client
        .apiserver_version()
        .await
        .with_context(|| format!("the cluster of {} does not answer", path.display()))?;
    Ok((client, path, none))
}

async fn client_for(path: &Path) -> anyhow::Result<Client> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .with_context(|| format!("cannot read the kubeconfig {}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .with_context(|| format!("bad kubeconfig {}", path.display()))?;
    crate::kubeclient::client(config).context("cannot make a client")
}

/// Where `dev` keeps what outlives a run: `WASMOP_CACHE_DIR`, else `~/.cache/wasmop`.
fn cache_home() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("WASMOP_CACHE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME").context("HOME is not set")?;
    Ok(Path::new(&home).join(".cache/wasmop"))
}

async fn local_control_plane() -> anyhow::Result<(Client, PathBuf, LocalControlPlane)> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/control-plane/cp");
    let data = cache_home()?.join("dev-control-plane");
    let kubeconfig = data.join("admin.kubeconfig");
    if kubeconfig.exists()
        && let Ok(client) = client_for(&kubeconfig).await
        && client.apiserver_version().await.is_ok()
    {
        tracing::info!("reusing the local control plane ({})", kubeconfig.display());
        return Ok((client, kubeconfig, LocalControlPlane { child: None }));
    }
    if !script.exists() {
        bail!(
            "no cluster: set KUBECONFIG or --kubeconfig (this wasmop was not built from a \
             checkout that is still at {}, whose bundled control plane it would start)",
            script.display()
        );
    }
    tracing::info!("starting the local control plane (the first start builds it: minutes)");
    let child = tokio::process::Command::new(&script)
        .arg("up")
        .arg(&data)
        .arg("--no-stdin")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("cannot run {}", script.display()))?;
    let mut plane = LocalControlPlane { child: Some(child) };
    let deadline = Instant::now() + Duration::from_secs(30 * 60);
    loop {
        if let Some(status) = plane
            .child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
        {
            bail!("the local control plane exited ({status}); its output is above");
        }
        if kubeconfig.exists()
            && let Ok(client) = client_for(&kubeconfig).await
            && client.apiserver_version().await.is_ok()
        {
            println!(
                "export KUBECONFIG={}   # the local control plane",
                kubeconfig.display()
            );
            return Ok((client, kubeconfig, plane));
        }
        if Instant::now() > deadline {
            bail!("the local control plane did not answer within 30 minutes");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Whether a change at `path` is the project's source (not its build output or a hidden file).
fn is_source(project: &Path, path: &Path) -> bool {
    let Ok(relative) = path.strip_prefix(project) else {
        return false;
    };
    let mut parts = relative.components();
    match parts.next() {
        Some(first) => {
            let first = first.as_os_str().to_string_lossy();
            first != "target"
                && !first.starts_with('.')
                && !relative
                    .components()
                    .any(|c| c.as_os_str() == "__pycache__")
        }
        None => false,
    }
}

/// Rebuilds on every saved change and installs each good build; runs until dropped.
async fn rebuild_on_change(
    project: PathBuf,
    lang: Lang,
    plugins: PathBuf,
    name: String,
) -> anyhow::Result<()> {
    use notify::Watcher as _;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let watched = project.clone();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event
            && !event.kind.is_access()
            && event.paths.iter().any(|p| is_source(&watched, p))
        {
            let _ = tx.send(());
        }
    })
    .context("cannot watch the project")?;
    // The project's own files and each of its directories but the build output and hidden
    // ones: a recursive watch of `target/` would spend thousands of inotify watches on it.
    let mut watch = |path: &Path, mode| {
        watcher
            .watch(path, mode)
            .with_context(|| format!("cannot watch {}", path.display()))
    };
    watch(&project, notify::RecursiveMode::NonRecursive)?;
    for entry in std::fs::read_dir(&project)
        .with_context(|| format!("cannot read {}", project.display()))?
        .filter_map(Result::ok)
    {
        let path = entry.path();
        if path.is_dir() && is_source(&project, &path) {
            watch(&path, notify::RecursiveMode::Recursive)?;
        }
    }
    while rx.recv().await.is_some() {
        // An editor's save is several events: build once they stop.
        tokio::time::sleep(Duration::from_millis(150)).await;
        while rx.try_recv().is_ok() {}
        let start = Instant::now();
        tracing::info!("change saved: rebuilding");
        match build(&project, lang).await {
            Ok(component) => {
                install(&component, &plugins, &name)?;
                tracing::info!(
                    "rebuilt in {:.1} s: the host loads the new version",
                    start.elapsed().as_secs_f64()
                );
            }
            Err(e) => tracing::error!("{e:#}: the last good version keeps running"),
        }
    }
    Ok(())
}

/// Runs the loop until SIGINT or SIGTERM.
pub(crate) async fn run(raw: RawDev) -> anyhow::Result<Exit> {
    let project = std::fs::canonicalize(&raw.dir)
        .with_context(|| format!("no project at {}", raw.dir.display()))?;
    let lang = Lang::of(&project)?;
    let name = project
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("plugin")
        .to_owned();
    let start = Instant::now();
    tracing::info!("building {}", project.display());
    let component = build(&project, lang).await?;
    tracing::info!("built in {:.1} s", start.elapsed().as_secs_f64());

    let (client, kubeconfig, _plane) = cluster(raw.kubeconfig.as_deref()).await?;
    let crd = project.join("crd.yaml");
    if crd.is_file() {
        apply_file(&client, &crd, &raw.namespace).await?;
    }
    let plugins = tempfile::tempdir().context("cannot make the plugin directory")?;
    install(&component, plugins.path(), &name)?;
    let mut samples: Vec<PathBuf> = match std::fs::read_dir(project.join("samples")) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
            .collect(),
        Err(_) => Vec::new(),
    };
    samples.sort();
    for sample in &samples {
        apply_file(&client, sample, &raw.namespace).await?;
    }

    let watcher = tokio::spawn(rebuild_on_change(
        project.clone(),
        lang,
        plugins.path().to_owned(),
        name,
    ));
    let args = RunArgs {
        config: raw.config,
        plugins: vec![plugins.path().to_owned()],
        kubeconfig: Some(kubeconfig),
        metrics_address: Some(String::new()),
        health_address: Some(String::new()),
        log_format: Some("text".to_owned()),
        ..RunArgs::default()
    };
    let mut config = args.load().await?;
    config.reconcile_on_new_version = true;
    config.dev_sources = true;
    // Compiled versions outlive the run: the next `dev` of the project (and every Python
    // edit, which ships only sources to the same runner) loads its artefact.
    if config.cache_directory.is_none() {
        config.cache_directory = Some(cache_home()?.join("dev-artefacts"));
    }
    tracing::info!("running the plugin: edit and save to reload it; Ctrl-C stops");
    let result = crate::host::run(config).await;
    watcher.abort();
    result?;
    Ok(Exit::Success)
}

/// The filter `dev` logs with when `WASMOP_LOG` is not set.
pub(crate) fn log_filter() -> &'static str {
    LOG_FILTER
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sources_trigger_a_rebuild() {
        let p = Path::new("/p");
        assert!(is_source(p, Path::new("/p/src/lib.rs")));
        assert!(is_source(p, Path::new("/p/Cargo.toml")));
        assert!(!is_source(
            p,
            Path::new("/p/target/wasm32-wasip2/debug/x.wasm")
        ));
        assert!(!is_source(p, Path::new("/p/.git/index")));
        assert!(is_source(p, Path::new("/p/app.py")));
        assert!(!is_source(
            p,
            Path::new("/p/__pycache__/app.cpython-311.pyc")
        ));
        assert!(!is_source(p, Path::new("/p/lib/__pycache__/x.pyc")));
        assert!(!is_source(p, Path::new("/p/.venv/bin/python")));
        assert!(!is_source(p, Path::new("/elsewhere/src/lib.rs")));
        assert!(!is_source(p, Path::new("/p")));
    }
}
