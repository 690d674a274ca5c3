//! `required-labels`: an admission-only plugin (it exports `admission` and no reconciler, so
//! the host runs no controller for it, only its webhook). Its validating webhook refuses a
//! Deployment, when it is created or changed, that lacks one of the labels the cluster
//! requires, naming every one it lacks. Which labels: the plugin's settings, `labels` (a list
//! of label keys; `["team"]` when not given):
//!
//! ```yaml
//! plugins:
//!   required-labels:
//!     config: {labels: [team, cost-center]}
//!     grants: [{group: apps, kind: Deployment, verbs: [get]}]   # a review reads the object
//! ```
//!
//! The Python and Go twins (`plugins/python/required-labels`, `plugins/go/required-labels`)
//! pass the same cases (`tests/admission`).

use serde::Deserialize;
use serde_json::Value;
use wasmop_guest::Context;
use wasmop_guest::admission::{Admission, Allowed, Denied, Operation, Review, Webhook, Webhooks};
use wasmop_guest::k8s_openapi::api::apps::v1::Deployment;

/// The labels required when the settings name none.
const DEFAULT_LABELS: [&str; 1] = ["team"];

/// The plugin's settings, as the operator wrote them.
#[derive(Deserialize, Default)]
struct Settings {
    /// The label keys every Deployment must carry: checked by [`required`], so that a bad
    /// value is refused with this plugin's message.
    #[serde(default)]
    labels: Option<Value>,
}

/// The required label keys, in the settings' order; `None` when `labels` is not a list of
/// strings.
fn required(settings: &Settings) -> Option<Vec<String>> {
    match &settings.labels {
        None => Some(DEFAULT_LABELS.map(String::from).to_vec()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect(),
        Some(_) => None,
    }
}

/// The keys of `required` that `deployment` lacks (absent, or with an empty value).
fn missing<'a>(deployment: &Deployment, required: &'a [String]) -> Vec<&'a str> {
    let labels = deployment.metadata.labels.as_ref();
    required
        .iter()
        .filter(|key| {
            labels
                .and_then(|l| l.get(key.as_str()))
                .is_none_or(String::is_empty)
        })
        .map(String::as_str)
        .collect()
}

struct RequiredLabels;

impl Admission for RequiredLabels {
    type Object = Deployment;

    fn webhooks() -> Webhooks {
        Webhooks::new()
            .validating(Webhook::new([Operation::Create, Operation::Update]).timeout_seconds(5))
    }

    fn validate(review: Review<Deployment>, ctx: &Context) -> Result<Allowed, Denied> {
        let Some(deployment) = review.object else {
            return Ok(Allowed::new());
        };
        let invalid = || {
            Denied::new("the plugin's settings are invalid: `labels` must be a list of label keys")
                .reason("InternalError")
                .code(500)
        };
        let settings: Settings = ctx.config().map_err(|_| invalid())?;
        let required = required(&settings).ok_or_else(invalid)?;
        let missing = missing(&deployment, &required);
        if missing.is_empty() {
            return Ok(Allowed::new());
        }
        let name = review.name.as_deref().unwrap_or("(generated name)");
        Err(Denied::invalid(format!(
            "Deployment {name} lacks the labels this cluster requires: {}",
            missing.join(", ")
        )))
    }
}

wasmop_guest::export!(
    admission = RequiredLabels,
    name = "required-labels",
    version = env!("CARGO_PKG_VERSION"),
);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(labels: Value) -> Deployment {
        serde_json::from_value(json!({"metadata": {"name": "web", "labels": labels}}))
            .expect("deployment")
    }

    fn settings(v: Value) -> Settings {
        serde_json::from_value(v).expect("settings")
    }

    #[test]
    fn team_is_required_by_default() {
        assert_eq!(required(&settings(json!({}))), Some(vec!["team".into()]));
    }

    #[test]
    fn absent_and_empty_labels_are_missing_in_the_settings_order() {
        let required =
            required(&settings(json!({"labels": ["team", "owner", "tier"]}))).expect("a list");
        let d = deployment(json!({"team": "", "tier": "web"}));
        assert_eq!(missing(&d, &required), ["team", "owner"]);
    }

    #[test]
    fn labels_that_are_not_a_list_of_keys_are_refused() {
        assert_eq!(required(&settings(json!({"labels": "team"}))), None);
        assert_eq!(required(&settings(json!({"labels": ["team", 1]}))), None);
    }
}
