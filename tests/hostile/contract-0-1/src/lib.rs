//! A healthy test plugin built against the FROZEN 0.1 contract (`wit/0.1.0/`), as plugins
//! were before 0.2: the host must keep loading and running it unchanged, beside 0.2 plugins.
//! Written against the WIT directly (no SDK, which follows the current contract).
//!
//! On reconcile it reads its target, creates an owned ConfigMap `<name>-v01` with the 0.1
//! `create` (the second time, that ConfigMap exists: 0.1 promised `conflict` for that, where
//! 0.2 says `already-exists`), and records what it saw in the target's status:
//! `{"contract": "0.1", "create": "created" | "conflict" | <other>, "mirrored": <spec.value>}`.
//! It also emits an Event and logs. `cleanup` deletes the ConfigMap with the 0.1 `delete`.

wit_bindgen::generate!({ path: "../../../wit/0.1.0", world: "plugin" });

use exports::wasmop::plugin::reconciler::{Action, Error, Guest, Request};
use wasmop::plugin::events::{self, Event, EventType};
use wasmop::plugin::kube::{self, PatchBody};
use wasmop::plugin::log;
use wasmop::plugin::plugin_info::{Info, Watch};
use wasmop::plugin::types::{Gvk, KubeError, ObjectRef};

struct Plugin;

fn gvk(group: &str, version: &str, kind: &str) -> Gvk {
    Gvk {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
    }
}

/// Pulls `"key": "<string>"` out of flat JSON without a JSON library, keeping this guest tiny.
fn field<'a>(json: &'a str, key: &str) -> Option<&'a str> {
    let start = json.find(&format!("\"{key}\":\""))? + key.len() + 4;
    json[start..].split('"').next()
}

fn copy_of(req: &Request) -> ObjectRef {
    ObjectRef {
        kind: gvk("", "v1", "ConfigMap"),
        namespace: req.target.namespace.clone(),
        name: format!("{}-v01", req.target.name),
    }
}

impl Guest for Plugin {
    fn describe() -> Info {
        Info {
            name: "contract-0-1".into(),
            version: "0.1.0".into(),
            primary: gvk("wasmop.test", "v1", "Target"),
            primary_selector: Some("contract=v01".into()),
            owns: vec![gvk("", "v1", "ConfigMap")],
            watches: Vec::<Watch>::new(),
            finalizer: None,
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
        let copy = format!(
            "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"{name}-v01\",\
             \"namespace\":\"{namespace}\",\"ownerReferences\":[{{\"apiVersion\":\"wasmop.test/v1\",\
             \"kind\":\"Target\",\"name\":\"{name}\",\"uid\":\"{uid}\",\"controller\":true}}]}},\
             \"data\":{{\"value\":\"{value}\"}}}}"
        );
        let created = match kube::create(&copy) {
            Ok(_) => "created".to_owned(),
            Err(KubeError::Conflict(_)) => "conflict".to_owned(),
            Err(other) => format!("{other:?}").chars().take(40).collect(),
        };
        let status = format!(
            "{{\"status\":{{\"contract\":\"0.1\",\"create\":{created:?},\"mirrored\":\"{value}\"}}}}"
        );
        kube::patch_status(&req.target, &PatchBody::Merge(status))
            .map_err(|e| Error::Retryable(format!("status: {e:?}")))?;
        events::emit(&Event {
            regarding: req.target.clone(),
            event_type: EventType::Normal,
            reason: "Copied".into(),
            action: "Create".into(),
            note: format!("0.1 plugin: {created}"),
        })
        .map_err(|e| Error::Retryable(format!("event: {e:?}")))?;
        log::log(
            log::Level::Info,
            &format!("0.1 plugin reconciled {name}: {created}"),
        );
        Ok(Action::Done)
    }

    fn cleanup(req: Request) -> Result<Action, Error> {
        kube::delete(&copy_of(&req)).map_err(|e| Error::Retryable(format!("delete: {e:?}")))?;
        Ok(Action::Done)
    }
}

export!(Plugin);
