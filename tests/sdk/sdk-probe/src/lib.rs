//! A guest that exercises the SDK's host calls and error handling end to end: its config
//! (`{"scenario": "<name>"}`) picks what one reconcile of a ConfigMap does, and the golden
//! cases in `tests/cases/` pin the writes and outcomes the host sees. It depends on
//! `wasmop-guest` alone.

use std::collections::BTreeMap;
use std::time::Duration;

use wasmop_guest::k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use wasmop_guest::serde_json::{Value, json};
use wasmop_guest::{
    Action, Context, DeleteOptions, Error, Event, Info, Object, Patch, ReconcileError, Reconciler,
    owned_meta,
};

struct Probe;

impl Reconciler for Probe {
    type Object = ConfigMap;

    fn describe() -> Info {
        Info::new("sdk-probe", env!("CARGO_PKG_VERSION")).owns::<Secret>()
    }

    fn reconcile(cm: ConfigMap, ctx: &Context) -> Result<Action, ReconcileError> {
        let config: Value = ctx.config()?;
        let namespace = cm.namespace();
        match config["scenario"].as_str().unwrap_or_default() {
            // create returns the stored object; a second create is `already-exists` (not a
            // lost race), which the plugin can recognise and handle.
            "create-then-already-exists" => {
                let secret = owned_secret(&cm)?;
                let stored = ctx.create(&secret)?.into_object()?;
                let second = ctx.create(&secret).expect_err("the secret exists now");
                let note = format!(
                    "stored {} has a uid: {}; second create already exists: {}, is a conflict: {}",
                    stored.name(),
                    stored.metadata.uid.is_some(),
                    second.is_already_exists(),
                    second.is_conflict()
                );
                ctx.event(&cm, Event::normal("Probed", "Create", note))?;
                Ok(Action::RequeueAfter(Duration::from_millis(1500)))
            }
            // Each patch type reaches the host as itself.
            "patch-types" => {
                let name = cm.name();
                ctx.patch::<ConfigMap>(
                    namespace,
                    name,
                    &Patch::Merge(json!({"metadata": {"labels": {"patched-by": "merge"}}})),
                )?;
                ctx.patch::<ConfigMap>(
                    namespace,
                    name,
                    &Patch::Json(json!([{"op": "add", "path": "/data/json", "value": "added"}])),
                )?;
                let patched: ConfigMap = ctx
                    .patch(
                        namespace,
                        name,
                        &Patch::Strategic(json!({"data": {"strategic": "added"}})),
                    )?
                    .into_object()?;
                let keys = patched
                    .data
                    .unwrap_or_default()
                    .into_keys()
                    .collect::<Vec<_>>()
                    .join(",");
                ctx.event(
                    &cm,
                    Event::normal(
                        "Probed",
                        "Patch",
                        format!("data keys after the patches: {keys}"),
                    ),
                )?;
                Ok(Action::Done)
            }
            // A missing object is `None`, not an error.
            "get-missing" => {
                let missing = ctx.get::<Secret>(namespace, "absent")?;
                ctx.event(
                    &cm,
                    Event::normal(
                        "Probed",
                        "Get",
                        format!("absent secret is none: {}", missing.is_none()),
                    ),
                )?;
                Ok(Action::Done)
            }
            // list with a selector, then delete what it found.
            "list-and-delete" => {
                let doomed = ctx.list::<Secret>(namespace, Some("probe=doomed"))?;
                for secret in &doomed {
                    ctx.delete::<Secret>(secret.namespace(), secret.name())?;
                }
                ctx.event(
                    &cm,
                    Event::warning(
                        "Probed",
                        "Delete",
                        format!("deleted {} secrets", doomed.len()),
                    ),
                )?;
                Ok(Action::Done)
            }
            // Only the Secrets this ConfigMap owns, from the host's owner index.
            "list-owned" => {
                let mut owned: Vec<String> = ctx
                    .list_owned::<Secret, _>(&cm)?
                    .iter()
                    .map(|s| s.name().to_owned())
                    .collect();
                owned.sort();
                ctx.event(
                    &cm,
                    Event::normal("Probed", "List", format!("owned: {}", owned.join(","))),
                )?;
                Ok(Action::Done)
            }
            // A write guarded by the resourceVersion read: the first applies, the second (from
            // the same, now stale, read) is a conflict; the status write from it too.
            "guarded-writes" => {
                let label = Patch::Merge(json!({"metadata": {"labels": {"guarded": "yes"}}}));
                ctx.patch_if_unchanged(&cm, &label)?;
                let again = ctx.patch_if_unchanged(&cm, &label).expect_err("stale");
                let status = json!({"seen": "stale"});
                let status = ctx
                    .update_status_if_unchanged(&cm, &status)
                    .expect_err("stale");
                let note = format!(
                    "stale patch is a conflict: {}; stale status is a conflict: {}",
                    again.is_conflict(),
                    status.is_conflict()
                );
                ctx.event(&cm, Event::normal("Probed", "Patch", note))?;
                Ok(Action::Done)
            }
            // Delete with options: a wrong uid precondition deletes nothing; orphaning keeps
            // the dependents.
            "delete-options" => {
                let wrong = DeleteOptions::new().uid("not-the-uid");
                let refused = ctx
                    .delete_with::<Secret>(namespace, "keep", &wrong)
                    .expect_err("the uid differs");
                let keep = ctx.get::<Secret>(namespace, "keep")?;
                let kept = keep.is_some();
                if let Some(keep) = keep {
                    let exact = DeleteOptions::orphan().if_unchanged(&keep)?;
                    ctx.delete_with::<Secret>(namespace, "keep", &exact)?;
                }
                let note = format!(
                    "wrong uid is a conflict: {}; kept: {kept}; gone now: {}",
                    refused.is_conflict(),
                    ctx.get::<Secret>(namespace, "keep")?.is_none()
                );
                ctx.event(&cm, Event::warning("Probed", "Delete", note))?;
                Ok(Action::Done)
            }
            // A kind the plugin did not declare: denied by the host, a permanent error.
            "undeclared-kind" => {
                ctx.get::<Namespace>(None, "default")?;
                Ok(Action::Done)
            }
            // An existing object through `?`: a retryable error.
            "already-exists-is-retryable" => {
                ctx.create(&owned_secret(&cm)?)?;
                Ok(Action::Done)
            }
            // A namespaced kind without a namespace: caught by the SDK before any host call.
            "missing-namespace" => {
                ctx.get::<Secret>(None, "anything")?;
                Ok(Action::Done)
            }
            // The plugin's own failure, as the author words it.
            "own-error" => Err(ReconcileError::retryable(
                "the upstream registry is not reachable yet",
            )),
            other => Err(ReconcileError::permanent(format!(
                "unknown scenario {other:?}"
            ))),
        }
    }
}

fn owned_secret(cm: &ConfigMap) -> Result<Secret, Error> {
    Ok(Secret {
        metadata: owned_meta(cm, format!("{}-secret", cm.name()))?,
        string_data: Some(BTreeMap::from([("token".to_owned(), "s3cr3t".to_owned())])),
        ..Secret::default()
    })
}

wasmop_guest::export!(Probe);
