//! The load-time check of what a plugin asks for against what the operator granted: a plugin
//! whose declarations need more than its grants is refused before it runs, with an error that
//! names the grant to add.

use crate::plugin::{Declared, Permission, PluginInfo, PluginName, Verb};

use super::{
    Grants, OWNED_VERBS, PRIMARY_VERBS, Policy, SensitiveKinds, WATCHED_VERBS, kind_label,
};

/// Why one plugin was left out.
#[derive(Debug, thiserror::Error)]
pub enum PluginRefused {
    /// A kind the plugin declares is sensitive, and the operator granted nothing on it.
    #[error(
        "plugin `{plugin}` {role} {}, a sensitive kind: what that implies ({verbs}) needs \
         an explicit grant; add `{{group: \"{group}\", kind: {kind_name}, verbs: [{verbs}]}}` \
         (or the verbs it needs) under `plugins.{plugin}.grants`",
        kind_label(.group, .kind_name)
    )]
    SensitiveKind {
        /// The plugin.
        plugin: PluginName,
        /// How it declares the kind: `reconciles`, `owns` or `watches`.
        role: &'static str,
        /// The group.
        group: String,
        /// The kind.
        kind_name: String,
        /// The verbs the declaration implies, comma-separated.
        verbs: String,
    },
    /// The host config does not grant a permission the plugin asks for.
    #[error(
        "plugin `{plugin}` asks for {verbs} on {kind}{where_}, which the host config does not \
         grant; grant it under `plugins.{plugin}.grants`"
    )]
    NotGranted {
        /// The plugin.
        plugin: PluginName,
        /// `group/Kind`.
        kind: String,
        /// Verbs not granted.
        verbs: String,
        /// ` in namespace x` or empty.
        where_: String,
    },
    /// The plugin asks to review a kind it may not read everywhere it runs.
    #[error(
        "plugin `{plugin}` asks to review {kind}, which it may not read (a review shows it the \
         whole object); grant `{{group: \"{group}\", kind: {kind_name}, verbs: [get]}}` under \
         `plugins.{plugin}.grants`, or leave its webhooks off with \
         `plugins.{plugin}.admission.enabled: false`"
    )]
    ReviewNotGranted {
        /// The plugin.
        plugin: PluginName,
        /// `group/Kind`.
        kind: String,
        /// The group.
        group: String,
        /// The kind.
        kind_name: String,
    },
}

/// Checks that a plugin may read every kind it asks to review: a review hands it the whole
/// object (a Secret's data, say), so reviewing a kind is reading it, everywhere it runs.
/// `kinds` are `(group, kind)` pairs; a kind is readable when the plugin's `grants` let it
/// `get` it (its own kinds, its granted permissions; on a sensitive kind only what was
/// granted explicitly) or when the operator's `granted` list gives `get` on it in every
/// namespace (the registration itself declares the read, as an owned kind declares writes).
pub fn check_reviews<'a>(
    plugin: &PluginName,
    kinds: impl IntoIterator<Item = (&'a str, &'a str)>,
    grants: &Grants,
    granted: &[Permission],
) -> Result<(), PluginRefused> {
    for (group, kind) in kinds {
        let explicit = granted.iter().any(|g| {
            g.group == group
                && g.kind == kind
                && g.namespaces.is_empty()
                && g.verbs.contains(&Verb::Get)
        });
        if !explicit && grants.check(Verb::Get, group, kind, None).is_err() {
            return Err(PluginRefused::ReviewNotGranted {
                plugin: plugin.clone(),
                kind: kind_label(group, kind),
                group: group.to_owned(),
                kind_name: kind.to_owned(),
            });
        }
    }
    Ok(())
}

