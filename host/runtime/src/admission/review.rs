//! One review: a fresh instance, the plugin's limits with the review's deadline, its
//! `validate` or `mutate` export, and the answer checked into a [`Verdict`].

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use wasmop_core::cluster::trim::trim_value;
use wasmop_core::cluster::{Cluster, json_text};
use wasmop_core::plugin::text::PluginText;

use super::{
    MAX_MESSAGE_BYTES, MAX_MUTATED_BYTES, MAX_REASON_LEN, MAX_WARNING_BYTES, MAX_WARNINGS,
    Operation, Review, ReviewCall, ReviewKind, ReviewReport, Verdict,
};
use crate::PluginInner;
use crate::bindings::v0_3::wasmop::plugin::types::Gvk;
use crate::contract::{ReviewEntry, Reviewed, wit_admission as wit};
use crate::dispatch::{Answer, Invocation, PerCall, execute, finish, prepare};
use crate::outcome::{Outcome, Usage};

/// Runs one review of `plugin`.
pub(crate) async fn review(
    plugin: &PluginInner,
    cluster: Arc<dyn Cluster>,
    call: ReviewCall,
) -> ReviewReport {
    let ReviewCall {
        kind,
        mut review,
        deadline,
        capture_logs,
    } = call;
    let failed = |message: String| ReviewReport {
        result: Err(Outcome::Trap {
            message,
            backtrace: Vec::new(),
        }),
        usage: Usage::default(),
        logs: Vec::new(),
    };
    let registered = plugin
        .admission
        .as_ref()
        .and_then(|a| a.registration(kind))
        .is_some();
    if !registered {
        return failed(format!(
            "the plugin registers no {} webhook",
            match kind {
                ReviewKind::Validate => "validating",
                ReviewKind::Mutate => "mutating",
            }
        ));
    }
    let code = plugin.code.current();
    let limits = &plugin.shared.limits;
    let io = PerCall {
        clock: None,
        capture_logs,
        deadline: deadline.map_or(limits.deadline, |d| d.min(limits.deadline)),
        review: true,
    };
    let target = review_target(&review);
    let prepared = match prepare(plugin, &code.engine, cluster, target, &io).await {
        Ok(prepared) => prepared,
        Err(e) => return failed(format!("cannot prepare the review: {e:#}")),
    };
    // Taken, not copied: the guest gets its text, and a mutation is diffed against it.
    let mut original = review.object.take();
    if let Some(value) = &mut original {
        trim_value(value);
    }
    let entry = match kind {
        ReviewKind::Validate => ReviewEntry::Validate,
        ReviewKind::Mutate => ReviewEntry::Mutate,
    };
    let started = Instant::now();
    let invocation = Invocation::Admission(entry, Box::new(to_wit(review, original.as_ref())));
    let (held, returned) =
        execute(plugin, Arc::clone(&code), invocation, io.deadline, prepared).await;
    let (answered, usage, logs) = finish(plugin, held, returned, io.deadline);
    let result = match answered {
        Ok(Answer::Admission(reviewed)) => {
            verdict(reviewed, original.as_ref()).map_err(|m| Outcome::Trap {
                message: m,
                backtrace: Vec::new(),
            })
        }
        Ok(Answer::Reconciler(_)) => Err(Outcome::Trap {
            message: "a review returned a reconcile answer (a host bug)".into(),
            backtrace: Vec::new(),
        }),
        Err(outcome) => Err(outcome),
    };
    let elapsed_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    let plugin_name = plugin.shared.plugin.as_str();
    match &result {
        Ok(v) => tracing::debug!(
            plugin = plugin_name,
            review = kind.as_str(),
            verdict = v.label(),
            elapsed_us,
            "reviewed"
        ),
        Err(outcome) => tracing::warn!(
            plugin = plugin_name,
            review = kind.as_str(),
            outcome = outcome.label(),
            elapsed_us,
            "review failed: {outcome}"
        ),
    }
    ReviewReport {
        result,
        usage,
        logs,
    }
}

/// The object a review is about, for log tags, when the request names one that passes the
/// grammar (the API server's names do).
fn review_target(review: &Review) -> Option<wasmop_core::cluster::ObjectRef> {
    let name = review.name.clone()?;
    wasmop_core::cluster::ObjectRef::checked(
        "review",
        review.kind.clone(),
        review.namespace.clone(),
        name,
    )
    .ok()
}

