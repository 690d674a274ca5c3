//! `wasmop test FILE --object OBJ.yaml`: one reconcile offline, printing the report.

use std::path::PathBuf;

use anyhow::Context as _;
use serde_json::Value;

use super::{Exit, RawRuntime};
use wasmop_offline::{GoldenError, Harness, Scenario, offline_runtime_config};
use wasmop_runtime::{LoadOptions, Runtime};

/// Arguments of `wasmop test`.
#[derive(Debug, clap::Args)]
pub(crate) struct RawTest {
    /// The plugin component (.wasm).
    file: PathBuf,
    /// YAML file with the object to reconcile.
    #[arg(long)]
    object: PathBuf,
    /// YAML files with objects already in the cluster (several documents or `List`s).
    #[arg(long)]
    state: Vec<PathBuf>,
    /// The plugin's settings: a YAML or JSON file holding one mapping.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Call `cleanup` instead of `reconcile` (implied when the object has
    /// `metadata.deletionTimestamp`, as the host does for an object being deleted).
    #[arg(long)]
    cleanup: bool,
    /// Compare the report with this golden file; exit 2 on a difference.
    #[arg(long)]
    expect: Option<PathBuf>,
    #[command(flatten)]
    runtime: RawRuntime,
}

async fn read(path: &PathBuf, what: &str) -> anyhow::Result<String> {
    tokio::fs::read_to_string(path)
        .await
        .with_context(|| format!("cannot read {what} {}", path.display()))
}

/// Runs `wasmop test`.
pub(crate) async fn run(raw: RawTest) -> anyhow::Result<Exit> {
    let config = match &raw.config {
        Some(path) => {
            let text = read(path, "the config file").await?;
            let value: Value = serde_yaml::from_str(&text)
                .with_context(|| format!("{} is not valid YAML or JSON", path.display()))?;
            if !value.is_object() {
                anyhow::bail!("{} must hold a mapping of settings", path.display());
            }
            value
        }
        None => Value::Object(Default::default()),
    };
    let object_yaml = read(&raw.object, "the object file").await?;
    let mut scenario = Scenario::from_yaml(&object_yaml)
        .with_context(|| format!("bad object file {}", raw.object.display()))?;
    for path in &raw.state {
        let yaml = read(path, "the state file").await?;
        scenario = scenario
            .with_state_yaml(&yaml)
            .with_context(|| format!("bad state file {}", path.display()))?;
    }
    if raw.cleanup {
        scenario = scenario.cleanup();
    }
    let rt_config = raw.runtime.apply(offline_runtime_config());
    let runtime = Runtime::new(rt_config).context("cannot start the plugin runtime")?;
    // The plugin gets what it declares: an author's run has no operator to grant more.
    let options = LoadOptions {
        config,
        policy: wasmop_core::policy::Policy::declared(),
        ..LoadOptions::default()
    };
    let harness = Harness::load_on(&runtime, &raw.file, options).await?;
    let report = harness.run(&scenario).await?;
    print!("{}", report.to_yaml());
    match &raw.expect {
        None if report.raw_outcome.is_success() => Ok(Exit::Success),
        None => Ok(Exit::PluginFailed),
        Some(golden) => {
            let text = read(golden, "the golden file").await?;
            match report.compare(&text, golden) {
                Ok(()) => Ok(Exit::Success),
                Err(e @ GoldenError::Mismatch { .. }) => {
                    eprintln!("{e}");
                    Ok(Exit::GoldenMismatch)
                }
                Err(e) => Err(e.into()),
            }
        }
    }
}
