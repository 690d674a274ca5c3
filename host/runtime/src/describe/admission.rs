//! The WIT `admission-info` record a plugin's admission `describe` returns, checked field by
//! field (with the helpers and caps of [`super::declared`]) into an [`AdmissionInfo`]. It
//! becomes webhook configurations the API server acts on, so nothing in it is used unchecked:
//! every kind by its grammar, every selector parsed, every list capped before it is read,
//! the timeout inside the API server's bounds.

use std::collections::BTreeSet;
use std::time::Duration;

use wasmop_core::cluster::names;
use wasmop_core::plugin::{Permission, PluginInfo, PluginName};

use super::declared::{
    DeclarationError, MAX_PERMISSIONS, capped, check_version, gvk, permission, push_new, selector,
};
use crate::admission::{AdmissionInfo, FailurePolicy, Operation, Registration, Rule};
use crate::contract::wit_admission as wit;

/// Rules in one registration: each is a kind the API server sends to the plugin.
pub(crate) const MAX_RULES: usize = 16;
/// Operations listed in one rule: there are four, so 16 leaves room for repetition only.
pub(crate) const MAX_OPERATIONS: usize = 16;
/// The API server's bounds on a webhook's `timeoutSeconds`.
pub(crate) const TIMEOUT_SECONDS: std::ops::RangeInclusive<u8> = 1..=30;

fn refused(field: impl Into<String>, problem: impl Into<String>) -> DeclarationError {
    DeclarationError::Registration {
        field: field.into(),
        problem: problem.into(),
    }
}

fn operation(op: &wit::Operation) -> Operation {
    match op {
        wit::Operation::Create => Operation::Create,
        wit::Operation::Update => Operation::Update,
        wit::Operation::Delete => Operation::Delete,
        wit::Operation::Connect => Operation::Connect,
    }
}

fn registration(field: &str, r: wit::Registration) -> Result<Registration, DeclarationError> {
    capped(&format!("{field}.rules"), &r.rules, MAX_RULES)?;
    if r.rules.is_empty() {
        return Err(refused(
            format!("{field}.rules"),
            "a registration needs at least one rule",
        ));
    }
    let mut rules = Vec::with_capacity(r.rules.len());
    for (i, rule) in r.rules.iter().enumerate() {
        let at = format!("{field}.rules[{i}]");
        let kind = gvk(&format!("{at}.kind"), &rule.kind)?;
        capped(
            &format!("{at}.operations"),
            &rule.operations,
            MAX_OPERATIONS,
        )?;
        let operations: BTreeSet<Operation> = rule.operations.iter().map(operation).collect();
        if operations.is_empty() {
            return Err(refused(
                format!("{at}.operations"),
                "a rule needs at least one operation",
            ));
        }
        if let Some(sub) = &rule.subresource {
            names::check_namespace(&format!("{at}.subresource"), sub)?;
        }
        push_new(
            &mut rules,
            Rule {
                kind,
                operations,
                subresource: rule.subresource.clone(),
            },
        );
    }
    if !TIMEOUT_SECONDS.contains(&r.timeout_seconds) {
        return Err(refused(
            format!("{field}.timeout-seconds"),
            format!(
                "{} is outside the API server's bounds of {} to {} seconds",
                r.timeout_seconds,
                TIMEOUT_SECONDS.start(),
                TIMEOUT_SECONDS.end()
            ),
        ));
    }
    Ok(Registration {
        rules,
        namespace_selector: selector(&format!("{field}.namespace-selector"), r.namespace_selector)?,
        object_selector: selector(&format!("{field}.object-selector"), r.object_selector)?,
        failure_policy: match r.failure_policy {
            wit::FailurePolicy::Fail => FailurePolicy::Fail,
            wit::FailurePolicy::Ignore => FailurePolicy::Ignore,
        },
        timeout: Duration::from_secs(u64::from(r.timeout_seconds)),
    })
}

/// The name of a plugin that only serves admission, as its admission `describe` gives it
/// (its version is checked by [`convert_admission`]).
pub(crate) fn identity(a: &wit::AdmissionInfo) -> Result<PluginName, DeclarationError> {
    names::check_namespace("admission.name", &a.name)?;
    PluginName::new(&a.name).map_err(|e| refused("admission.name", e.to_string()))
}

/// Validates what the admission `describe` returned; `reconciler` is what the plugin's
/// reconciler declared, when it exports one (name and version must agree).
pub(crate) fn convert_admission(
    a: wit::AdmissionInfo,
    reconciler: Option<&PluginInfo>,
) -> Result<AdmissionInfo, DeclarationError> {
    names::check_namespace("admission.name", &a.name)?;
    check_version(&a.version)?;
    let Some(reconciler) = reconciler else {
        return checked(a);
    };
    if a.name != reconciler.name.as_str() {
        return Err(DeclarationError::Mismatch {
            field: "name",
            reconciler: names::quote(reconciler.name.as_str()),
            admission: names::quote(&a.name),
        });
    }
    if a.version != reconciler.version {
        return Err(DeclarationError::Mismatch {
            field: "version",
            reconciler: names::quote(&reconciler.version),
            admission: names::quote(&a.version),
        });
    }
    checked(a)
}