/// Checks the permissions a plugin asks for (beyond its kinds) against the operator's grants:
/// each asked verb must be granted for the same kind, in every namespace it asks for. A
/// primary, owned or watched kind that is sensitive needs an explicit grant of its own (its
/// kinds imply nothing there), or the plugin is refused.
pub fn check_grants<'a>(
    declared: impl Into<Declared<'a>>,
    granted: &[Permission],
    sensitive: &SensitiveKinds,
) -> Result<(), PluginRefused> {
    let declared = declared.into();
    let name = declared.name;
    if let Some(info) = declared.reconciler {
        check_sensitive(info, granted, sensitive)?;
    }
    // What the plugin's own kinds imply needs no grant (a plugin may restate it); on a
    // sensitive kind they imply nothing.
    let implied = declared.reconciler.and_then(|info| {
        Grants::new(
            &PluginInfo {
                permissions: Vec::new(),
                ..info.clone()
            },
            &Policy {
                sensitive: sensitive.clone(),
                ..Policy::default()
            },
        )
        .ok()
    });
    for asked in declared.permissions() {
        let grants: Vec<&Permission> = granted
            .iter()
            .filter(|g| g.group == asked.group && g.kind == asked.kind)
            .collect();
        let covers = |verb: Verb, ns: Option<&String>| {
            grants.iter().any(|g| {
                g.verbs.contains(&verb)
                    && (g.namespaces.is_empty() || ns.is_some_and(|ns| g.namespaces.contains(ns)))
            })
        };
        let namespaces: Vec<Option<&String>> = if asked.namespaces.is_empty() {
            vec![None]
        } else {
            asked.namespaces.iter().map(Some).collect()
        };
        for ns in namespaces {
            let is_implied = |verb: Verb| {
                implied.as_ref().is_some_and(|g| match ns {
                    Some(ns) => g.check(verb, &asked.group, &asked.kind, Some(ns)).is_ok(),
                    None => g.covers_everywhere(verb, &asked.group, &asked.kind),
                })
            };
            let missing: Vec<String> = asked
                .verbs
                .iter()
                .filter(|v| !is_implied(**v) && !covers(**v, ns))
                .map(Verb::to_string)
                .collect();
            if !missing.is_empty() {
                return Err(PluginRefused::NotGranted {
                    plugin: name.clone(),
                    kind: kind_label(&asked.group, &asked.kind),
                    verbs: missing.join(", "),
                    where_: ns
                        .map(|n| format!(" in namespace `{n}`"))
                        .unwrap_or_default(),
                });
            }
        }
    }
    Ok(())
}