fn operation(op: Operation) -> wit::Operation {
    match op {
        Operation::Create => wit::Operation::Create,
        Operation::Update => wit::Operation::Update,
        Operation::Delete => wit::Operation::Delete,
        Operation::Connect => wit::Operation::Connect,
    }
}

/// The request in the guest's types; the object is the trimmed `original` (taken out of
/// `review` by the caller).
fn to_wit(review: Review, original: Option<&Value>) -> wit::Review {
    wit::Review {
        uid: review.uid,
        kind: Gvk {
            group: review.kind.group,
            version: review.kind.version,
            kind: review.kind.kind,
        },
        resource: wit::GroupVersionResource {
            group: review.resource.group,
            version: review.resource.version,
            resource: review.resource.resource,
        },
        sub_resource: review.sub_resource,
        operation: operation(review.operation),
        name: review.name,
        namespace: review.namespace,
        user_info: wit::UserInfo {
            username: review.user_info.username,
            uid: review.user_info.uid,
            groups: review.user_info.groups,
            extra: review.user_info.extra,
        },
        object: original.map(json_text),
        old_object: review.old_object.map(|mut v| {
            trim_value(&mut v);
            json_text(&v)
        }),
        dry_run: review.dry_run,
    }
}

/// The warnings of an answer: at most [`MAX_WARNINGS`], each cut and escaped.
fn warnings(list: Vec<String>) -> Vec<PluginText> {
    list.iter()
        .take(MAX_WARNINGS)
        .map(|w| PluginText::cut(w, MAX_WARNING_BYTES))
        .collect()
}

/// A denial's reason: CamelCase ASCII letters, at most [`MAX_REASON_LEN`].
fn reason(reason: Option<String>) -> Result<String, String> {
    let Some(reason) = reason else {
        return Ok("Forbidden".to_owned());
    };
    let ok = !reason.is_empty()
        && reason.len() <= MAX_REASON_LEN
        && reason.as_bytes()[0].is_ascii_uppercase()
        && reason.bytes().all(|b| b.is_ascii_alphanumeric());
    if ok {
        Ok(reason)
    } else {
        Err(format!(
            "the plugin's denial has reason {}, which is not a status reason (CamelCase \
             letters and digits, at most {MAX_REASON_LEN})",
            wasmop_core::cluster::names::quote(&reason)
        ))
    }
}

/// Checks what the export returned; an error names the broken rule.
fn verdict(reviewed: Reviewed, original: Option<&Value>) -> Result<Verdict, String> {
    let denied = |d: wit::Denial| -> Result<Verdict, String> {
        let code = d.code.unwrap_or(403);
        if !(400..=599).contains(&code) {
            return Err(format!(
                "the plugin's denial has HTTP code {code}; a denial's code is 400 to 599"
            ));
        }
        Ok(Verdict::Denied {
            message: PluginText::cut(&d.message, MAX_MESSAGE_BYTES),
            reason: reason(d.reason)?,
            code,
            warnings: warnings(d.warnings),
        })
    };
    match reviewed {
        Reviewed::Validated(Ok(allowed)) => Ok(Verdict::Allowed {
            warnings: warnings(allowed.warnings),
            patch: None,
        }),
        Reviewed::Validated(Err(d)) | Reviewed::Mutated(Err(d)) => denied(d),
        Reviewed::Mutated(Ok(mutation)) => {
            let patch = match mutation.object {
                None => None,
                Some(text) => mutated(original, &text)?,
            };
            Ok(Verdict::Allowed {
                warnings: warnings(mutation.warnings),
                patch,
            })
        }
    }
}

/// The identity fields a mutation must keep: `apiVersion`, `kind`, `metadata.name` and
/// `metadata.namespace`.
fn identity(v: &Value) -> [Option<&Value>; 4] {
    [
        v.get("apiVersion"),
        v.get("kind"),
        v.pointer("/metadata/name"),
        v.pointer("/metadata/namespace"),
    ]
}

