//! The WIT `info` record a plugin's `describe` returns, checked field by field and turned
//! into a [`PluginInfo`]. Everything in it is hostile input: it names the plugin's metrics,
//! reaches request paths, selectors and watches, and is shown in `/metrics`, `/status`,
//! `wasmop status`, `wasmop check` and logs.
//!
//! Every list is refused past its cap before any element is looked at, and every string's
//! length is checked before its characters, so the work done on a hostile declaration is
//! bounded by the caps, not by what the guest returned. An error names the field as the WIT
//! spells it (`owns[3].version`, `watches[0].mapping.label`) and quotes the value with
//! [`names::quote`] (escaped, cut at 64 characters).
//!
//! Duplicates in a list are merged, not refused: repeating a kind (an SDK builder called
//! twice) asks for nothing more, and merging costs at most the cap squared comparisons.

use std::collections::BTreeSet;

use wasmop_core::cluster::GroupVersionKind;
use wasmop_core::cluster::names::{self, NameError, Quoted, SelectorRefused};
use wasmop_core::plugin::{Mapping, Permission, PluginInfo, PluginName, Verb, Watch};

use super::super::bindings::v0_3::wasmop::plugin as wit;

/// The longest version string: 64 characters hold any semantic version with a pre-release
/// and build metadata (`1.2.3-rc.1+20260101.abcdef0`) several times over, and keep the
/// `version` label of `wasmop_plugin_info` and the `wasmop status` column short.
pub(super) const MAX_VERSION_LEN: usize = 64;
/// Owned kinds: each is a watch and a cache the host keeps and, for every change, an owner
/// lookup. Real operators own a handful (a Deployment, a Service, a ConfigMap); 200,000
/// duplicates once took 47 s and 420 MB to load.
pub(super) const MAX_OWNS: usize = 32;
/// Watched kinds, for the same reason as [`MAX_OWNS`].
pub(super) const MAX_WATCHES: usize = 32;
/// Permissions: a few per kind a plugin touches beyond its own; each is checked on every host
/// call.
pub(super) const MAX_PERMISSIONS: usize = 64;
/// Namespaces listed in one permission: more is a cluster-wide grant spelled out, which the
/// operator's `namespaces` setting expresses better.
pub(super) const MAX_PERMISSION_NAMESPACES: usize = 64;
/// Verbs listed in one permission: there are seven, so 64 leaves room for repetition only.
pub(super) const MAX_VERBS: usize = 64;

/// What a plugin's declaration gets wrong.
#[derive(Debug, thiserror::Error)]
pub enum DeclarationError {
    /// An identifier (the name, a kind, a namespace) does not follow its grammar.
    #[error(transparent)]
    Identifier(#[from] NameError),
    /// The version is too long or has a character outside the version grammar.
    #[error(
        "version {value} is not a version: at most {MAX_VERSION_LEN} characters of `0-9`, \
         `A-Z`, `a-z`, `.`, `+`, `_` and `-` (e.g. `1.2.3-rc.1+build.5`)"
    )]
    Version {
        /// The version, quoted.
        value: Quoted,
    },
    /// A selector is too long or does not parse.
    #[error(transparent)]
    Selector(#[from] SelectorRefused),
    /// The finalizer, a label key or an annotation key is not a qualified name.
    #[error(
        "{field} {value} is not a qualified name: {what}, `/`, then at most 63 letters, \
         digits, `-`, `_` or `.`, starting and ending with a letter or digit (e.g. \
         `example.com/cleanup`)"
    )]
    QualifiedName {
        /// Which field.
        field: String,
        /// The value, quoted.
        value: Quoted,
        /// What the prefix must be.
        what: &'static str,
    },
    /// The admission half's name or version differs from the reconciler's.
    #[error(
        "the admission describe says {field} {admission}, the reconciler's says {reconciler}: \
         a plugin has one {field}"
    )]
    Mismatch {
        /// `name` or `version`.
        field: &'static str,
        /// The reconciler's, quoted.
        reconciler: Quoted,
        /// The admission half's, quoted.
        admission: Quoted,
    },
    /// A webhook registration breaks a rule of the contract.
    #[error("{field}: {problem}")]
    Registration {
        /// Which field (`validating.rules[2].operations`).
        field: String,
        /// What is wrong.
        problem: String,
    },
    /// A list is longer than its cap.
    #[error("{field} lists {count} entries; at most {max} are accepted")]
    TooMany {
        /// Which list.
        field: String,
        /// How many it has.
        count: usize,
        /// The cap.
        max: usize,
    },
}

