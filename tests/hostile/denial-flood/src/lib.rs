//! Hostile test plugin `denial-flood`: every reconcile makes many host calls its grants do
//! not cover, then returns success (which the host turns into a `denied` outcome). Every
//! denied call must be counted, and the log must not get a line for each. It reconciles the
//! Targets labelled `wasmop.test/plugin=denial-flood`. The variant is picked by the target's
//! name:
//! - `...mixed...`: 25 rounds of four denied calls, `get`, `list` and `delete` of Secrets
//!   and an Event on a Secret (`emit-event`): 100 denied calls;
//! - `...count-N...` (e.g. `count-7`): N denied `get`s;
//! - otherwise: 50 denied `get`s of Secrets.
//!
//! Written against the WIT directly (no SDK) so it depends only on the contract.

wit_bindgen::generate!({ path: "../../../wit", world: "plugin" });

use exports::wasmop::plugin::reconciler::{Action, Error, Guest, Request};
use wasmop::plugin::events::{self, Event, EventType};
use wasmop::plugin::kube;
use wasmop::plugin::plugin_info::Info;
use wasmop::plugin::types::{Gvk, ObjectRef};

struct Plugin;

/// Denied calls of the default variant (the tests rely on it).
const DEFAULT_DENIALS: u32 = 50;

fn secret() -> Gvk {
    Gvk {
        group: "".into(),
        version: "v1".into(),
        kind: "Secret".into(),
    }
}

impl Guest for Plugin {
    fn describe() -> Info {
        Info {
            name: "denial-flood".into(),
            version: "0.1.0".into(),
            primary: Gvk {
                group: "wasmop.test".into(),
                version: "v1".into(),
                kind: "Target".into(),
            },
            primary_selector: Some("wasmop.test/plugin=denial-flood".into()),
            owns: Vec::new(),
            watches: Vec::new(),
            finalizer: None,
            reconcile_on_metadata_change: false,
            permissions: Vec::new(),
        }
    }

    fn reconcile(req: Request) -> Result<Action, Error> {
        let name = req.target.name.clone();
        let target = |i: u32| ObjectRef {
            kind: secret(),
            namespace: req.target.namespace.clone(),
            name: format!("secret-{i}"),
        };
        if name.contains("mixed") {
            for i in 0..25 {
                let _ = kube::get(&target(i));
                let _ = kube::list(&secret(), req.target.namespace.as_deref(), None);
                let _ = kube::delete(&target(i), &background());
                let _ = events::emit(&Event {
                    regarding: target(i),
                    event_type: EventType::Warning,
                    reason: "Flood".into(),
                    action: "Flood".into(),
                    note: "denied".into(),
                });
            }
            return Ok(Action::Done);
        }
        let n = name
            .split("count-")
            .nth(1)
            .and_then(|rest| {
                rest.chars()
                    .take_while(char::is_ascii_digit)
                    .collect::<String>()
                    .parse()
                    .ok()
            })
            .unwrap_or(DEFAULT_DENIALS);
        for i in 0..n {
            let _ = kube::get(&target(i));
        }
        Ok(Action::Done)
    }

    fn cleanup(_req: Request) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

export!(Plugin);

/// Background propagation and no preconditions: what 0.1's `delete` always did.
fn background() -> wasmop::plugin::kube::DeleteOptions {
    wasmop::plugin::kube::DeleteOptions {
        propagation: wasmop::plugin::kube::Propagation::Background,
        preconditions: wasmop::plugin::kube::Preconditions {
            uid: None,
            resource_version: None,
        },
        grace_period_seconds: None,
    }
}
