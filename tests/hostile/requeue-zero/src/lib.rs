//! Hostile test plugin `requeue-zero`: every reconcile succeeds and asks to be requeued at
//! once, `requeue-after(0)`, or after 1 ms for a target whose name contains `1ms`. Without a
//! floor and a per-object rate limit it spins the host. It reconciles the Targets labelled
//! `wasmop.test/plugin=requeue-zero`, so that a test can run it beside other plugins.
//! Written against the WIT directly (no SDK) so it depends only on the contract.

wit_bindgen::generate!({ path: "../../../wit", world: "plugin" });

use exports::wasmop::plugin::reconciler::{Action, Error, Guest, Request};
use wasmop::plugin::plugin_info::Info;
use wasmop::plugin::types::Gvk;

struct Plugin;

impl Guest for Plugin {
    fn describe() -> Info {
        Info {
            name: "requeue-zero".into(),
            version: "0.1.0".into(),
            primary: Gvk {
                group: "wasmop.test".into(),
                version: "v1".into(),
                kind: "Target".into(),
            },
            primary_selector: Some("wasmop.test/plugin=requeue-zero".into()),
            owns: Vec::new(),
            watches: Vec::new(),
            finalizer: None,
            reconcile_on_metadata_change: false,
            permissions: Vec::new(),
        }
    }

    fn reconcile(req: Request) -> Result<Action, Error> {
        if req.target.name.contains("1ms") {
            Ok(Action::RequeueAfter(1))
        } else {
            Ok(Action::RequeueAfter(0))
        }
    }

    fn cleanup(_req: Request) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

export!(Plugin);
