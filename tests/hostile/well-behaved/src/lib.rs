//! A healthy test plugin, written against the WIT directly (no SDK) so the runtime's tests do
//! not depend on the SDK: it reads its target and settings, applies an owned ConfigMap
//! `<name>-mirror` carrying the target's `spec.value`, patches the target's status, emits an
//! Event and logs. With `{"requeueMs": N}` in its settings it asks to be requeued.

wit_bindgen::generate!({ path: "../../../wit", world: "plugin" });

use exports::wasmop::plugin::reconciler::{Action, Error, Guest, Request};
use wasmop::plugin::events::{self, Event, EventType};
use wasmop::plugin::kube::{self, PatchBody};
use wasmop::plugin::plugin_info::{Info, Mapping, Watch};
use wasmop::plugin::types::Gvk;
use wasmop::plugin::{config, log};

struct Plugin;

fn gvk(group: &str, version: &str, kind: &str) -> Gvk {
    Gvk {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
    }
}

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

impl Guest for Plugin {
    fn describe() -> Info {
        Info {
            name: "well-behaved".into(),
            version: "0.1.0".into(),
            primary: gvk("wasmop.test", "v1", "Target"),
            primary_selector: None,
            owns: vec![gvk("", "v1", "ConfigMap")],
            watches: vec![Watch {
                kind: gvk("", "v1", "Namespace"),
                selector: None,
                mapping: Mapping::All,
            }],
            finalizer: Some("wasmop.test/cleanup".into()),
            reconcile_on_metadata_change: false,
            permissions: Vec::new(),
        }
    }

    fn reconcile(req: Request) -> Result<Action, Error> {
        let current =
            kube::get(&req.target).map_err(|e| Error::Retryable(format!("get: {e:?}")))?;
        let value = field(&current, "value").unwrap_or("none").to_string();
        let uid = field(&current, "uid").unwrap_or("").to_string();
        let name = &req.target.name;
        let namespace = req.target.namespace.clone().unwrap_or_default();
        let mirror = format!(
            "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"{name}-mirror\",\
             \"namespace\":\"{namespace}\",\"ownerReferences\":[{{\"apiVersion\":\"wasmop.test/v1\",\
             \"kind\":\"Target\",\"name\":\"{name}\",\"uid\":\"{uid}\",\"controller\":true}}]}},\
             \"data\":{{\"value\":\"{value}\"}}}}"
        );
        kube::apply(&mirror).map_err(|e| Error::Retryable(format!("apply: {e:?}")))?;
        let status = format!("{{\"status\":{{\"mirrored\":\"{value}\"}}}}");
        kube::patch_status(&req.target, &PatchBody::Merge(status), None)
            .map_err(|e| Error::Retryable(format!("status: {e:?}")))?;
        events::emit(&Event {
            regarding: req.target.clone(),
            event_type: EventType::Normal,
            reason: "Mirrored".into(),
            action: "Apply".into(),
            note: format!("mirrored value {value}"),
        })
        .map_err(|e| Error::Retryable(format!("event: {e:?}")))?;
        log::log(log::Level::Info, &format!("mirrored {name}"));
        match field(&config::get(), "requeueMs").and_then(|n| n.parse().ok()) {
            Some(ms) => Ok(Action::RequeueAfter(ms)),
            None => Ok(Action::Done),
        }
    }

    fn cleanup(req: Request) -> Result<Action, Error> {
        let mirror = wasmop::plugin::types::ObjectRef {
            kind: gvk("", "v1", "ConfigMap"),
            namespace: req.target.namespace.clone(),
            name: format!("{}-mirror", req.target.name),
        };
        kube::delete(&mirror, &background())
            .map_err(|e| Error::Retryable(format!("delete: {e:?}")))?;
        Ok(Action::Done)
    }
}

export!(Plugin);

/// Background propagation and no preconditions: what 0.1's `delete` always did.
fn background() -> wasmop::plugin::kube::DeleteOptions {
    wasmop::plugin::kube::DeleteOptions {
        propagation: wasmop::plugin::kube::Propagation::Background,
        preconditions: wasmop::plugin::kube::Preconditions {
            uid: None,
            resource_version: None,
        },
        grace_period_seconds: None,
    }
}
