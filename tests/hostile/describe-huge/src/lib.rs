//! Hostile test plugin `describe-huge`: a 48 MiB version (variant 0) or a 48 MiB name
//! (variant 1). Once, such a version made `/metrics` and `/status` 50 MB per request. The
//! host must refuse it at load, naming the field, without copying or logging it whole.
//! Written against the WIT directly.

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

/// How long the huge string is: 48 MiB.
const HUGE: usize = 48 << 20;

fn describe() -> Info {
    match variant(2) {
        0 => Info {
            version: "7".repeat(HUGE),
            ..valid("describe-huge")
        },
        _ => Info {
            name: "a".repeat(HUGE),
            ..valid("describe-huge")
        },
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
