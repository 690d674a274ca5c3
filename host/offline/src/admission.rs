//! Admission reviews offline: an AdmissionReview file (what the API server sends a webhook,
//! `admission.k8s.io/v1`, in YAML or JSON) run through a plugin's `validate` or `mutate`
//! against an in-memory cluster, and the [`ReviewedReport`] of its verdict, comparable with a
//! golden file like a reconcile's [`Report`](crate::Report).
//!
//! # Report format
//! ```yaml
//! plugin: database-config
//! call: mutate                 # validate | mutate
//! request: {operation: CREATE, apiVersion: demo.wasmop.dev/v1, kind: Database,
//!           namespace: shop, name: orders}
//! result: patched              # allowed | patched | denied, or how the call failed
//!                              # (trap | timeout | out-of-memory | denied-host-call | ...)
//! message: ...                 # a denial's message, or what the failure was
//! reason: Invalid              # a denial's status reason and HTTP code
//! code: 422
//! warnings: []                 # for the client, cut and escaped
//! patch:                       # a mutation: the JSON patch the API server would apply
//! - {op: add, path: /spec/replicas, value: 1}
//! logs: []                     # the plugin's log lines, as in a reconcile's report
//! ```

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::report::{GoldenError, ReportLog, assert_golden_yaml, compare_yaml};
use crate::{Harness, MemoryCluster, OfflineError, objects_from_yaml};
use wasmop_runtime::{Outcome, Review, ReviewCall, ReviewKind, Verdict};

/// One review to run: which export, the request, and the objects already in the cluster.
#[derive(Debug, Clone)]
pub struct ReviewScenario {
    kind: ReviewKind,
    review: Review,
    state: Vec<Value>,
}

impl ReviewScenario {
    /// A review of `kind` for the AdmissionReview in `yaml` (YAML or JSON).
    ///
    /// # Errors
    /// When the text is not an AdmissionReview with a request.
    pub fn from_yaml(kind: ReviewKind, yaml: &str) -> Result<Self, OfflineError> {
        let parsed: kube_core::admission::AdmissionReview<kube_core::DynamicObject> =
            serde_yaml::from_str(yaml).map_err(|source| OfflineError::Yaml {
                what: "the AdmissionReview".into(),
                source,
            })?;
        let review = Review::from_admission_review(parsed).map_err(OfflineError::Review)?;
        Ok(Self {
            kind,
            review,
            state: Vec::new(),
        })
    }

    /// Adds objects already in the cluster (what the review may read).
    #[must_use]
    pub fn with_state(mut self, objects: impl IntoIterator<Item = Value>) -> Self {
        self.state.extend(objects);
        self
    }

    /// Adds objects from YAML (several documents or `List`s).
    ///
    /// # Errors
    /// When the YAML does not parse.
    pub fn with_state_yaml(self, yaml: &str) -> Result<Self, OfflineError> {
        let objects = objects_from_yaml(yaml, "the state")?;
        Ok(self.with_state(objects))
    }
}

/// The request a review was for, as written in a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewedRequest {
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub operation: String,
    /// The object's apiVersion.
    pub api_version: String,
    /// Its kind.
    pub kind: String,
    /// Its namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Its name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// What one offline review did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReviewedReport {
    /// The plugin's name.
    pub plugin: String,
    /// `validate` or `mutate`.
    pub call: &'static str,
    /// The request.
    pub request: ReviewedRequest,
    /// `allowed`, `patched`, `denied`, or the label of a failed call.
    pub result: String,
    /// A denial's message, or what the failure was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// A denial's status reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A denial's HTTP code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
    /// Warnings for the client.
    pub warnings: Vec<String>,
    /// A mutation's JSON patch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<Value>,
    /// The plugin's log lines, in order.
    pub logs: Vec<ReportLog>,
    /// The verdict itself, or the outcome of a failed call.
    #[serde(skip)]
    pub raw: Result<Verdict, Outcome>,
}

