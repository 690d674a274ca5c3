//! Grants: what one plugin may do, derived from what it declares ([`PluginInfo`]) and what the
//! operator allows ([`Policy`]). Every host call is checked against them; a refusal is a
//! [`Denial`], which the guest sees as `kube-error::denied` and the operator as a typed outcome.
//!
//! Kinds are matched by group and kind, not version: `apps/v1` and `apps/v1beta1` Deployments
//! are the same objects to the API server.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::plugin::{PluginInfo, Verb};

/// The operator's policy for one plugin.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// The namespaces the plugin may touch; `None` means all. Cluster-scoped objects (no
    /// namespace) are not confined by this.
    pub namespaces: Option<BTreeSet<String>>,
    /// Whether the plugin gets the permissions it asks for beyond those its kinds imply.
    pub extra_permissions: ExtraPermissions,
}

/// What happens to the permissions a plugin asks for beyond its kinds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ExtraPermissions {
    /// Grant them as asked (the default: the operator chose to install the plugin).
    #[default]
    Grant,
    /// Refuse to load a plugin that asks for any.
    Refuse,
}

/// Why a plugin cannot be granted what it declares.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The policy refuses extra permissions and the plugin asks for one.
    #[error(
        "plugin `{plugin}` asks for {verbs} on {kind}, and the policy grants no permissions \
         beyond a plugin's own kinds"
    )]
    ExtraPermissionRefused {
        /// The plugin.
        plugin: String,
        /// The kind, as `group/Kind`.
        kind: String,
        /// The verbs, comma-separated.
        verbs: String,
    },
    /// A permission names a wildcard, which the contract does not accept.
    #[error("plugin `{plugin}` asks for a wildcard permission on `{kind}`; name kinds one by one")]
    Wildcard {
        /// The plugin.
        plugin: String,
        /// The kind as written.
        kind: String,
    },
}

/// A host call the plugin's grants do not cover.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{verb} on {kind}{} is not granted: {reason}", in_namespace(.namespace))]
pub struct Denial {
    /// The verb (`get`, `apply`, ... or `emit-event`).
    pub verb: String,
    /// The kind, as `group/Kind` (`core/ConfigMap` for the core group).
    pub kind: String,
    /// The namespace of the call, if any.
    pub namespace: Option<String>,
    /// Why.
    pub reason: String,
}

fn in_namespace(ns: &Option<String>) -> String {
    match ns {
        Some(ns) => format!(" in namespace `{ns}`"),
        None => String::new(),
    }
}

/// `group/Kind`, with `core` for the core group, as shown in denials.
pub fn kind_label(group: &str, kind: &str) -> String {
    let group = if group.is_empty() { "core" } else { group };
    format!("{group}/{kind}")
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct KindGrant {
    /// Verbs granted in every namespace the policy allows.
    everywhere: BTreeSet<Verb>,
    /// Verbs granted only in named namespaces.
    in_namespaces: BTreeMap<String, BTreeSet<Verb>>,
}

/// The verbs a plugin holds, per kind. Built once per plugin version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grants {
    kinds: BTreeMap<(String, String), KindGrant>,
    namespaces: Option<BTreeSet<String>>,
}

const PRIMARY_VERBS: [Verb; 5] = [
    Verb::Get,
    Verb::List,
    Verb::Patch,
    Verb::Apply,
    Verb::PatchStatus,
];
const OWNED_VERBS: [Verb; 6] = [
    Verb::Get,
    Verb::List,
    Verb::Create,
    Verb::Patch,
    Verb::Apply,
    Verb::Delete,
];
const WATCHED_VERBS: [Verb; 2] = [Verb::Get, Verb::List];

impl Grants {
    /// No grants at all (for `describe`, which must not call the host).
    pub fn none() -> Self {
        Self {
            kinds: BTreeMap::new(),
            namespaces: None,
        }
    }

