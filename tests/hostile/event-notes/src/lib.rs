//! Test plugin `event-notes`: for each Target labelled `wasmop.test/plugin=event-notes`, emits
//! Events that differ only in their note, as a CronJob-like controller does (one
//! `SuccessfulCreate` per Job it creates): first `repeats` Events with the one note
//! `the same note` (default 3), then `distinct` Events with the notes `created job <name>-<i>`
//! for i from 0 (default 12), all with reason `SuccessfulCreate` and action `Create`. Both
//! counts come from its settings (`{"distinct": N, "repeats": M}`). It then logs
//! `emitted <n> events for <name> at resourceVersion <rv>` (the version of the object it was
//! given) and succeeds. It writes nothing, so nothing it does triggers it again.
//!
//! Written against the WIT directly (no SDK) so it depends only on the contract.

wit_bindgen::generate!({ path: "../../../wit", world: "plugin" });

use exports::wasmop::plugin::reconciler::{Action, Error, Guest, Request};
use wasmop::plugin::config;
use wasmop::plugin::events::{self, Event, EventType};
use wasmop::plugin::log::{self, Level};
use wasmop::plugin::plugin_info::Info;
use wasmop::plugin::types::Gvk;

struct Plugin;

/// The note every repeated Event carries.
pub const SAME_NOTE: &str = "the same note";

/// Pulls `"key": "<string>"` or `"key": <number>` out of flat JSON without a JSON library,
/// keeping this guest tiny.
fn field<'a>(json: &'a str, key: &str) -> Option<&'a str> {
    let start = json.find(&format!("\"{key}\":"))? + key.len() + 3;
    let rest = json[start..].trim_start();
    if let Some(s) = rest.strip_prefix('"') {
        return s.split('"').next();
    }
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

fn count(settings: &str, key: &str, default: u32) -> u32 {
    field(settings, key)
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

impl Guest for Plugin {
    fn describe() -> Info {
        Info {
            name: "event-notes".into(),
            version: "0.1.0".into(),
            primary: Gvk {
                group: "wasmop.test".into(),
                version: "v1".into(),
                kind: "Target".into(),
            },
            primary_selector: Some("wasmop.test/plugin=event-notes".into()),
            owns: Vec::new(),
            watches: Vec::new(),
            finalizer: None,
            reconcile_on_metadata_change: false,
            permissions: Vec::new(),
        }
    }

    fn reconcile(req: Request) -> Result<Action, Error> {
        let settings = config::get();
        let repeats = count(&settings, "repeats", 3);
        let distinct = count(&settings, "distinct", 12);
        let name = req.target.name.clone();
        let notes = (0..repeats)
            .map(|_| SAME_NOTE.to_owned())
            .chain((0..distinct).map(|i| format!("created job {name}-{i}")));
        for note in notes {
            events::emit(&Event {
                regarding: req.target.clone(),
                event_type: EventType::Normal,
                reason: "SuccessfulCreate".into(),
                action: "Create".into(),
                note,
            })
            .map_err(|e| Error::Retryable(format!("event: {e:?}")))?;
        }
        let version = field(&req.object, "resourceVersion").unwrap_or("none");
        log::log(
            Level::Info,
            &format!(
                "emitted {} events for {name} at resourceVersion {version}",
                repeats + distinct
            ),
        );
        Ok(Action::Done)
    }

    fn cleanup(_req: Request) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

export!(Plugin);