/// Checks `version` against the version grammar: printable ASCII of `[0-9A-Za-z.+_-]`, at
/// least one and at most [`MAX_VERSION_LEN`] characters.
pub(super) fn check_version(version: &str) -> Result<(), DeclarationError> {
    let ok = !version.is_empty()
        && version.len() <= MAX_VERSION_LEN
        && version
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(DeclarationError::Version {
            value: names::quote(version),
        })
    }
}

/// The name part of a qualified name: at most 63 characters of `[A-Za-z0-9_.-]`, starting and
/// ending with a letter or digit.
fn is_qualified_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= names::MAX_LABEL_LEN
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// A Kubernetes qualified name (label and annotation keys, finalizers): `prefix/name` or, when
/// `prefix_required` is false, `name`; the prefix a DNS-1123 subdomain.
fn check_qualified(
    field: &str,
    value: &str,
    prefix_required: bool,
) -> Result<(), DeclarationError> {
    // A prefix of at most 253 characters, `/`, a name of at most 63.
    let fits = value.len() <= names::MAX_GROUP_LEN + 1 + names::MAX_LABEL_LEN;
    let ok = fits
        && match value.split_once('/') {
            Some((prefix, name)) => {
                !prefix.is_empty()
                    && names::check_group(field, prefix).is_ok()
                    && is_qualified_part(name)
            }
            None => !prefix_required && is_qualified_part(value),
        };
    if ok {
        Ok(())
    } else {
        Err(DeclarationError::QualifiedName {
            field: field.to_owned(),
            value: names::quote(value),
            what: if prefix_required {
                "a DNS subdomain"
            } else {
                "an optional DNS subdomain"
            },
        })
    }
}

pub(super) fn capped<T>(field: &str, list: &[T], max: usize) -> Result<(), DeclarationError> {
    if list.len() > max {
        return Err(DeclarationError::TooMany {
            field: field.to_owned(),
            count: list.len(),
            max,
        });
    }
    Ok(())
}

pub(super) fn push_new<T: PartialEq>(list: &mut Vec<T>, item: T) {
    if !list.contains(&item) {
        list.push(item);
    }
}

pub(super) fn gvk(field: &str, g: &wit::types::Gvk) -> Result<GroupVersionKind, DeclarationError> {
    names::check_gvk(field, &g.group, &g.version, &g.kind)?;
    Ok(GroupVersionKind::gvk(&g.group, &g.version, &g.kind))
}

pub(super) fn selector(field: &str, s: Option<String>) -> Result<Option<String>, DeclarationError> {
    if let Some(s) = &s {
        names::check_selector(field, s)?;
    }
    Ok(s)
}

fn mapping(field: &str, m: wit::plugin_info::Mapping) -> Result<Mapping, DeclarationError> {
    use wit::plugin_info::Mapping as M;
    Ok(match m {
        M::SameName => Mapping::SameName,
        M::Label(l) => {
            check_qualified(&format!("{field}.label"), &l, false)?;
            Mapping::Label(l)
        }
        M::Annotation(a) => {
            check_qualified(&format!("{field}.annotation"), &a, false)?;
            Mapping::Annotation(a)
        }
        M::AllInNamespace => Mapping::AllInNamespace,
        M::All => Mapping::All,
    })
}

fn verb(v: wit::plugin_info::Verb) -> Verb {
    use wit::plugin_info::Verb as V;
    match v {
        V::Get => Verb::Get,
        V::List => Verb::List,
        V::Create => Verb::Create,
        V::Patch => Verb::Patch,
        V::Apply => Verb::Apply,
        V::Delete => Verb::Delete,
        V::PatchStatus => Verb::PatchStatus,
    }
}

pub(super) fn permission(
    field: &str,
    p: wit::plugin_info::Permission,
) -> Result<Permission, DeclarationError> {
    names::check_group(&format!("{field}.group"), &p.group)?;
    names::check_kind(&format!("{field}.kind"), &p.kind)?;
    capped(&format!("{field}.verbs"), &p.verbs, MAX_VERBS)?;
    capped(
        &format!("{field}.namespaces"),
        &p.namespaces,
        MAX_PERMISSION_NAMESPACES,
    )?;
    let mut namespaces = Vec::with_capacity(p.namespaces.len());
    for (i, ns) in p.namespaces.into_iter().enumerate() {
        names::check_namespace(&format!("{field}.namespaces[{i}]"), &ns)?;
        push_new(&mut namespaces, ns);
    }
    Ok(Permission {
        group: p.group,
        kind: p.kind,
        verbs: p.verbs.into_iter().map(verb).collect::<BTreeSet<_>>(),
        namespaces,
    })
}

