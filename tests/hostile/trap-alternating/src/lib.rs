//! Hostile test plugin `trap-alternating`: traps on every other call of an object and ends
//! the calls between in another failure, so that a failure streak reset by anything but a
//! success would never reach its threshold. Every instance is fresh, so the plugin keeps its
//! count in the cluster: the ConfigMap `<target>-calls` (an owned kind) holds the number of
//! calls so far; a call reads it, writes it plus one, then fails. Odd calls (the 2nd, 4th,
//! ...) trap with a panic; the others, by the target's name:
//! - `...deny...`: make a denied host call (a Secret, which it does not declare) and return
//!   success, which the host turns into a `denied` outcome;
//! - `...breach...`: breach the per-call host-call cap (gets until the host traps it);
//! - `...permanent...`: return a permanent error;
//! - otherwise: return a retryable error.
//!
//! Written against the WIT directly (no SDK) so it depends only on the contract.

wit_bindgen::generate!({ path: "../../../wit", world: "plugin" });

use exports::wasmop::plugin::reconciler::{Action, Error, Guest, Request};
use wasmop::plugin::kube;
use wasmop::plugin::plugin_info::Info;
use wasmop::plugin::types::{Gvk, KubeError, ObjectRef};

struct Plugin;

fn gvk(group: &str, version: &str, kind: &str) -> Gvk {
    Gvk {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
    }
}

/// The number in `"n":"<digits>"` of the counter ConfigMap's JSON.
fn count(json: &str) -> u64 {
    let Some(at) = json.find("\"n\":\"") else {
        return 0;
    };
    json[at + 5..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or(0)
}

impl Guest for Plugin {
    fn describe() -> Info {
        Info {
            name: "trap-alternating".into(),
            version: "0.1.0".into(),
            primary: gvk("wasmop.test", "v1", "Target"),
            primary_selector: Some("wasmop.test/plugin=trap-alternating".into()),
            owns: vec![gvk("", "v1", "ConfigMap")],
            watches: Vec::new(),
            finalizer: None,
            reconcile_on_metadata_change: false,
            permissions: Vec::new(),
        }
    }

    fn reconcile(req: Request) -> Result<Action, Error> {
        let name = req.target.name.clone();
        let namespace = req.target.namespace.clone().unwrap_or_default();
        let counter = ObjectRef {
            kind: gvk("", "v1", "ConfigMap"),
            namespace: req.target.namespace.clone(),
            name: format!("{name}-calls"),
        };
        let calls = match kube::get(&counter) {
            Ok(json) => count(&json),
            Err(KubeError::NotFound(_)) => 0,
            Err(e) => return Err(Error::Retryable(format!("read the counter: {e:?}"))),
        };
        let written = format!(
            "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"{name}-calls\",\
             \"namespace\":\"{namespace}\"}},\"data\":{{\"n\":\"{}\"}}}}",
            calls + 1
        );
        kube::apply(&written).map_err(|e| Error::Retryable(format!("count: {e:?}")))?;
        if calls % 2 == 1 {
            panic!("call {} of {name} traps", calls + 1);
        }
        if name.contains("deny") {
            let secret = ObjectRef {
                kind: gvk("", "v1", "Secret"),
                namespace: req.target.namespace.clone(),
                name: "credentials".into(),
            };
            let _ = kube::get(&secret);
            return Ok(Action::Done);
        }
        if name.contains("breach") {
            loop {
                let _ = kube::get(&counter);
            }
        }
        let message = format!("call {} of {name} fails", calls + 1);
        if name.contains("permanent") {
            Err(Error::Permanent(message))
        } else {
            Err(Error::Retryable(message))
        }
    }

    fn cleanup(_req: Request) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

export!(Plugin);
