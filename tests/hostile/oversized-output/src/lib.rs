//! Hostile test plugin `oversized-output`: applies a 20 MiB object; must hit the host-bytes cap.
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
        name: "oversized-output".into(),
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
        let payload = "x".repeat(20 << 20);
        let mut object = String::with_capacity(payload.len() + 200);
        object.push_str("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"big\",\"namespace\":\"default\"},\"data\":{\"big\":\"");
        object.push_str(&payload);
        object.push_str("\"}}");
        drop(payload);
        let _ = wasmop::plugin::kube::apply(&object);
        Ok(Action::Done)
    }

    fn cleanup(_req: Request) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

export!(Plugin);
