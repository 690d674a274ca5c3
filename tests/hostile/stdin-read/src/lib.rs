//! Reads its stdin to the end in each reconcile and logs how many bytes it got and the first
//! of them. A plugin gets no stdin (WASI with no authority); under `wasmop dev`, a dev
//! build's calls read the sources it carries. The runtime's tests append such sources to this
//! component and check both.

wit_bindgen::generate!({ path: "../../../wit", world: "plugin" });

use std::io::Read as _;

use exports::wasmop::plugin::reconciler::{Action, Error, Guest, Request};
use wasmop::plugin::log;
use wasmop::plugin::plugin_info::Info;
use wasmop::plugin::types::Gvk;

struct Plugin;

impl Guest for Plugin {
    fn describe() -> Info {
        Info {
            name: "stdin-read".into(),
            version: "0.1.0".into(),
            primary: Gvk {
                group: "wasmop.test".into(),
                version: "v1".into(),
                kind: "Target".into(),
            },
            primary_selector: None,
            owns: Vec::new(),
            watches: Vec::new(),
            finalizer: None,
            reconcile_on_metadata_change: false,
            permissions: Vec::new(),
        }
    }

    fn reconcile(_req: Request) -> Result<Action, Error> {
        let mut got = Vec::new();
        let read = std::io::stdin().read_to_end(&mut got);
        let head = String::from_utf8_lossy(&got[..got.len().min(32)]).into_owned();
        log::log(
            log::Level::Info,
            &format!("stdin: {} bytes ({read:?}): {head}", got.len()),
        );
        Ok(Action::Done)
    }

    fn cleanup(_req: Request) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

export!(Plugin);
