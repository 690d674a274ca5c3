//! Hostile test plugin `unsafe-names`: every identifier it hands the host is built to change
//! the request the host would make — a name that becomes a query (`x?fieldManager=spoofed&`),
//! a collection delete (`?`), path traversal (`..`, `../../kube-system/...`, `%2F`), a version
//! carrying a path to a Secret, a namespace with a `/`, a selector with `&`, control
//! characters, an over-long name, a uid or resourceVersion (an owner to list by, a delete's
//! precondition, a patch's guard) built to break out of the JSON body it goes into or to
//! carry a query. All on ConfigMap, a kind it owns, so that the grant check
//! passes and only the host's validation stands in the way.
//!
//! Each attack must come back `invalid` from the host itself (the message names the field, so
//! it cannot be the API server's 400). The plugin records `label=outcome` for each in its
//! Target's status (`status.attacks`) and returns `done` when every one was refused so, or a
//! permanent error naming the first that was not. Written against the WIT directly.

wit_bindgen::generate!({ path: "../../../wit", world: "plugin" });

use exports::wasmop::plugin::reconciler::{Action, Error, Guest, Request};
use wasmop::plugin::events::{self, Event, EventType};
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

fn config_map(namespace: Option<&str>, name: &str) -> ObjectRef {
    ObjectRef {
        kind: gvk("", "v1", "ConfigMap"),
        namespace: namespace.map(str::to_owned),
        name: name.into(),
    }
}

fn object(namespace: &str, name: &str) -> String {
    format!(
        "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":{name:?},\
         \"namespace\":{namespace:?}}},\"data\":{{\"spoofed\":\"yes\"}}}}"
    )
}

/// `invalid` from the host, whose messages name the field they refuse.
fn outcome<T>(result: Result<T, KubeError>, field: &str) -> String {
    match result {
        Ok(_) => "accepted".into(),
        Err(KubeError::Invalid(m)) if m.contains(field) => "invalid".into(),
        Err(KubeError::Invalid(m)) => format!("invalid-elsewhere({})", m.len()),
        Err(KubeError::NotFound(_)) => "not-found".into(),
        Err(KubeError::Conflict(_)) => "conflict".into(),
        Err(KubeError::AlreadyExists(_)) => "already-exists".into(),
        Err(KubeError::Forbidden(_)) => "forbidden".into(),
        Err(KubeError::Denied(_)) => "denied".into(),
        Err(KubeError::Unavailable(_)) => "unavailable".into(),
        Err(KubeError::Other(_)) => "other".into(),
    }
}

