//! Hostile test plugin `describe-loop`: loops forever in `describe`. Once, three of these
//! held the host's load slots for the call deadline while a healthy plugin's reload waited.
//! The host must end it at its describe deadline and load others meanwhile. Written against
//! the WIT directly.

wit_bindgen::generate!({ path: "../../../wit", world: "plugin" });

use exports::wasmop::plugin::reconciler::{Action, Error, Guest, Request};
use wasmop::plugin::plugin_info::{Info, Mapping, Permission, Verb, Watch};
use wasmop::plugin::types::Gvk;

struct Plugin;

fn gvk(group: &str, version: &str, kind: &str) -> Gvk {
    Gvk {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
    }
}

/// A valid declaration the attack then spoils.
fn valid(name: &str) -> Info {
    Info {
        name: name.into(),
        version: "0.1.0".into(),
        primary: gvk("wasmop.test", "v1", "Target"),
        primary_selector: None,
        owns: vec![gvk("", "v1", "ConfigMap")],
        watches: Vec::new(),
        finalizer: None,
        reconcile_on_metadata_change: false,
        permissions: Vec::new(),
    }
}

/// Which variant to play: the wall clock's seconds modulo `n` (`describe` has no input; the
/// runtime tests pick one with the runtime's fixed clock, the e2e test gets whichever the
/// time says, and every variant must be refused).
#[allow(dead_code)]
fn variant(n: u64) -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        % n
}

fn describe() -> Info {
    let mut n: u64 = 0;
    loop {
        n = std::hint::black_box(n.wrapping_add(1));
        if std::hint::black_box(n) == 0 {
            return valid("describe-loop");
        }
    }
}

#[allow(dead_code)]
fn unused(_: Mapping, _: Verb, _: Watch, _: Permission) {}

impl Guest for Plugin {
    fn describe() -> Info {
        describe()
    }

    fn reconcile(_req: Request) -> Result<Action, Error> {
        Ok(Action::Done)
    }

    fn cleanup(_req: Request) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

export!(Plugin);
