//! `wasmop test FILE --object OBJ.yaml`: one reconcile offline, printing the report; or
//! `--validate REVIEW.yaml` / `--mutate REVIEW.yaml`: one admission review of an
//! AdmissionReview file. `--expect` compares the report with a golden file, `--bless` writes
//! that file instead.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::Context as _;
use serde_json::Value;

use super::{Exit, RawRuntime};
use wasmop_offline::{
    CaseSettings, GoldenError, Harness, ReviewScenario, Scenario, offline_runtime_config,
    parse_time,
};
use wasmop_runtime::{LoadOptions, ReviewKind, Runtime};

/// Where the plugin's log lines go, and the exit codes, as `--help` shows them.
const AFTER_HELP: &str = "\
Plugin log lines:
  the report's `logs` holds every line the plugin wrote, at every level. stderr shows them
  too, filtered by WASMOP_LOG (default `warn`; `WASMOP_LOG=info` to see info lines as they
  are written, `WASMOP_LOG=trace` for all)

Admission reviews:
  --validate and --mutate take an AdmissionReview (admission.k8s.io/v1, YAML or JSON), as the
  API server sends it to a webhook; the report shows the verdict (allowed, patched with the
  JSON patch, or denied with the message, reason and code) or how the call failed

Exit codes:
  0  the call succeeded (for a review: the plugin answered, whether it admitted the request
     or refused it); with --expect, the report matches the file (whatever the call's
     outcome); with --bless, the file was written
  1  an error: a file that cannot be read or parsed, a plugin that cannot be loaded
  2  a usage error (bad or missing arguments, a bad --now); or, with --expect, the report
     differs from the file (the diff is on stderr)
  3  without --expect or --bless: the plugin call did not succeed (its outcome is in the
     report)";

/// Arguments of `wasmop test`.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub(crate) struct RawTest {
    /// The plugin component (.wasm).
    file: PathBuf,
    /// YAML file with the object to reconcile.
    #[arg(long, required_unless_present_any = ["validate", "mutate"])]
    object: Option<PathBuf>,
    /// Review the request in this AdmissionReview file with the plugin's `validate`.
    #[arg(long, value_name = "REVIEW", conflicts_with_all = ["object", "mutate", "cleanup", "now", "case"])]
    validate: Option<PathBuf>,
    /// Review the request in this AdmissionReview file with the plugin's `mutate`.
    #[arg(long, value_name = "REVIEW", conflicts_with_all = ["object", "cleanup", "now", "case"])]
    mutate: Option<PathBuf>,
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
    /// With --expect: write the report to that file (creating or replacing it) instead of
    /// comparing. Review the change before committing it.
    #[arg(long, requires = "expect")]
    bless: bool,
    /// The time the plugin's wall clock shows (it stands still during the call), and the
    /// `deletionTimestamp` --cleanup gives an object that has none: an RFC 3339 time.
    /// [default: 2025-01-01T00:00:00Z, or the `now` of --case]
    #[arg(long, value_name = "RFC3339", value_parser = now_arg)]
    now: Option<SystemTime>,
    /// A golden case's settings file (`case.yaml`: `now: <RFC 3339>`; an unknown key is an
    /// error), as `cargo test` of a plugin reads it; --now overrides its `now`.
    #[arg(long, value_name = "FILE")]
    case: Option<PathBuf>,
    #[command(flatten)]
    runtime: RawRuntime,
}

/// Parses `--now`; clap shows the error with the value and the option.
fn now_arg(text: &str) -> Result<SystemTime, String> {
    parse_time(text).map_err(|e| format!("{e}: {}", e.source))
}

