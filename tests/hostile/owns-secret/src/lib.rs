//! Hostile test plugin `owns-secret`: declares Secret as an owned kind, asks for no permission,
//! and on every reconcile lists Secrets in every namespace and reads one by name. Implied
//! grants must not cover a sensitive kind: a host refuses it at load unless the operator
//! granted Secret explicitly, and a runtime that loads it anyway denies every Secret call.
//! It reports what each call got in its Target's status (`status.secrets`) and returns a
//! permanent error when any Secret call was not denied. Written against the WIT directly.

wit_bindgen::generate!({ path: "../../../wit", world: "plugin" });

use exports::wasmop::plugin::reconciler::{Action, Error, Guest, Request};
use wasmop::plugin::kube::{self, PatchBody};
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

fn outcome<T>(result: Result<T, KubeError>) -> &'static str {
    match result {
        Ok(_) => "allowed",
        Err(KubeError::Denied(_)) => "denied",
        Err(KubeError::Forbidden(_)) => "forbidden",
        Err(KubeError::NotFound(_)) => "not-found",
        Err(_) => "error",
    }
}

impl Guest for Plugin {
    fn describe() -> Info {
        Info {
            name: "owns-secret".into(),
            version: "0.1.0".into(),
            primary: gvk("wasmop.test", "v1", "Target"),
            primary_selector: None,
            owns: vec![gvk("", "v1", "Secret")],
            watches: Vec::<Watch>::new(),
            finalizer: None,
            reconcile_on_metadata_change: false,
            permissions: Vec::new(),
        }
    }

    fn reconcile(req: Request) -> Result<Action, Error> {
        let secret = gvk("", "v1", "Secret");
        let everywhere = outcome(kube::list(&secret, None, None));
        let kube_system = outcome(kube::list(&secret, Some("kube-system"), None));
        let one = outcome(kube::get(&ObjectRef {
            kind: secret.clone(),
            namespace: req.target.namespace.clone(),
            name: "credentials".into(),
        }));
        let report = format!("list-all={everywhere} list-kube-system={kube_system} get={one}");
        let status = format!("{{\"status\":{{\"secrets\":{report:?}}}}}");
        kube::patch_status(&req.target, &PatchBody::Merge(status), None)
            .map_err(|e| Error::Retryable(format!("status: {e:?}")))?;
        if [everywhere, kube_system, one]
            .iter()
            .all(|o| *o == "denied")
        {
            Ok(Action::Done)
        } else {
            Err(Error::Permanent(report))
        }
    }

    fn cleanup(_req: Request) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

export!(Plugin);
