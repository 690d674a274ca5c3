//! Hostile test plugin `describe-bad-kinds`: one declared identifier built to change a
//! request, a watch or a log line, by variant ([`ATTACKS`] names each by the field the host
//! must name): a primary version carrying a path and a query, an owned kind with `?`, a
//! watched group with `/`, a selector with `&`, a finalizer with a newline, an annotation
//! key with a space, a permission namespace that traverses. Written against the WIT directly.

wit_bindgen::generate!({ path: "../../../wit", world: "plugin" });

use exports::wasmop::plugin::reconciler::{Action, Error, Guest, Request};
use wasmop::plugin::plugin_info::{Info, Mapping, Permission, Verb, Watch};
use wasmop::plugin::types::Gvk;

struct Plugin;

fn gvk(group: &str, version: &str, kind: &str) -> Gvk {
    Gvk {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
    }
}

/// A valid declaration the attack then spoils.
fn valid(name: &str) -> Info {
    Info {
        name: name.into(),
        version: "0.1.0".into(),
        primary: gvk("wasmop.test", "v1", "Target"),
        primary_selector: None,
        owns: vec![gvk("", "v1", "ConfigMap")],
        watches: Vec::new(),
        finalizer: None,
        reconcile_on_metadata_change: false,
        permissions: Vec::new(),
    }
}

/// Which variant to play: the wall clock's seconds modulo `n` (`describe` has no input; the
/// runtime tests pick one with the runtime's fixed clock, the e2e test gets whichever the
/// time says, and every variant must be refused).
#[allow(dead_code)]
fn variant(n: u64) -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        % n
}

/// The field each variant spoils, as the host's error must name it.
pub const ATTACKS: [&str; 7] = [
    "primary.version",
    "owns[1].kind",
    "watches[0].kind.group",
    "primary-selector",
    "finalizer",
    "watches[0].mapping.annotation",
    "permissions[0].namespaces[0]",
];

fn watch(group: &str, mapping: Mapping) -> Watch {
    Watch {
        kind: gvk(group, "v1", "Namespace"),
        selector: None,
        mapping,
    }
}

fn describe() -> Info {
    let mut info = valid("describe-bad-kinds");
    match variant(ATTACKS.len() as u64) {
        0 => info.primary.version = "v1/namespaces/kube-system/secrets/token?x=".into(),
        1 => info.owns.push(gvk("", "v1", "Secret?watch=true")),
        2 => info.watches.push(watch("../api/v1", Mapping::All)),
        3 => info.primary_selector = Some("app=web&fieldSelector=x".into()),
        4 => info.finalizer = Some("example.com/cleanup\nforged log line".into()),
        5 => info
            .watches
            .push(watch("", Mapping::Annotation("example.com/a key".into()))),
        _ => info.permissions.push(Permission {
            group: String::new(),
            kind: "ConfigMap".into(),
            verbs: vec![Verb::Get],
            namespaces: vec!["../kube-system".into()],
        }),
    }
    info
}

#[allow(dead_code)]
fn unused(_: Mapping, _: Verb, _: Watch, _: Permission) {}

impl Guest for Plugin {
    fn describe() -> Info {
        describe()
    }

    fn reconcile(_req: Request) -> Result<Action, Error> {
        Ok(Action::Done)
    }

    fn cleanup(_req: Request) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

export!(Plugin);
