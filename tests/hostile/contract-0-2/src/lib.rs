//! A test plugin using what the 0.2 contract adds, written against the WIT directly (the
//! frozen `wit/0.2.0/`), for the runtime and end-to-end tests that run it beside the 0.1 one
//! and prove that a 0.2 component keeps loading unchanged beside 0.3 ones.
//!
//! On reconcile of a Target (those labelled `contract=v02`) it:
//! 1. creates an owned ConfigMap `<name>-v02`: `created`, or `already-exists` on later
//!    reconciles (0.1 says `conflict` there);
//! 2. lists the ConfigMaps its Target owns with `list-owned` (from the host's owner index);
//! 3. patches its status guarded by a resourceVersion that is certainly stale (`1`), which
//!    must fail with `conflict`;
//! 4. deletes the ConfigMap `<name>-gone` with a uid precondition that does not hold, which
//!    must fail with `conflict` and delete nothing;
//! 5. writes what it saw to `status`, guarded by the resourceVersion it read in 1:
//!    `{"contract": "0.2", "create": .., "owned": "a,b", "stale": .., "precondition": ..}`.
//!
//! A failed guarded write of 5 (someone changed the Target meanwhile) is retryable.

wit_bindgen::generate!({ path: "../../../wit/0.2.0", world: "plugin" });

use exports::wasmop::plugin::reconciler::{Action, Error, Guest, Request};
use wasmop::plugin::kube::{self, DeleteOptions, PatchBody, Preconditions, Propagation};
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

/// The first `"key":"<string>"` in `json`, without a JSON library (objects as the host hands
/// them over name `metadata.name` first).
fn field<'a>(json: &'a str, key: &str) -> Option<&'a str> {
    let start = json.find(&format!("\"{key}\":\""))? + key.len() + 4;
    json[start..].split('"').next()
}

fn config_map(req: &Request, name: String) -> ObjectRef {
    ObjectRef {
        kind: gvk("", "v1", "ConfigMap"),
        namespace: req.target.namespace.clone(),
        name,
    }
}

/// The case of an error, as the status reports it.
fn case<T>(result: &Result<T, KubeError>, ok: &str) -> String {
    match result {
        Ok(_) => ok.into(),
        Err(KubeError::NotFound(_)) => "not-found".into(),
        Err(KubeError::Conflict(_)) => "conflict".into(),
        Err(KubeError::AlreadyExists(_)) => "already-exists".into(),
        Err(KubeError::Forbidden(_)) => "forbidden".into(),
        Err(KubeError::Denied(_)) => "denied".into(),
        Err(KubeError::Invalid(_)) => "invalid".into(),
        Err(KubeError::Unavailable(_)) => "unavailable".into(),
        Err(KubeError::Other(_)) => "other".into(),
    }
}

impl Guest for Plugin {
    fn describe() -> Info {
        Info {
            name: "contract-0-2".into(),
            version: "0.2.0".into(),
            primary: gvk("wasmop.test", "v1", "Target"),
            primary_selector: Some("contract=v02".into()),
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
        let uid = field(&current, "uid").unwrap_or("").to_string();
        let rv = field(&current, "resourceVersion").unwrap_or("").to_string();
        let name = req.target.name.clone();
        let namespace = req.target.namespace.clone().unwrap_or_default();
        let copy = format!(
            "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"{name}-v02\",\
             \"namespace\":\"{namespace}\",\"ownerReferences\":[{{\"apiVersion\":\"wasmop.test/v1\",\
             \"kind\":\"Target\",\"name\":\"{name}\",\"uid\":\"{uid}\",\"controller\":true}}]}}}}"
        );
        let created = case(&kube::create(&copy), "created");

        let owned = kube::list_owned(&gvk("", "v1", "ConfigMap"), Some(&namespace), &uid)
            .map_err(|e| Error::Retryable(format!("list-owned: {e:?}")))?;
        let mut names: Vec<&str> = owned.iter().filter_map(|o| field(o, "name")).collect();
        names.sort_unstable();
        let owned = names.join(",");

        let touch = PatchBody::Merge("{\"status\":{\"touched\":true}}".into());
        let stale = case(
            &kube::patch_status(&req.target, &touch, Some("1")),
            "applied",
        );

        let wrong_uid = DeleteOptions {
            propagation: Propagation::Background,
            preconditions: Preconditions {
                uid: Some("00000000-0000-4000-8000-000000000000".into()),
                resource_version: None,
            },
            grace_period_seconds: Some(0),
        };
        let precondition = case(
            &kube::delete(&config_map(&req, format!("{name}-gone")), &wrong_uid),
            "deleted",
        );

        let status = format!(
            "{{\"status\":{{\"contract\":\"0.2\",\"create\":\"{created}\",\"owned\":\"{owned}\",\
             \"stale\":\"{stale}\",\"precondition\":\"{precondition}\"}}}}"
        );
        kube::patch_status(&req.target, &PatchBody::Merge(status), Some(&rv))
            .map_err(|e| Error::Retryable(format!("guarded status: {e:?}")))?;
        log::log(
            log::Level::Info,
            &format!("0.2 plugin reconciled {name}: {created}"),
        );
        Ok(Action::Done)
    }

    fn cleanup(_req: Request) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

export!(Plugin);
