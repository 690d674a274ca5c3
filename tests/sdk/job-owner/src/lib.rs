//! Finds the Jobs its ConfigMap owns, the two ways a controller can: `{"mode": "list"}` lists
//! every Job of the namespace, decodes each (PodSpec included) and keeps those whose owner
//! references name the ConfigMap, as a controller-runtime port without an owner index must;
//! `{"mode": "owned"}` asks the host with `list-owned`. Either way it checks it found
//! `{"expect": N}` Jobs, so a benchmark cannot time a call that did less. For the dispatch
//! benchmark (`cargo bench -p wasmop-runtime --bench dispatch`).

use wasmop_guest::k8s_openapi::api::batch::v1::Job;
use wasmop_guest::k8s_openapi::api::core::v1::ConfigMap;
use wasmop_guest::serde_json::Value;
use wasmop_guest::{Action, Context, Info, Object, ReconcileError, Reconciler};

struct JobOwner;

impl Reconciler for JobOwner {
    type Object = ConfigMap;

    fn describe() -> Info {
        Info::new("job-owner", env!("CARGO_PKG_VERSION")).owns::<Job>()
    }

    fn reconcile(cm: ConfigMap, ctx: &Context) -> Result<Action, ReconcileError> {
        let config: Value = ctx.config()?;
        let uid = cm.metadata.uid.clone().unwrap_or_default();
        let jobs: Vec<Job> = match config["mode"].as_str() {
            Some("owned") => ctx.list_owned::<Job, _>(&cm)?,
            Some("list") => ctx
                .list::<Job>(cm.namespace(), None)?
                .into_iter()
                .filter(|job| {
                    job.metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|r| r.uid == uid)
                })
                .collect(),
            other => {
                return Err(ReconcileError::permanent(format!(
                    "mode must be \"list\" or \"owned\", not {other:?}"
                )));
            }
        };
        let expected = config["expect"].as_u64().unwrap_or(0);
        if jobs.len() as u64 != expected {
            return Err(ReconcileError::permanent(format!(
                "found {} owned Jobs, expected {expected}",
                jobs.len()
            )));
        }
        Ok(Action::Done)
    }
}

wasmop_guest::export!(JobOwner);
