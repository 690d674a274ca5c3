//! Test plugin `noop`: returns `done` at once, so a benchmark can measure the fixed cost of
//! a call (instantiate, call, tear down) apart from any guest work.
//! Written against the WIT directly (no SDK) so it depends only on the contract.

wit_bindgen::generate!({ path: "../../../wit", world: "plugin" });

use exports::wasmop::plugin::reconciler::{Action, Error, Guest, Request};
use wasmop::plugin::plugin_info::{Info, Mapping, Permission, Verb, Watch};
use wasmop::plugin::types::{Gvk, ObjectRef};

struct Plugin;

fn gvk(group: &str, version: &str, kind: &str) -> Gvk {
    Gvk {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
    }
}

fn info() -> Info {
    Info {
        name: "noop".into(),
        version: "0.1.0".into(),
        primary: gvk("wasmop.test", "v1", "Target"),
        primary_selector: None,
        owns: vec![gvk("", "v1", "ConfigMap")],
        watches: Vec::<Watch>::new(),
        finalizer: None,
        reconcile_on_metadata_change: false,
        permissions: Vec::<Permission>::new(),
    }
}

#[allow(dead_code)]
fn unused(_: Mapping, _: Verb, _: ObjectRef) {}

impl Guest for Plugin {
    fn describe() -> Info {
        info()
    }

    fn reconcile(req: Request) -> Result<Action, Error> {
        let _ = req;
        Ok(Action::Done)
    }

    fn cleanup(_req: Request) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

export!(Plugin);
