//! Hostile test plugin `self-trigger`: with `reconcile-on-metadata-change`, every reconcile
//! writes its own primary object, so the watch event of that write triggers the next
//! reconcile at once: without a per-object rate limit, each object is reconciled as fast as
//! the API server answers. It reconciles the Targets labelled
//! `wasmop.test/plugin=self-trigger`. The variant is picked by the target's name:
//! - `...annotation...`: a merge patch setting the annotation `wasmop.test/tick`;
//! - `...status...`: a status patch setting `status.tick`;
//! - otherwise: a merge patch setting the label `wasmop.test/tick`.
//!
//! Each write sets a new value (the previous one plus one, read from the request), so every
//! write is a real change that produces a watch event. Written against the WIT directly.

wit_bindgen::generate!({ path: "../../../wit", world: "plugin" });

use exports::wasmop::plugin::reconciler::{Action, Error, Guest, Request};
use wasmop::plugin::kube::{self, PatchBody};
use wasmop::plugin::plugin_info::Info;
use wasmop::plugin::types::Gvk;

struct Plugin;

/// The number after `"wasmop.test/tick":"` (or `"tick":`) in the object's JSON, 0 if none.
fn tick(json: &str, key: &str) -> u64 {
    let Some(at) = json.find(key) else { return 0 };
    json[at + key.len()..]
        .trim_start_matches(['"', ':'])
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or(0)
}

impl Guest for Plugin {
    fn describe() -> Info {
        Info {
            name: "self-trigger".into(),
            version: "0.1.0".into(),
            primary: Gvk {
                group: "wasmop.test".into(),
                version: "v1".into(),
                kind: "Target".into(),
            },
            primary_selector: Some("wasmop.test/plugin=self-trigger".into()),
            owns: Vec::new(),
            watches: Vec::new(),
            finalizer: None,
            reconcile_on_metadata_change: true,
            permissions: Vec::new(),
        }
    }

    fn reconcile(req: Request) -> Result<Action, Error> {
        let name = &req.target.name;
        let result = if name.contains("status") {
            let next = tick(&req.object, "\"tick\"") + 1;
            kube::patch_status(
                &req.target,
                &PatchBody::Merge(format!("{{\"status\":{{\"tick\":{next}}}}}")),
                None,
            )
        } else {
            let field = if name.contains("annotation") {
                "annotations"
            } else {
                "labels"
            };
            let next = tick(&req.object, "\"wasmop.test/tick\"") + 1;
            kube::patch(
                &req.target,
                &PatchBody::Merge(format!(
                    "{{\"metadata\":{{\"{field}\":{{\"wasmop.test/tick\":\"{next}\"}}}}}}"
                )),
                None,
            )
        };
        result.map_err(|e| Error::Retryable(format!("patch: {e:?}")))?;
        Ok(Action::Done)
    }

    fn cleanup(_req: Request) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

export!(Plugin);
