//! `wasmop:plugin/events`: Kubernetes Events on objects the plugin may read. Reason and
//! action are cut at 128 bytes and the note at 1024, as the WIT promises (and as the
//! events.k8s.io API would reject longer ones), and all three are escaped as every plugin
//! text is ([`PluginText`]).

use super::wit::events::{Event as WitEvent, EventType as WitEventType, Host};
use super::wit::types::KubeError;
use super::{from_wit_ref, ref_len, to_wit_error};
use crate::call::CallState;
use crate::wasi::cut;
use wasmop_core::cluster::{Event, EventType};
use wasmop_core::plugin::Verb;
use wasmop_core::plugin::text::PluginText;

/// Longest `reason` and `action` the Events API accepts.
const SHORT_FIELD_BYTES: usize = 128;
/// Longest `note` the Events API accepts.
const NOTE_BYTES: usize = 1024;

/// A plugin's Event text, escaped (`kubectl describe` shows it on the operator's terminal,
/// and the host's log quotes the reason) and within `cap` bytes before and after escaping.
/// An escape cut at the end shows as a partial escape, never as a raw character.
fn shown(text: &str, cap: usize) -> String {
    cut(PluginText::cut(text, cap).as_str(), cap).to_owned()
}

impl Host for CallState {
    async fn emit(&mut self, e: WitEvent) -> wasmtime::Result<Result<(), KubeError>> {
        let bytes = ref_len(&e.regarding) + e.reason.len() + e.action.len() + e.note.len();
        let cluster = self.host.begin("events.emit", bytes)?;
        let regarding = match from_wit_ref("regarding", e.regarding) {
            Ok(regarding) => regarding,
            Err(invalid) => return Ok(Err(to_wit_error(invalid))),
        };
        if let Err(denied) = self.host.authorize_as(
            "emit-event",
            Verb::Get,
            &regarding.kind.group,
            &regarding.kind.kind,
            regarding.namespace.as_deref(),
        ) {
            return Ok(Err(to_wit_error(denied)));
        }
        let event = Event {
            regarding,
            event_type: match e.event_type {
                WitEventType::Normal => EventType::Normal,
                WitEventType::Warning => EventType::Warning,
            },
            reason: shown(&e.reason, SHORT_FIELD_BYTES),
            action: shown(&e.action, SHORT_FIELD_BYTES),
            note: shown(&e.note, NOTE_BYTES),
        };
        Ok(cluster
            .emit_event(event, self.host.plugin())
            .await
            .map_err(to_wit_error))
    }
}
