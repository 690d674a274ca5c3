//! Hostile test plugin `missing-export`: its reconciler lacks `cleanup`; the host must refuse to load it.
//! Written against the WIT directly (no SDK) so it depends only on the contract.

wit_bindgen::generate!({ path: "wit", world: "plugin" });

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
        name: "missing-export".into(),
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
}

export!(Plugin);