/// Validates what `describe` returned (see the module documentation for the rules).
pub(super) fn convert_info(info: wit::plugin_info::Info) -> Result<PluginInfo, DeclarationError> {
    // Lengths and list sizes first: nothing below walks a list longer than its cap.
    names::check_namespace("name", &info.name)?;
    check_version(&info.version)?;
    capped("owns", &info.owns, MAX_OWNS)?;
    capped("watches", &info.watches, MAX_WATCHES)?;
    capped("permissions", &info.permissions, MAX_PERMISSIONS)?;
    let Ok(name) = PluginName::new(info.name) else {
        unreachable!("a DNS-1123 label is a plugin name");
    };
    let primary = gvk("primary", &info.primary)?;
    let primary_selector = selector("primary-selector", info.primary_selector)?;
    let mut owns = Vec::with_capacity(info.owns.len());
    for (i, g) in info.owns.iter().enumerate() {
        push_new(&mut owns, gvk(&format!("owns[{i}]"), g)?);
    }
    let mut watches = Vec::with_capacity(info.watches.len());
    for (i, w) in info.watches.into_iter().enumerate() {
        let field = format!("watches[{i}]");
        let watch = Watch {
            kind: gvk(&format!("{field}.kind"), &w.kind)?,
            selector: selector(&format!("{field}.selector"), w.selector)?,
            mapping: mapping(&format!("{field}.mapping"), w.mapping)?,
        };
        push_new(&mut watches, watch);
    }
    let mut permissions: Vec<Permission> = Vec::with_capacity(info.permissions.len());
    for (i, p) in info.permissions.into_iter().enumerate() {
        let p = permission(&format!("permissions[{i}]"), p)?;
        // The same kind over the same namespaces twice: one permission with both verb sets.
        match permissions
            .iter_mut()
            .find(|q| (&q.group, &q.kind, &q.namespaces) == (&p.group, &p.kind, &p.namespaces))
        {
            Some(q) => q.verbs.extend(p.verbs),
            None => permissions.push(p),
        }
    }
    let finalizer = match info.finalizer {
        Some(f) => {
            check_qualified("finalizer", &f, true)?;
            Some(f)
        }
        None => None,
    };
    Ok(PluginInfo {
        name,
        version: info.version,
        primary,
        primary_selector,
        owns,
        watches,
        finalizer,
        reconcile_on_metadata_change: info.reconcile_on_metadata_change,
        permissions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use wit::plugin_info::{Info, Mapping as M, Permission as P, Verb as V, Watch as W};
    use wit::types::Gvk;

    fn g(group: &str, version: &str, kind: &str) -> Gvk {
        Gvk {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    fn info() -> Info {
        Info {
            name: "web".into(),
            version: "1.2.3-rc.1+build.5".into(),
            primary: g("wasmop.test", "v1alpha1", "Target"),
            primary_selector: Some("app=web".into()),
            owns: vec![g("", "v1", "ConfigMap")],
            watches: vec![W {
                kind: g("", "v1", "Namespace"),
                selector: None,
                mapping: M::Label("wasmop.test/target".into()),
            }],
            finalizer: Some("wasmop.test/cleanup".into()),
            reconcile_on_metadata_change: false,
            permissions: vec![P {
                group: "".into(),
                kind: "Secret".into(),
                verbs: vec![V::Get],
                namespaces: vec!["team-a".into()],
            }],
        }
    }

    fn refused(change: impl FnOnce(&mut Info)) -> String {
        let mut i = info();
        change(&mut i);
        convert_info(i).expect_err("refused").to_string()
    }

    #[test]
    fn a_valid_declaration_passes_unchanged() {
        let p = convert_info(info()).expect("valid");
        assert_eq!(p.version, "1.2.3-rc.1+build.5");
        assert_eq!(p.owns.len(), 1);
        assert_eq!(p.finalizer.as_deref(), Some("wasmop.test/cleanup"));
    }

    #[test]
    fn a_version_outside_the_grammar_is_refused_quoted() {
        for bad in [
            "",
            "1\n# HELP",
            "1\"} 1",
            "\u{1b}[31m1",
            "1\u{202e}",
            "1 2",
            &"1".repeat(MAX_VERSION_LEN + 1),
        ] {
            let e = refused(|i| i.version = bad.into());
            assert!(e.starts_with("version `"), "{e}");
            assert!(!e.contains('\n') && !e.contains('\u{1b}'), "{e}");
        }
        let huge = refused(|i| i.version = "x".repeat(48 << 20));
        assert!(huge.len() < 400, "{huge}");
        assert!(huge.contains("(50331648 bytes)"), "{huge}");
        convert_info(Info {
            version: "v".repeat(MAX_VERSION_LEN),
            ..info()
        })
        .expect("64 characters");
    }

    #[test]
    fn a_huge_name_is_refused_without_quoting_it_whole() {
        let e = refused(|i| i.name = "a".repeat(48 << 20));
        assert!(e.starts_with("name `"), "{e}");
        assert!(e.len() < 200, "{e}");
    }

    #[test]
    fn every_kind_is_checked_by_its_grammar_and_named() {
        let e = refused(|i| i.primary.version = "v1/namespaces/kube-system/secrets/x?y=".into());
        assert!(e.starts_with("primary.version `v1/"), "{e}");
        let e = refused(|i| i.owns.push(g("apps/v1", "v1", "Deployment")));
        assert!(e.starts_with("owns[1].group `apps/v1`"), "{e}");
        let e = refused(|i| i.watches[0].kind.kind = "Name?space".into());
        assert!(e.starts_with("watches[0].kind.kind `Name?space`"), "{e}");
        let e = refused(|i| i.permissions[0].kind = "*".into());
        assert!(e.starts_with("permissions[0].kind `*`"), "{e}");
        let e = refused(|i| i.permissions[0].namespaces.push("../kube-system".into()));
        assert!(e.starts_with("permissions[0].namespaces[1] `../"), "{e}");
    }

    #[test]
    fn selectors_mapping_keys_and_the_finalizer_follow_their_grammars() {
        let e = refused(|i| i.primary_selector = Some("app=web&x=y".into()));
        assert!(e.starts_with("primary-selector"), "{e}");
        let e = refused(|i| i.watches[0].selector = Some("a in (".into()));
        assert!(e.starts_with("watches[0].selector"), "{e}");
        for bad in ["", "a b", "x/", "/x", "Bad_Domain/x", "a/b/c", "x\n"] {
            let e = refused(|i| i.watches[0].mapping = M::Annotation(bad.into()));
            assert!(e.starts_with("watches[0].mapping.annotation `"), "{e}");
        }
        for bad in [
            "cleanup",
            "example.com/",
            "example.com/a b",
            "ex ample.com/x",
        ] {
            let e = refused(|i| i.finalizer = Some(bad.into()));
            assert!(e.starts_with("finalizer `"), "{e}");
        }
        let mut ok = info();
        ok.watches[0].mapping = M::Label("app".into());
        convert_info(ok).expect("an unprefixed label key");
    }

    #[test]
    fn lists_are_capped_before_they_are_read_and_duplicates_merged() {
        let e = refused(|i| i.owns = vec![g("", "v1", "ConfigMap"); 200_000]);
        assert_eq!(e, "owns lists 200000 entries; at most 32 are accepted");
        let e = refused(|i| {
            i.watches = (0..=MAX_WATCHES)
                .map(|_| W {
                    kind: g("", "v1", "Pod"),
                    selector: None,
                    mapping: M::SameName,
                })
                .collect()
        });
        assert!(e.starts_with("watches lists 33 entries"), "{e}");
        let e = refused(|i| i.permissions[0].namespaces = vec!["a".into(); 65]);
        assert!(e.starts_with("permissions[0].namespaces lists 65"), "{e}");
        let mut dup = info();
        dup.owns = vec![g("", "v1", "ConfigMap"); MAX_OWNS];
        dup.watches.push(dup.watches[0].clone());
        dup.permissions.push(P {
            verbs: vec![V::List, V::Get, V::Get],
            ..dup.permissions[0].clone()
        });
        let p = convert_info(dup).expect("duplicates under the caps");
        assert_eq!(p.owns.len(), 1);
        assert_eq!(p.watches.len(), 1);
        assert_eq!(p.permissions.len(), 1);
        assert_eq!(p.permissions[0].verbs.len(), 2);
    }
}