impl ReviewedReport {
    /// The report as YAML.
    pub fn to_yaml(&self) -> String {
        serde_yaml::to_string(self).unwrap_or_default()
    }

    /// For tests: panics with a readable diff unless the report matches the golden file;
    /// with `WASMOP_BLESS=1` in the environment, (re)writes the file instead.
    ///
    /// # Panics
    /// When the report differs or the file cannot be read or written.
    pub fn assert_golden(&self, path: impl AsRef<std::path::Path>) {
        assert_golden_yaml(&self.to_yaml(), path.as_ref());
    }

    /// Compares with the expected YAML (as values).
    ///
    /// # Errors
    /// [`GoldenError::Mismatch`] with a diff, or a YAML error naming `path`.
    pub fn compare(&self, expected_yaml: &str, path: &std::path::Path) -> Result<(), GoldenError> {
        compare_yaml(&self.to_yaml(), expected_yaml, path)
    }
}

impl Harness {
    /// Runs one review in a fresh in-memory cluster seeded with the scenario's state,
    /// capturing the plugin's log lines for the report.
    ///
    /// # Errors
    /// When the state cannot be seeded.
    pub async fn review(&self, scenario: &ReviewScenario) -> Result<ReviewedReport, OfflineError> {
        let cluster = Arc::new(MemoryCluster::new());
        cluster
            .seed(scenario.state.iter().cloned())
            .map_err(OfflineError::Seed)?;
        let review = &scenario.review;
        let request = ReviewedRequest {
            operation: review.operation.as_api().to_owned(),
            api_version: if review.kind.group.is_empty() {
                review.kind.version.clone()
            } else {
                format!("{}/{}", review.kind.group, review.kind.version)
            },
            kind: review.kind.kind.clone(),
            namespace: review.namespace.clone(),
            name: review.name.clone(),
        };
        let call = ReviewCall::new(scenario.kind, review.clone()).capturing_logs();
        let done = self.plugin().review(cluster, call).await;
        let (result, message, reason, code, warnings, patch) = match &done.result {
            Ok(Verdict::Allowed { warnings, patch }) => (
                done.result.as_ref().map_or("", |v| v.label()).to_owned(),
                None,
                None,
                None,
                warnings.iter().map(ToString::to_string).collect(),
                patch
                    .as_ref()
                    .map(|p| serde_json::to_value(p).unwrap_or(Value::Null)),
            ),
            Ok(Verdict::Denied {
                message,
                reason,
                code,
                warnings,
            }) => (
                "denied".to_owned(),
                Some(message.to_string()),
                Some(reason.clone()),
                Some(*code),
                warnings.iter().map(ToString::to_string).collect(),
                None,
            ),
            // Backtraces depend on the compiler; keep reports stable across toolchains.
            Err(outcome) => (
                failure_label(outcome).to_owned(),
                Some(outcome.message()),
                None,
                None,
                Vec::new(),
                None,
            ),
        };
        Ok(ReviewedReport {
            plugin: self.plugin().name().to_string(),
            call: scenario.kind.as_str(),
            request,
            result,
            message,
            reason,
            code,
            warnings,
            patch,
            logs: done.logs.iter().map(ReportLog::from).collect(),
            raw: done.result,
        })
    }

    /// [`review`](Self::review) for synchronous tests. Must not be called from async code.
    ///
    /// # Errors
    /// As [`review`](Self::review).
    pub fn review_blocking(
        &self,
        scenario: &ReviewScenario,
    ) -> Result<ReviewedReport, OfflineError> {
        crate::blocking_runtime()?.block_on(self.review(scenario))
    }
}

/// A failed call's label in a review report: the outcome's, except that a denied host call
/// is `denied-host-call`, so that it never reads as the plugin's own denial.
fn failure_label(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Denied(_) => "denied-host-call",
        other => other.label(),
    }
}
