//! A guest that exercises the SDK's host calls and error handling end to end: its config
//! (`{"scenario": "<name>"}`) picks what one reconcile of a ConfigMap does, and the golden
//! cases in `tests/cases/` pin the writes and outcomes the host sees. It depends on
//! `wasmop-guest` alone.

use std::collections::BTreeMap;
use std::time::Duration;

use wasmop_guest::k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use wasmop_guest::serde_json::{Value, json};
use wasmop_guest::{
    Action, Context, Error, Event, Info, Object, Patch, ReconcileError, Reconciler, owned_meta,
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
            // create returns the stored object; a second create is a conflict the plugin can
            // recognise and handle.
            "create-then-conflict" => {
                let secret = owned_secret(&cm)?;
                let stored = ctx.create(&secret)?.into_object()?;
                let second = ctx.create(&secret).expect_err("the secret exists now");
                let note = format!(
                    "stored {} has a uid: {}; second create is a conflict: {}",
                    stored.name(),
                    stored.metadata.uid.is_some(),
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
            // A kind the plugin did not declare: denied by the host, a permanent error.
            "undeclared-kind" => {
                ctx.get::<Namespace>(None, "default")?;
                Ok(Action::Done)
            }
            // A conflict through `?`: a retryable error.
            "conflict-is-retryable" => {
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
