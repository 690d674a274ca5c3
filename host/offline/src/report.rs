//! The report of one offline call, its YAML form (the format is documented on
//! [`crate`]), and comparison with a golden file.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::memory::{Target, Write};
use wasmop_runtime::{Action, LogLine, Outcome};

/// One log line of the plugin, as written in a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportLog {
    /// `trace`, `debug`, `info`, `warn` or `error`.
    pub level: String,
    /// The line, cut and escaped as the host logs it.
    pub message: String,
}

impl From<&LogLine> for ReportLog {
    fn from(line: &LogLine) -> Self {
        Self {
            level: line.level.as_str().to_owned(),
            message: line.message.clone(),
        }
    }
}

/// How the call ended, as written in a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportOutcome {
    /// The outcome's label (`done`, `requeue`, `trap`, ...).
    pub result: String,
    /// For `requeue`: the delay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requeue_after_ms: Option<u64>,
    /// For failures: what happened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl From<&Outcome> for ReportOutcome {
    fn from(o: &Outcome) -> Self {
        let (requeue_after_ms, message) = match o {
            Outcome::Action(Action::Done) => (None, None),
            Outcome::Action(Action::RequeueAfter(d)) => {
                (Some(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)), None)
            }
            Outcome::PluginError { message, .. } => (None, Some(message.to_string())),
            // Backtraces depend on the compiler; keep reports stable across toolchains.
            other => (None, Some(other.message())),
        };
        Self {
            result: o.label().to_owned(),
            requeue_after_ms,
            message,
        }
    }
}

/// What one offline call did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The plugin's name.
    pub plugin: String,
    /// `reconcile` or `cleanup`.
    pub call: &'static str,
    /// The object the call was for.
    pub object: Target,
    /// The writes, in order.
    pub writes: Vec<Write>,
    /// The plugin's log lines, in order.
    pub logs: Vec<ReportLog>,
    /// How it ended.
    pub outcome: ReportOutcome,
    /// The outcome itself.
    #[serde(skip)]
    pub raw_outcome: Outcome,
}

/// A report that differs from its golden file.
#[derive(Debug, thiserror::Error)]
pub enum GoldenError {
    /// The golden file could not be read.
    #[error("cannot read golden file {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The golden file is not YAML.
    #[error("golden file {path} is not valid YAML")]
    Yaml {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_yaml::Error,
    },
    /// The report differs.
    #[error("the report differs from {path} (- expected, + actual):\n{diff}")]
    Mismatch {
        /// The file.
        path: PathBuf,
        /// A unified diff.
        diff: String,
    },
}

/// Compares a report's YAML with the expected YAML, as values (formatting and comments do
/// not matter); a difference is a unified diff.
pub(crate) fn compare_yaml(
    actual_yaml: &str,
    expected_yaml: &str,
    path: &Path,
) -> Result<(), GoldenError> {
    let expected: serde_yaml::Value =
        serde_yaml::from_str(expected_yaml).map_err(|source| GoldenError::Yaml {
            path: path.to_owned(),
            source,
        })?;
    let actual: serde_yaml::Value =
        serde_yaml::from_str(actual_yaml).map_err(|source| GoldenError::Yaml {
            path: path.to_owned(),
            source,
        })?;
    if expected == actual {
        return Ok(());
    }
    let expected_text = serde_yaml::to_string(&expected).unwrap_or_default();
    let diff = similar::TextDiff::from_lines(expected_text.as_str(), actual_yaml)
        .unified_diff()
        .context_radius(3)
        .header("expected", "actual")
        .to_string();
    Err(GoldenError::Mismatch {
        path: path.to_owned(),
        diff,
    })
}

/// Panics with a readable diff unless `yaml` matches the golden file at `path`; with
/// `WASMOP_BLESS=1` in the environment, (re)writes the file instead.
#[allow(clippy::panic)]
pub(crate) fn assert_golden_yaml(yaml: &str, path: &Path) {
    if std::env::var_os("WASMOP_BLESS").is_some_and(|v| v == "1") {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        }
        std::fs::write(path, yaml)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        return;
    }
    let result = std::fs::read_to_string(path)
        .map_err(|source| GoldenError::Read {
            path: path.to_owned(),
            source,
        })
        .and_then(|text| compare_yaml(yaml, &text, path));
    if let Err(e) = result {
        panic!(
            "{}\n(run with WASMOP_BLESS=1 to accept the new report)",
            wasmop_core::chain(&e)
        );
    }
}

/// Rebuilds every JSON map with its keys in sorted order, whatever serde_json's map type.
fn canonical(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(String, Value)> = m.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, canonical(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(canonical).collect()),
        other => other,
    }
}

/// A write with every JSON object in it in canonical (sorted-key) order.
pub(crate) fn canonical_write(w: Write) -> Write {
    match w {
        Write::Create { object, error } => Write::Create {
            object: canonical(object),
            error,
        },
        Write::Apply {
            field_manager,
            object,
            error,
        } => Write::Apply {
            field_manager,
            object: canonical(object),
            error,
        },
        Write::Patch {
            target,
            patch_type,
            patch,
            error,
        } => Write::Patch {
            target,
            patch_type,
            patch: canonical(patch),
            error,
        },
        Write::PatchStatus {
            target,
            patch_type,
            patch,
            error,
        } => Write::PatchStatus {
            target,
            patch_type,
            patch: canonical(patch),
            error,
        },
        other => other,
    }
}

impl Report {
    /// The report as YAML.
    pub fn to_yaml(&self) -> String {
        // Serializing plain data to YAML cannot fail; an empty string would show up in any
        // golden comparison.
        serde_yaml::to_string(self).unwrap_or_default()
    }

    /// Compares with the expected YAML (as values: formatting and comments do not matter).
    pub fn compare(&self, expected_yaml: &str, path: &Path) -> Result<(), GoldenError> {
        compare_yaml(&self.to_yaml(), expected_yaml, path)
    }

    /// Compares with a golden file; reads synchronously (for tests and the CLI's blocking
    /// edge, not for async code).
    pub fn compare_with_file(&self, path: impl AsRef<Path>) -> Result<(), GoldenError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| GoldenError::Read {
            path: path.to_owned(),
            source,
        })?;
        self.compare(&text, path)
    }

    /// For tests: panics with a readable diff unless the report matches the golden file.
    /// With `WASMOP_BLESS=1` in the environment, (re)writes the file instead.
    ///
    /// # Panics
    /// When the report differs or the file cannot be read or written.
    pub fn assert_golden(&self, path: impl AsRef<Path>) {
        assert_golden_yaml(&self.to_yaml(), path.as_ref());
    }
}