async fn read(path: &Path, what: &str) -> anyhow::Result<String> {
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
    let rt_config = raw.runtime.clone().apply(offline_runtime_config());
    let runtime = Runtime::new(rt_config).context("cannot start the plugin runtime")?;
    // The plugin gets what it declares: an author's run has no operator to grant more.
    let options = LoadOptions {
        config,
        policy: wasmop_core::policy::Policy::declared(),
        ..LoadOptions::default()
    };
    let harness = Harness::load_on(&runtime, &raw.file, options).await?;
    let review = match (&raw.validate, &raw.mutate) {
        (Some(path), _) => Some((ReviewKind::Validate, path)),
        (None, Some(path)) => Some((ReviewKind::Mutate, path)),
        (None, None) => None,
    };
    if let Some((kind, path)) = review {
        return review_offline(&raw, &harness, kind, path).await;
    }
    let Some(object) = &raw.object else {
        anyhow::bail!("--object, --validate or --mutate is required");
    };
    let object_yaml = read(object, "the object file").await?;
    let mut scenario = Scenario::from_yaml(&object_yaml)
        .with_context(|| format!("bad object file {}", object.display()))?;
    for path in &raw.state {
        let yaml = read(path, "the state file").await?;
        scenario = scenario
            .with_state_yaml(&yaml)
            .with_context(|| format!("bad state file {}", path.display()))?;
    }
    if raw.cleanup {
        scenario = scenario.cleanup();
    }
    let case = match &raw.case {
        Some(path) => {
            let text = read(path, "the case file").await?;
            CaseSettings::from_yaml(&text, path)?
        }
        None => CaseSettings::default(),
    };
    if let Some(now) = raw.now.or(case.now) {
        scenario = scenario.at(now);
    }
    let report = harness.run(&scenario).await?;
    print!("{}", report.to_yaml());
    let yaml = report.to_yaml();
    finish(
        &raw,
        report.raw_outcome.is_success(),
        &yaml,
        |text, golden| report.compare(text, golden),
    )
    .await
}

/// One review of the AdmissionReview in `path`, reported and checked like a reconcile.
async fn review_offline(
    raw: &RawTest,
    harness: &Harness,
    kind: ReviewKind,
    path: &Path,
) -> anyhow::Result<Exit> {
    let text = read(path, "the AdmissionReview file").await?;
    let mut scenario = ReviewScenario::from_yaml(kind, &text)
        .with_context(|| format!("bad AdmissionReview file {}", path.display()))?;
    for state in &raw.state {
        let yaml = read(state, "the state file").await?;
        scenario = scenario
            .with_state_yaml(&yaml)
            .with_context(|| format!("bad state file {}", state.display()))?;
    }
    let report = harness.review(&scenario).await?;
    let yaml = report.to_yaml();
    print!("{yaml}");
    finish(raw, report.raw.is_ok(), &yaml, |text, golden| {
        report.compare(text, golden)
    })
    .await
}

/// The exit of a run whose report is `yaml`: by how the call went, or by the comparison with
/// (or the blessing of) the golden file.
async fn finish(
    raw: &RawTest,
    succeeded: bool,
    yaml: &str,
    compare: impl FnOnce(&str, &Path) -> Result<(), GoldenError>,
) -> anyhow::Result<Exit> {
    match &raw.expect {
        None if succeeded => Ok(Exit::Success),
        None => Ok(Exit::PluginFailed),
        Some(golden) if raw.bless => bless(golden, yaml).await,
        Some(golden) => {
            let text = read(golden, "the golden file").await?;
            match compare(&text, golden) {
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

/// Writes `report` to the golden file and says on stderr what changed.
async fn bless(golden: &Path, report: &str) -> anyhow::Result<Exit> {
    let before = match tokio::fs::read_to_string(golden).await {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(anyhow::Error::new(e)
                .context(format!("cannot read the golden file {}", golden.display())));
        }
    };
    let what = match &before {
        Some(text) if text == report => "unchanged",
        Some(_) => "updated",
        None => "created",
    };
    if what != "unchanged" {
        tokio::fs::write(golden, report)
            .await
            .with_context(|| format!("cannot write the golden file {}", golden.display()))?;
    }
    eprintln!("blessed {}: {what}", golden.display());
    Ok(Exit::Success)
}
