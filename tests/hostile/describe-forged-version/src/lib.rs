//! Hostile test plugin `describe-forged-version`: its version is built to forge what shows
//! it — a `"}` and newline that end the `wasmop_plugin_info` series and start a forged
//! `# HELP` and metric line (with a forged digest), a carriage return and a newline that
//! forge a `wasmop status` row, ANSI escape sequences that clear the screen and recolour,
//! bidi controls that reorder what a reader sees. The host must refuse it at load, naming
//! `version`. Written against the WIT directly.

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

/// The forged version.
pub const FORGED: &str = "1.0.0\",digest=\"sha256:forged\"} 1\n# HELP wasmop_forged_total forged\n# TYPE wasmop_forged_total counter\nwasmop_forged_total 1\nwasmop_plugin_info{plugin=\"x\r\nother  9.9.9  sha256:forged  running  0  0\n\u{1b}[2J\u{1b}[31m\u{202e}\u{2066}lmao\u{2069}";

fn describe() -> Info {
    Info {
        version: FORGED.into(),
        ..valid("describe-forged-version")
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