fn attacks(ns: &str) -> Vec<(&'static str, String)> {
    let merge = || PatchBody::Merge("{\"data\":{\"spoofed\":\"yes\"}}".into());
    let long = "a".repeat(300);
    vec![
        (
            "patch-query",
            outcome(
                kube::patch(
                    &config_map(Some(ns), "x?fieldManager=spoofed&"),
                    &merge(),
                    None,
                ),
                "target.name",
            ),
        ),
        (
            "delete-collection",
            outcome(
                kube::delete(&config_map(Some(ns), "?"), &background()),
                "target.name",
            ),
        ),
        (
            "delete-traversal",
            outcome(
                kube::delete(
                    &config_map(Some(ns), "../../kube-system/configmaps/victim"),
                    &background(),
                ),
                "target.name",
            ),
        ),
        (
            "delete-encoded",
            outcome(
                kube::delete(&config_map(Some(ns), "a%2Fb"), &background()),
                "target.name",
            ),
        ),
        (
            "delete-dot",
            outcome(
                kube::delete(&config_map(Some(ns), ".."), &background()),
                "target.name",
            ),
        ),
        (
            "delete-empty",
            outcome(
                kube::delete(&config_map(Some(ns), ""), &background()),
                "target.name",
            ),
        ),
        (
            "get-version-path",
            outcome(
                kube::get(&ObjectRef {
                    kind: gvk(
                        "",
                        "v1/namespaces/kube-system/secrets/victim?x=",
                        "ConfigMap",
                    ),
                    namespace: Some(ns.into()),
                    name: "victim".into(),
                }),
                "target.kind.version",
            ),
        ),
        (
            "get-namespace-traversal",
            outcome(
                kube::get(&config_map(Some("../kube-system"), "victim")),
                "target.namespace",
            ),
        ),
        (
            "list-namespace-path",
            outcome(
                kube::list(
                    &gvk("", "v1", "ConfigMap"),
                    Some("kube-system/secrets"),
                    None,
                ),
                "namespace",
            ),
        ),
        (
            "list-selector-query",
            outcome(
                kube::list(
                    &gvk("", "v1", "ConfigMap"),
                    Some(ns),
                    Some("a=b&fieldSelector=metadata.name=victim"),
                ),
                "label-selector",
            ),
        ),
        (
            "list-version-path",
            outcome(
                kube::list(
                    &gvk("", "v1/../../api/v1/secrets", "ConfigMap"),
                    Some(ns),
                    None,
                ),
                "kind.version",
            ),
        ),
        (
            "apply-name-query",
            outcome(
                kube::apply(&object(ns, "x?dryRun=All&fieldManager=spoofed")),
                "metadata.name",
            ),
        ),
        (
            "create-namespace-path",
            outcome(
                kube::create(&object("kube-system/configmaps", "victim")),
                "metadata.namespace",
            ),
        ),
        (
            "apply-version-query",
            outcome(
                kube::apply(&object(ns, "victim").replace("\"v1\"", "\"v1?x=y\"")),
                "apiVersion",
            ),
        ),
        (
            "event-regarding",
            outcome(
                events::emit(&Event {
                    regarding: config_map(Some(ns), "x?y=z"),
                    event_type: EventType::Normal,
                    reason: "Spoofed".into(),
                    action: "Spoof".into(),
                    note: "spoofed".into(),
                }),
                "regarding.name",
            ),
        ),
        (
            "long-name",
            outcome(
                kube::delete(&config_map(Some(ns), &long), &background()),
                "target.name",
            ),
        ),
        (
            "list-owned-uid-injection",
            outcome(
                kube::list_owned(&gvk("", "v1", "ConfigMap"), Some(ns), "x\"}],\"a\":{\"b"),
                "owner-uid",
            ),
        ),
        (
            "delete-uid-precondition-injection",
            outcome(
                kube::delete(
                    &config_map(Some(ns), "victim"),
                    &with_preconditions(Some("u\"},\"dryRun\":[\"All"), None),
                ),
                "options.preconditions.uid",
            ),
        ),
        (
            "delete-rv-precondition-query",
            outcome(
                kube::delete(
                    &config_map(Some(ns), "victim"),
                    &with_preconditions(None, Some("1?dryRun=All")),
                ),
                "options.preconditions.resource-version",
            ),
        ),
        (
            "patch-guard-injection",
            outcome(
                kube::patch(
                    &config_map(Some(ns), "victim"),
                    &merge(),
                    Some("1\",\"uid\":\"forged"),
                ),
                "if-resource-version",
            ),
        ),
        (
            "patch-status-guard-long",
            outcome(
                kube::patch_status(&config_map(Some(ns), "victim"), &merge(), Some(&long)),
                "if-resource-version",
            ),
        ),
        (
            "control-characters",
            outcome(
                kube::patch(&config_map(Some(ns), "a\r\nb\u{1b}[2J"), &merge(), None),
                "target.name",
            ),
        ),
    ]
}

impl Guest for Plugin {
    fn describe() -> Info {
        Info {
            name: "unsafe-names".into(),
            version: "0.1.0".into(),
            primary: gvk("wasmop.test", "v1", "Target"),
            primary_selector: None,
            owns: vec![gvk("", "v1", "ConfigMap")],
            watches: Vec::<Watch>::new(),
            finalizer: None,
            reconcile_on_metadata_change: false,
            permissions: Vec::new(),
        }
    }

    fn reconcile(req: Request) -> Result<Action, Error> {
        let ns = req.target.namespace.clone().unwrap_or_default();
        let results = attacks(&ns);
        let report = results
            .iter()
            .map(|(label, outcome)| format!("{label}={outcome}"))
            .collect::<Vec<_>>()
            .join(" ");
        let status = format!("{{\"status\":{{\"attacks\":{report:?}}}}}");
        kube::patch_status(&req.target, &PatchBody::Merge(status), None)
            .map_err(|e| Error::Retryable(format!("status: {e:?}")))?;
        match results.iter().find(|(_, outcome)| outcome != "invalid") {
            None => Ok(Action::Done),
            Some((label, outcome)) => Err(Error::Permanent(format!("{label} got {outcome}"))),
        }
    }

    fn cleanup(_req: Request) -> Result<Action, Error> {
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

/// Delete options carrying the given (hostile) preconditions.
fn with_preconditions(
    uid: Option<&str>,
    resource_version: Option<&str>,
) -> wasmop::plugin::kube::DeleteOptions {
    let mut options = background();
    options.preconditions = wasmop::plugin::kube::Preconditions {
        uid: uid.map(str::to_owned),
        resource_version: resource_version.map(str::to_owned),
    };
    options
}
