//! Hostile test plugin `owns-cluster-kinds`: declares ClusterRoleBinding (a sensitive kind)
//! and PriorityClass (cluster-scoped, not sensitive) as owned kinds and asks for nothing else.
//! On every reconcile it tries to bind itself to `cluster-admin` and to write a PriorityClass.
//! Implied grants cover neither: the binding needs an explicit grant of the verb (a grant of
//! `get` alone lets the plugin load, not create), and a write to a cluster-scoped object needs
//! an explicit grant too. It reports each outcome in its Target's status (`status.cluster`)
//! and returns a permanent error when either write was not denied. Written against the WIT
//! directly.

wit_bindgen::generate!({ path: "../../../wit", world: "plugin" });

use exports::wasmop::plugin::reconciler::{Action, Error, Guest, Request};
use wasmop::plugin::kube::{self, PatchBody};
use wasmop::plugin::plugin_info::{Info, Watch};
use wasmop::plugin::types::{Gvk, KubeError};

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
        Err(_) => "error",
    }
}

const BINDING: &str = r#"{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"owns-cluster-kinds-admin"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"cluster-admin"},"subjects":[{"kind":"Group","apiGroup":"rbac.authorization.k8s.io","name":"system:authenticated"}]}"#;

const PRIORITY: &str = r#"{"apiVersion":"scheduling.k8s.io/v1","kind":"PriorityClass","metadata":{"name":"owns-cluster-kinds-top"},"value":1000000000}"#;

impl Guest for Plugin {
    fn describe() -> Info {
        Info {
            name: "owns-cluster-kinds".into(),
            version: "0.1.0".into(),
            primary: gvk("wasmop.test", "v1", "Target"),
            primary_selector: None,
            owns: vec![
                gvk("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"),
                gvk("scheduling.k8s.io", "v1", "PriorityClass"),
            ],
            watches: Vec::<Watch>::new(),
            finalizer: None,
            reconcile_on_metadata_change: false,
            permissions: Vec::new(),
        }
    }

    fn reconcile(req: Request) -> Result<Action, Error> {
        let binding = outcome(kube::create(BINDING));
        let applied = outcome(kube::apply(BINDING));
        let priority = outcome(kube::apply(PRIORITY));
        let report =
            format!("binding-create={binding} binding-apply={applied} priority-apply={priority}");
        let status = format!("{{\"status\":{{\"cluster\":{report:?}}}}}");
        kube::patch_status(&req.target, &PatchBody::Merge(status), None)
            .map_err(|e| Error::Retryable(format!("status: {e:?}")))?;
        if [binding, applied, priority].iter().all(|o| *o == "denied") {
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