    /// Derives the grants: the primary kind may be read, patched, applied and have its status
    /// patched; owned kinds may be read and written; watched kinds may be read; extra
    /// permissions are granted as the policy says.
    pub fn new(info: &PluginInfo, policy: &Policy) -> Result<Self, PolicyError> {
        let mut kinds: BTreeMap<(String, String), KindGrant> = BTreeMap::new();
        let mut grant = |group: &str, kind: &str, verbs: &[Verb]| {
            kinds
                .entry((group.to_owned(), kind.to_owned()))
                .or_default()
                .everywhere
                .extend(verbs.iter().copied());
        };
        grant(&info.primary.group, &info.primary.kind, &PRIMARY_VERBS);
        for owned in &info.owns {
            grant(&owned.group, &owned.kind, &OWNED_VERBS);
        }
        for watch in &info.watches {
            grant(&watch.kind.group, &watch.kind.kind, &WATCHED_VERBS);
        }
        for p in &info.permissions {
            if p.kind.contains('*') || p.group.contains('*') {
                return Err(PolicyError::Wildcard {
                    plugin: info.name.to_string(),
                    kind: kind_label(&p.group, &p.kind),
                });
            }
            if policy.extra_permissions == ExtraPermissions::Refuse {
                return Err(PolicyError::ExtraPermissionRefused {
                    plugin: info.name.to_string(),
                    kind: kind_label(&p.group, &p.kind),
                    verbs: p
                        .verbs
                        .iter()
                        .map(Verb::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
            let entry = kinds.entry((p.group.clone(), p.kind.clone())).or_default();
            if p.namespaces.is_empty() {
                entry.everywhere.extend(p.verbs.iter().copied());
            } else {
                for ns in &p.namespaces {
                    entry
                        .in_namespaces
                        .entry(ns.clone())
                        .or_default()
                        .extend(p.verbs.iter().copied());
                }
            }
        }
        Ok(Self {
            kinds,
            namespaces: policy.namespaces.clone(),
        })
    }

    /// Checks one call. `namespace` is `None` for cluster-scoped objects and for lists across
    /// all namespaces.
    pub fn check(
        &self,
        verb: Verb,
        group: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<(), Denial> {
        let deny = |reason: String| Denial {
            verb: verb.to_string(),
            kind: kind_label(group, kind),
            namespace: namespace.map(str::to_owned),
            reason,
        };
        // A plugin declares a handful of kinds: a scan compares them in place, where a map
        // lookup would first copy both names into an owned key on every host call.
        let grant = self
            .kinds
            .iter()
            .find(|((g, k), _)| g == group && k == kind)
            .map(|(_, grant)| grant);
        let Some(grant) = grant else {
            return Err(deny(
                "the plugin declares no primary, owned, watched or permitted kind by that name"
                    .into(),
            ));
        };
        if let (Some(allowed), Some(ns)) = (&self.namespaces, namespace)
            && !allowed.contains(ns)
        {
            return Err(deny(format!(
                "the policy confines the plugin to namespaces {}",
                allowed.iter().cloned().collect::<Vec<_>>().join(", ")
            )));
        }
        if grant.everywhere.contains(&verb) {
            return Ok(());
        }
        let in_ns = namespace
            .and_then(|ns| grant.in_namespaces.get(ns))
            .is_some_and(|verbs| verbs.contains(&verb));
        if in_ns {
            return Ok(());
        }
        Err(deny(format!(
            "the plugin's grants on this kind are {}",
            describe_grant(grant)
        )))
    }
}

fn describe_grant(grant: &KindGrant) -> String {
    let list = |verbs: &BTreeSet<Verb>| {
        verbs
            .iter()
            .map(Verb::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut parts = Vec::new();
    if !grant.everywhere.is_empty() {
        parts.push(list(&grant.everywhere));
    }
    for (ns, verbs) in &grant.in_namespaces {
        parts.push(format!("{} in `{ns}`", list(verbs)));
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join("; ")
    }
}

impl fmt::Display for Grants {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for ((group, kind), grant) in &self.kinds {
            writeln!(f, "{}: {}", kind_label(group, kind), describe_grant(grant))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::{Mapping, Permission, PluginName, Watch};
    use kube::core::GroupVersionKind;

    fn info(permissions: Vec<Permission>) -> PluginInfo {
        PluginInfo {
            name: PluginName::new("demo").expect("valid"),
            version: "1".into(),
            primary: GroupVersionKind::gvk("example.com", "v1", "Database"),
            primary_selector: None,
            owns: vec![GroupVersionKind::gvk("", "v1", "ConfigMap")],
            watches: vec![Watch {
                kind: GroupVersionKind::gvk("", "v1", "Namespace"),
                selector: None,
                mapping: Mapping::All,
            }],
            finalizer: None,
            reconcile_on_metadata_change: false,
            permissions,
        }
    }

    fn secret_read(namespaces: Vec<String>) -> Permission {
        Permission {
            group: String::new(),
            kind: "Secret".into(),
            verbs: [Verb::Get].into(),
            namespaces,
        }
    }

    #[test]
    fn declared_kinds_imply_their_verbs() {
        let g = Grants::new(&info(vec![]), &Policy::default()).expect("grants");
        g.check(Verb::PatchStatus, "example.com", "Database", Some("a"))
            .expect("primary status");
        g.check(Verb::Apply, "", "ConfigMap", Some("a"))
            .expect("owned apply");
        g.check(Verb::List, "", "Namespace", None)
            .expect("watched list");
        let err = g
            .check(Verb::Delete, "", "Namespace", Some("a"))
            .expect_err("watch is read-only");
        assert!(err.to_string().contains("get, list"), "{err}");
    }

    #[test]
    fn undeclared_kind_is_denied_with_the_kind_named() {
        let g = Grants::new(&info(vec![]), &Policy::default()).expect("grants");
        let err = g
            .check(Verb::Get, "", "Secret", Some("prod"))
            .expect_err("undeclared");
        assert_eq!(
            err.to_string(),
            "get on core/Secret in namespace `prod` is not granted: the plugin declares no \
             primary, owned, watched or permitted kind by that name"
        );
    }

    #[test]
    fn namespaced_permission_applies_only_there() {
        let g = Grants::new(
            &info(vec![secret_read(vec!["db".into()])]),
            &Policy::default(),
        )
        .expect("grants");
        g.check(Verb::Get, "", "Secret", Some("db"))
            .expect("granted in db");
        g.check(Verb::Get, "", "Secret", Some("web"))
            .expect_err("not in web");
    }

    #[test]
    fn policy_can_refuse_extra_permissions_and_confine_namespaces() {
        let refuse = Policy {
            extra_permissions: ExtraPermissions::Refuse,
            ..Policy::default()
        };
        let err = Grants::new(&info(vec![secret_read(vec![])]), &refuse).expect_err("refused");
        assert!(matches!(err, PolicyError::ExtraPermissionRefused { .. }));
        let confined = Policy {
            namespaces: Some(["team-a".to_owned()].into()),
            ..Policy::default()
        };
        let g = Grants::new(&info(vec![]), &confined).expect("grants");
        g.check(Verb::Get, "", "ConfigMap", Some("team-a"))
            .expect("inside");
        let err = g
            .check(Verb::Get, "", "ConfigMap", Some("team-b"))
            .expect_err("outside");
        assert!(err.to_string().contains("confines"), "{err}");
    }
}