/// Refuses a plugin that declares a sensitive kind the operator granted nothing on.
fn check_sensitive(
    info: &PluginInfo,
    granted: &[Permission],
    sensitive: &SensitiveKinds,
) -> Result<(), PluginRefused> {
    let declared = std::iter::once(("reconciles", &info.primary, PRIMARY_VERBS.as_slice()))
        .chain(
            info.owns
                .iter()
                .map(|k| ("owns", k, OWNED_VERBS.as_slice())),
        )
        .chain(
            info.watches
                .iter()
                .map(|w| ("watches", &w.kind, WATCHED_VERBS.as_slice())),
        );
    for (role, kind, verbs) in declared {
        let granted = granted
            .iter()
            .any(|g| g.group == kind.group && g.kind == kind.kind);
        if sensitive.contains(&kind.group, &kind.kind) && !granted {
            return Err(PluginRefused::SensitiveKind {
                plugin: info.name.clone(),
                role,
                group: kind.group.clone(),
                kind_name: kind.kind.clone(),
                verbs: verbs
                    .iter()
                    .map(Verb::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_core::GroupVersionKind;

    fn info(permissions: Vec<Permission>) -> PluginInfo {
        PluginInfo {
            name: PluginName::new("db").expect("name"),
            version: "1".into(),
            primary: GroupVersionKind::gvk("example.com", "v1", "Database"),
            primary_selector: None,
            owns: vec![],
            watches: vec![],
            finalizer: None,
            reconcile_on_metadata_change: false,
            permissions,
        }
    }

    fn perm(verbs: &[Verb], namespaces: &[&str]) -> Permission {
        Permission {
            group: String::new(),
            kind: "Secret".into(),
            verbs: verbs.iter().copied().collect(),
            namespaces: namespaces.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    fn settings(grants: Vec<Permission>) -> Vec<Permission> {
        grants
    }

    fn builtin() -> SensitiveKinds {
        SensitiveKinds::builtin()
    }

    #[test]
    fn a_sensitive_owned_kind_needs_an_explicit_grant_and_the_refusal_names_it() {
        let mut i = info(vec![]);
        i.owns = vec![GroupVersionKind::gvk("", "v1", "Secret")];
        let err = check_grants(&i, &settings(vec![]), &builtin()).expect_err("refused");
        assert_eq!(
            err.to_string(),
            "plugin `db` owns core/Secret, a sensitive kind: what that implies (get, list, \
             create, patch, apply, delete) needs an explicit grant; add `{group: \"\", kind: \
             Secret, verbs: [get, list, create, patch, apply, delete]}` (or the verbs it needs) \
             under `plugins.db.grants`"
        );
        check_grants(&i, &settings(vec![perm(&[Verb::Get], &[])]), &builtin())
            .expect("granted explicitly");
        i.owns = vec![GroupVersionKind::gvk(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRoleBinding",
        )];
        let err = check_grants(&i, &settings(vec![]), &builtin()).expect_err("RBAC");
        assert!(
            err.to_string()
                .contains("rbac.authorization.k8s.io/ClusterRoleBinding"),
            "{err}"
        );
        let mut watching = info(vec![]);
        watching.watches = vec![crate::plugin::Watch {
            kind: GroupVersionKind::gvk("", "v1", "ConfigMap"),
            selector: None,
            mapping: crate::plugin::Mapping::All,
        }];
        check_grants(&watching, &settings(vec![]), &builtin()).expect("not sensitive");
        let err = check_grants(
            &watching,
            &settings(vec![]),
            &builtin().with("", "ConfigMap"),
        )
        .expect_err("the operator's own sensitive kind");
        assert!(err.to_string().contains("watches core/ConfigMap"), "{err}");
    }

    #[test]
    fn asked_permission_needs_an_operator_grant() {
        let err = check_grants(
            &info(vec![perm(&[Verb::Get], &[])]),
            &settings(vec![]),
            &builtin(),
        )
        .expect_err("refused");
        assert_eq!(
            err.to_string(),
            "plugin `db` asks for get on core/Secret, which the host config does not grant; \
             grant it under `plugins.db.grants`"
        );
        check_grants(
            &info(vec![perm(&[Verb::Get], &[])]),
            &settings(vec![perm(&[Verb::Get, Verb::List], &[])]),
            &builtin(),
        )
        .expect("granted");
    }

    #[test]
    fn restating_an_implied_permission_needs_no_grant() {
        let mut i = info(vec![Permission {
            group: "example.com".into(),
            kind: "Database".into(),
            verbs: [Verb::PatchStatus].into(),
            namespaces: vec![],
        }]);
        check_grants(&i, &settings(vec![]), &builtin()).expect("implied by the primary kind");
        i.permissions[0].verbs.insert(Verb::Delete);
        check_grants(&i, &settings(vec![]), &builtin())
            .expect_err("delete is not implied for the primary kind");
    }

    #[test]
    fn namespaced_grant_covers_only_its_namespaces() {
        let granted = settings(vec![perm(&[Verb::Get], &["a"])]);
        check_grants(
            &info(vec![perm(&[Verb::Get], &["a"])]),
            &granted,
            &builtin(),
        )
        .expect("in a");
        let err = check_grants(
            &info(vec![perm(&[Verb::Get], &["b"])]),
            &granted,
            &builtin(),
        )
        .expect_err("b");
        assert!(err.to_string().contains("in namespace `b`"), "{err}");
        check_grants(&info(vec![perm(&[Verb::Get], &[])]), &granted, &builtin())
            .expect_err("everywhere");
    }

    #[test]
    fn reviewing_a_kind_needs_reading_it() {
        use crate::plugin::PluginInfo;
        use crate::policy::{Grants, Policy};
        let info = PluginInfo {
            name: PluginName::new("db").expect("name"),
            version: "1".into(),
            primary: crate::cluster::GroupVersionKind::gvk("example.com", "v1", "Database"),
            primary_selector: None,
            owns: vec![],
            watches: vec![],
            finalizer: None,
            reconcile_on_metadata_change: false,
            permissions: vec![],
        };
        let grants = Grants::new(&info, &Policy::default()).expect("grants");
        check_reviews(&info.name, [("example.com", "Database")], &grants, &[])
            .expect("its own kind");
        let err =
            check_reviews(&info.name, [("", "Secret")], &grants, &[]).expect_err("not granted");
        let text = err.to_string();
        assert!(
            text.contains("asks to review core/Secret")
                && text.contains("verbs: [get]")
                && text.contains("plugins.db.grants"),
            "{text}"
        );
        let get = |namespaces: Vec<String>| Permission {
            group: String::new(),
            kind: "Secret".into(),
            verbs: [Verb::Get].into(),
            namespaces,
        };
        check_reviews(&info.name, [("", "Secret")], &grants, &[get(vec![])])
            .expect("granted get everywhere");
        check_reviews(
            &info.name,
            [("", "Secret")],
            &grants,
            &[get(vec!["a".into()])],
        )
        .expect_err("a grant in one namespace does not cover a webhook's every namespace");
    }

    #[test]
    fn a_plugin_that_only_reviews_holds_only_the_reads_it_asked_for_and_was_granted() {
        use crate::policy::{ExtraPermissions, Grants, Policy};
        let name = PluginName::new("policy").expect("name");
        let reads = [Permission {
            group: String::new(),
            kind: "Namespace".into(),
            verbs: [Verb::Get, Verb::List].into(),
            namespaces: vec![],
        }];
        let declared = Declared {
            name: &name,
            reconciler: None,
            review_reads: &reads,
        };
        let err = check_grants(declared, &[], &builtin()).expect_err("not granted");
        assert!(
            err.to_string()
                .starts_with("plugin `policy` asks for get, list on core/Namespace"),
            "{err}"
        );
        check_grants(declared, &reads, &builtin()).expect("granted");
        let policy = Policy {
            extra_permissions: ExtraPermissions::Grant,
            explicit: reads.to_vec(),
            ..Policy::default()
        };
        let grants = Grants::new(declared, &policy).expect("grants");
        grants
            .check(Verb::List, "", "Namespace", None)
            .expect("what it asked for");
        // No kinds of its own: reviewing a kind needs its read granted, as any read does.
        check_reviews(&name, [("apps", "Deployment")], &grants, &[])
            .expect_err("Deployments are not its to read");
        let deployments = Permission {
            group: "apps".into(),
            kind: "Deployment".into(),
            verbs: [Verb::Get].into(),
            namespaces: vec![],
        };
        check_reviews(&name, [("apps", "Deployment")], &grants, &[deployments])
            .expect("the operator granted the read");
    }

    #[test]
    fn a_reconcilers_review_reads_need_grants_as_its_permissions_do() {
        let i = info(vec![]);
        let reads = [perm(&[Verb::Get], &[])];
        let declared = Declared {
            name: &i.name,
            reconciler: Some(&i),
            review_reads: &reads,
        };
        let err = check_grants(declared, &[], &builtin()).expect_err("not granted");
        assert!(
            err.to_string().contains("asks for get on core/Secret"),
            "{err}"
        );
        check_grants(declared, &reads, &builtin()).expect("granted");
    }
}