/// The JSON patch from `original` to the object a mutation returned, or `None` if it is the
/// same object.
fn mutated(original: Option<&Value>, text: &str) -> Result<Option<json_patch::Patch>, String> {
    let Some(original) = original else {
        return Err(
            "the plugin returned an object for a request without one (a delete or a \
                    connect cannot be mutated)"
                .into(),
        );
    };
    if text.len() > MAX_MUTATED_BYTES {
        return Err(format!(
            "the plugin's mutated object is {} bytes; at most {MAX_MUTATED_BYTES} are accepted",
            text.len()
        ));
    }
    let changed: Value = serde_json::from_str(text)
        .map_err(|e| format!("the plugin's mutated object is not valid JSON: {e}"))?;
    if !changed.is_object() {
        return Err("the plugin's mutated object is not a JSON object".into());
    }
    const FIELDS: [&str; 4] = ["apiVersion", "kind", "metadata.name", "metadata.namespace"];
    for ((field, before), after) in FIELDS
        .iter()
        .zip(identity(original))
        .zip(identity(&changed))
    {
        if before != after {
            return Err(format!(
                "the plugin's mutated object changes `{field}`; a mutation must keep the \
                 object's apiVersion, kind, name and namespace"
            ));
        }
    }
    let patch = json_patch::diff(original, &changed);
    Ok((!patch.0.is_empty()).then_some(patch))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn denial(code: Option<u16>, reason: Option<&str>) -> wit::Denial {
        wit::Denial {
            message: "no\nway".into(),
            reason: reason.map(Into::into),
            code,
            warnings: vec![],
        }
    }

    #[test]
    fn a_denial_is_escaped_and_defaults_to_forbidden() {
        let v = verdict(Reviewed::Validated(Err(denial(None, None))), None).expect("verdict");
        let Verdict::Denied {
            message,
            reason,
            code,
            ..
        } = v
        else {
            panic!("{v:?}")
        };
        assert_eq!(message.as_str(), "no\\nway");
        assert_eq!((reason.as_str(), code), ("Forbidden", 403));
    }

    #[test]
    fn a_denial_with_a_bad_code_or_reason_is_a_failure_naming_it() {
        let e = verdict(Reviewed::Validated(Err(denial(Some(200), None))), None).expect_err("200");
        assert!(e.contains("HTTP code 200"), "{e}");
        let e = verdict(
            Reviewed::Validated(Err(denial(None, Some("not a reason\n")))),
            None,
        )
        .expect_err("reason");
        assert!(
            e.contains("not a status reason") && !e.contains('\n'),
            "{e}"
        );
    }

    #[test]
    fn warnings_are_capped_cut_and_escaped() {
        let many: Vec<String> = (0..40).map(|i| format!("w{i}\u{1b}[31m")).collect();
        let w = warnings(many);
        assert_eq!(w.len(), MAX_WARNINGS);
        assert!(!w[0].as_str().contains('\u{1b}'), "{:?}", w[0]);
        let long = warnings(vec!["x".repeat(10_000)]);
        assert!(long[0].as_str().len() <= MAX_WARNING_BYTES + 64);
    }

    #[test]
    fn a_mutation_becomes_a_json_patch_and_must_keep_its_identity() {
        let original = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "n"}, "data": {"x": "1"}});
        let mut changed = original.clone();
        changed["data"]["y"] = json!("2");
        let patch = mutated(Some(&original), &changed.to_string())
            .expect("patch")
            .expect("changed");
        assert_eq!(
            serde_json::to_value(&patch).expect("json"),
            json!([{"op": "add", "path": "/data/y", "value": "2"}])
        );
        assert_eq!(mutated(Some(&original), &original.to_string()), Ok(None));
        let mut renamed = original.clone();
        renamed["metadata"]["name"] = json!("b");
        let e = mutated(Some(&original), &renamed.to_string()).expect_err("renamed");
        assert!(e.contains("`metadata.name`"), "{e}");
        let e = mutated(Some(&original), "[1]").expect_err("array");
        assert!(e.contains("not a JSON object"), "{e}");
        let e = mutated(None, "{}").expect_err("delete");
        assert!(e.contains("cannot be mutated"), "{e}");
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let e = mutated(Some(&original), &deep).expect_err("deep");
        assert!(e.contains("not valid JSON"), "{e}");
    }
}