/// The registrations and reads of an admission declaration whose name and version have been
/// checked.
fn checked(a: wit::AdmissionInfo) -> Result<AdmissionInfo, DeclarationError> {
    capped("admission.permissions", &a.permissions, MAX_PERMISSIONS)?;
    let validating = a
        .validating
        .map(|r| registration("admission.validating", r))
        .transpose()?;
    let mutating = a
        .mutating
        .map(|r| registration("admission.mutating", r))
        .transpose()?;
    if validating.is_none() && mutating.is_none() {
        return Err(refused(
            "admission",
            "the plugin exports `admission` but registers neither a validating nor a \
             mutating webhook",
        ));
    }
    let mut permissions: Vec<Permission> = Vec::with_capacity(a.permissions.len());
    for (i, p) in a.permissions.into_iter().enumerate() {
        let field = format!("admission.permissions[{i}]");
        let p = permission(&field, p)?;
        if let Some(verb) = p.verbs.iter().find(|v| v.writes()) {
            return Err(refused(
                format!("{field}.verbs"),
                format!("an admission review may only read, but `{verb}` writes"),
            ));
        }
        push_new(&mut permissions, p);
    }
    Ok(AdmissionInfo {
        validating,
        mutating,
        permissions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::v0_3::wasmop::plugin::plugin_info::{Permission as P, Verb as V};
    use crate::bindings::v0_3::wasmop::plugin::types::Gvk;
    use wasmop_core::cluster::GroupVersionKind;
    use wasmop_core::plugin::PluginName;

    fn reconciler() -> PluginInfo {
        PluginInfo {
            name: PluginName::new("db").expect("name"),
            version: "1.0.0".into(),
            primary: GroupVersionKind::gvk("example.com", "v1", "Database"),
            primary_selector: None,
            owns: vec![],
            watches: vec![],
            finalizer: None,
            reconcile_on_metadata_change: false,
            permissions: vec![],
        }
    }

    fn registration() -> wit::Registration {
        wit::Registration {
            rules: vec![wit::Rule {
                kind: Gvk {
                    group: "example.com".into(),
                    version: "v1".into(),
                    kind: "Database".into(),
                },
                operations: vec![wit::Operation::Create, wit::Operation::Update],
                subresource: None,
            }],
            namespace_selector: None,
            object_selector: Some("tier=db".into()),
            failure_policy: wit::FailurePolicy::Fail,
            timeout_seconds: 5,
        }
    }

    fn info() -> wit::AdmissionInfo {
        wit::AdmissionInfo {
            name: "db".into(),
            version: "1.0.0".into(),
            validating: Some(registration()),
            mutating: None,
            permissions: vec![],
        }
    }

    fn refused_by(change: impl FnOnce(&mut wit::AdmissionInfo)) -> String {
        let mut a = info();
        change(&mut a);
        let e = convert_admission(a, Some(&reconciler())).expect_err("refused");
        e.to_string()
    }

    #[test]
    fn a_good_declaration_is_taken() {
        let a = convert_admission(info(), Some(&reconciler())).expect("accepted");
        let v = a.validating.expect("validating");
        assert_eq!(v.timeout, Duration::from_secs(5));
        assert!(v.covers(
            &GroupVersionKind::gvk("example.com", "v1", "Database"),
            None,
            Operation::Create
        ));
        assert!(!v.covers(
            &GroupVersionKind::gvk("example.com", "v1", "Database"),
            None,
            Operation::Delete
        ));
    }

    #[test]
    fn each_broken_rule_is_refused_naming_its_field() {
        let e = refused_by(|a| a.name = "other".into());
        assert!(e.contains("name `other`") || e.contains("other"), "{e}");
        let e = refused_by(|a| a.version = "2.0.0".into());
        assert!(e.contains("one version"), "{e}");
        let e = refused_by(|a| a.validating = None);
        assert!(e.contains("neither a validating nor a mutating"), "{e}");
        let e = refused_by(|a| a.validating.as_mut().expect("v").timeout_seconds = 31);
        assert!(e.starts_with("admission.validating.timeout-seconds"), "{e}");
        let e = refused_by(|a| a.validating.as_mut().expect("v").rules.clear());
        assert!(e.starts_with("admission.validating.rules"), "{e}");
        let e = refused_by(|a| {
            a.validating.as_mut().expect("v").rules[0]
                .operations
                .clear();
        });
        assert!(
            e.starts_with("admission.validating.rules[0].operations"),
            "{e}"
        );
        let e = refused_by(|a| {
            a.validating.as_mut().expect("v").rules[0].kind.kind = "*".into();
        });
        assert!(e.contains("admission.validating.rules[0].kind"), "{e}");
        let e = refused_by(|a| {
            a.validating.as_mut().expect("v").rules = vec![registration().rules[0].clone(); 17];
        });
        assert!(e.contains("at most 16"), "{e}");
        let e = refused_by(|a| {
            a.validating.as_mut().expect("v").namespace_selector = Some("a in (".into());
        });
        assert!(e.contains("admission.validating.namespace-selector"), "{e}");
        let e = refused_by(|a| {
            a.permissions = vec![P {
                group: "".into(),
                kind: "ConfigMap".into(),
                verbs: vec![V::Get, V::Delete],
                namespaces: vec![],
            }]
        });
        assert!(e.contains("`delete` writes"), "{e}");
    }
}
