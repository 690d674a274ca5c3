//! Hostile test plugin `unbounded-recursion`: recurses without end; must end in a stack-overflow trap.
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
        name: "unbounded-recursion".into(),
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
        // Only scalars, so every frame lives on the wasm stack (not Rust's shadow stack in
        // linear memory): the guest must hit the engine's stack limit. `n` comes from the
        // input, so the compiler cannot prove the recursion ends or remove it.
        #[inline(never)]
        fn down(n: u64) -> u64 {
            if n == 0 {
                return 0;
            }
            let next = n
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            // Two operations on the result: no accumulator form, so no loop in disguise.
            down(next).wrapping_mul(3).wrapping_add(n)
        }
        let _ = std::hint::black_box(down(req.object.len() as u64 + 1));
        Ok(Action::Done)
    }

    fn cleanup(_req: Request) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

export!(Plugin);
