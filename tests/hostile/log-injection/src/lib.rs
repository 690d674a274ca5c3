//! Hostile test plugin `log-injection`: puts newlines, carriage returns, ANSI escape
//! sequences, C1 controls, line and paragraph separators and bidi overrides into everything
//! of its own that the host may log, to forge log lines or rewrite the operator's terminal.
//! It reconciles the Targets labelled `wasmop.test/plugin=log-injection`. The variant is
//! picked by the target's name:
//! - `...error...`: returns a retryable error with the payload;
//! - `...permanent...`: returns a permanent error with the payload;
//! - `...trap...`: prints the payload to stderr and panics with it;
//! - `...print...`: prints the payload to stdout and stderr, and succeeds;
//! - `...event...`: emits an Event on its target with the payload in reason, action and
//!   note, and succeeds;
//! - `...deny...`: makes a denied call whose kind and namespace hold the payload (the host
//!   makes that a `denied` outcome quoting them), and returns its error;
//! - otherwise: makes [`LOG_CALLS`] `log` calls (one per level, the first twice), each
//!   holding the payload and the marker `log-injection line`, and succeeds.
//!
//! Written against the WIT directly (no SDK) so it depends only on the contract.

wit_bindgen::generate!({ path: "../../../wit", world: "plugin" });

use exports::wasmop::plugin::reconciler::{Action, Error, Guest, Request};
use wasmop::plugin::events::{self, Event, EventType};
use wasmop::plugin::kube;
use wasmop::plugin::log::{self, Level};
use wasmop::plugin::plugin_info::Info;
use wasmop::plugin::types::{Gvk, ObjectRef};

struct Plugin;

/// `log` calls of the default variant (the tests rely on it).
pub const LOG_CALLS: usize = 6;

/// Everything that could break a log line or a terminal: a forged text line and a forged
/// JSON line after a newline, a carriage return that overwrites the line, colours and a
/// cursor move, the 8-bit CSI and NEL, the line and paragraph separators, a right-to-left
/// override, an isolate and the direction marks, a tab, DEL, BEL and NUL.
const PAYLOAD: &str = "start\n2026-12-01T00:00:00.000000Z  INFO wasmop: forged line\r\
\u{1b}[31mred\u{1b}[0m\u{1b}[2A \u{9b}31m \u{85}nel \u{2028}ls\u{2029}ps \u{202e}desrever\u{202c} \
\u{2066}isolate\u{2069} \u{200e}\u{200f}\u{61c} tab\there del\u{7f} bel\u{7} nul\u{0}\n\
{\"level\":\"ERROR\",\"fields\":{\"message\":\"forged json\"}} end";

fn gvk(group: &str, version: &str, kind: &str) -> Gvk {
    Gvk {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
    }
}

impl Guest for Plugin {
    fn describe() -> Info {
        Info {
            name: "log-injection".into(),
            version: "0.1.0".into(),
            primary: gvk("wasmop.test", "v1", "Target"),
            primary_selector: Some("wasmop.test/plugin=log-injection".into()),
            owns: Vec::new(),
            watches: Vec::new(),
            finalizer: None,
            reconcile_on_metadata_change: false,
            permissions: Vec::new(),
        }
    }

    fn reconcile(req: Request) -> Result<Action, Error> {
        let name = req.target.name.as_str();
        if name.contains("error") {
            return Err(Error::Retryable(PAYLOAD.into()));
        }
        if name.contains("permanent") {
            return Err(Error::Permanent(PAYLOAD.into()));
        }
        if name.contains("trap") {
            eprintln!("{PAYLOAD}");
            panic!("{PAYLOAD}");
        }
        if name.contains("print") {
            println!("{PAYLOAD}");
            eprintln!("{PAYLOAD}");
            return Ok(Action::Done);
        }
        if name.contains("event") {
            let event = Event {
                regarding: req.target.clone(),
                event_type: EventType::Warning,
                reason: format!("Forged{PAYLOAD}"),
                action: format!("Act{PAYLOAD}"),
                note: PAYLOAD.into(),
            };
            return match events::emit(&event) {
                Ok(()) => Ok(Action::Done),
                Err(e) => Err(Error::Retryable(format!("event: {e:?}"))),
            };
        }
        if name.contains("deny") {
            let forged = ObjectRef {
                kind: gvk("", "v1", &format!("Secret{PAYLOAD}")),
                namespace: Some(format!("ns{PAYLOAD}")),
                name: "x".into(),
            };
            // A denial makes the outcome `denied` whatever the plugin returns; should the
            // host refuse the call as invalid instead, the error carries the payload on.
            return match kube::get(&forged) {
                Ok(_) => Ok(Action::Done),
                Err(e) => Err(Error::Retryable(format!("get: {e:?}"))),
            };
        }
        for level in [
            Level::Info,
            Level::Info,
            Level::Warn,
            Level::Error,
            Level::Debug,
            Level::Trace,
        ] {
            log::log(level, &format!("log-injection line: {PAYLOAD}"));
        }
        Ok(Action::Done)
    }

    fn cleanup(_req: Request) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

export!(Plugin);
