//! Grants: what one plugin may do, derived from what it declares ([`Declared`]) and what the
//! operator allows ([`Policy`]). Every host call is checked against them; a refusal is a
//! [`Denial`], which the guest sees as `kube-error::denied` and the operator as a typed outcome.
//!
//! Kinds are matched by group and kind, not version: `apps/v1` and `apps/v1beta1` Deployments
//! are the same objects to the API server, so every spelling of one resource passes or fails
//! the same check. That holds because every part of a kind a plugin names is checked by its
//! grammar first ([`crate::cluster::names`]: no version can carry a path), and discovery
//! resolves a kind only to the resource of exactly that group, version and kind.
//!
//! # Implied grants and what they never cover
//! A plugin's primary, owned and watched kinds imply verbs on them (see [`Grants::new`]).
//! They imply nothing on a **sensitive kind** ([`SensitiveKinds`]: Secrets, ServiceAccounts,
//! RBAC, admission and CRD configuration, Nodes, and whatever the operator adds): there only
//! the operator's explicit grants count, and the host refuses at load a plugin that declares
//! one with no grant for it. Nor do they cover **writes to cluster-scoped objects**: a write
//! without a namespace is allowed only by an explicit grant of that verb on that kind.

mod refused;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::plugin::{Declared, Permission, Verb};

pub use self::refused::{PluginRefused, check_grants, check_reviews};

/// The operator's policy for one plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The namespaces the plugin may touch; `None` means all. Cluster-scoped objects (no
    /// namespace) are not confined by this.
    pub namespaces: Option<BTreeSet<String>>,
    /// Whether the plugin gets the permissions it asks for beyond those its kinds imply.
    pub extra_permissions: ExtraPermissions,
    /// What the operator granted explicitly (`plugins.<name>.grants`): the only source of
    /// verbs on sensitive kinds and of writes to cluster-scoped objects.
    pub explicit: Vec<Permission>,
    /// Kinds whose implied verbs need an explicit grant.
    pub sensitive: SensitiveKinds,
    /// Whether implied verbs cover writes to cluster-scoped objects.
    pub implied_cluster_writes: bool,
}

impl Default for Policy {
    /// The host's policy with nothing granted explicitly: the built-in sensitive kinds, no
    /// implied cluster-scoped writes.
    fn default() -> Self {
        Self {
            namespaces: None,
            extra_permissions: ExtraPermissions::Grant,
            explicit: Vec::new(),
            sensitive: SensitiveKinds::builtin(),
            implied_cluster_writes: false,
        }
    }
}

impl Policy {
    /// What a plugin author's own runs use (`wasmop test`, a plugin crate's tests): the plugin
    /// gets what it declares, sensitive kinds and cluster-scoped writes included, because there
    /// is no operator to grant them and no cluster to protect. A host never runs plugins so.
    pub fn declared() -> Self {
        Self {
            sensitive: SensitiveKinds::default(),
            implied_cluster_writes: true,
            ..Self::default()
        }
    }
}

/// Kinds that implied grants never cover, by `(group, kind)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SensitiveKinds(BTreeSet<(String, String)>);

/// The built-in sensitive kinds, and why each: reading or writing them is a way to more
/// authority than the plugin's own kinds give.
const BUILTIN_SENSITIVE: &[(&str, &str)] = &[
    // Credentials: tokens, keys, passwords (a token Secret is also how to mint a token).
    ("", "Secret"),
    // Identities whose tokens a pod can be given.
    ("", "ServiceAccount"),
    // The machines themselves: labels and taints steer workloads, status is trusted.
    ("", "Node"),
    // Who may do what: any write here is privilege escalation.
    ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    // What the API server lets through and rewrites.
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
    ),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
    ),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "MutatingAdmissionPolicyBinding",
    ),
    // Which APIs exist and who serves them.
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    // Certificates the cluster signs.
    ("certificates.k8s.io", "CertificateSigningRequest"),
];

impl SensitiveKinds {
    /// The built-in list (Secrets, ServiceAccounts, Nodes, RBAC, admission configuration,
    /// CRDs, APIServices, CertificateSigningRequests).
    pub fn builtin() -> Self {
        Self(
            BUILTIN_SENSITIVE
                .iter()
                .map(|(g, k)| ((*g).to_owned(), (*k).to_owned()))
                .collect(),
        )
    }

    /// The same list with `(group, kind)` added (the operator's own).
    #[must_use]
    pub fn with(mut self, group: impl Into<String>, kind: impl Into<String>) -> Self {
        self.0.insert((group.into(), kind.into()));
        self
    }

    /// Whether `group/kind` is sensitive.
    pub(crate) fn contains(&self, group: &str, kind: &str) -> bool {
        self.0.iter().any(|(g, k)| g == group && k == kind)
    }
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
pub(crate) fn kind_label(group: &str, kind: &str) -> String {
    let group = if group.is_empty() { "core" } else { group };
    format!("{group}/{kind}")
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct KindGrant {
    /// Verbs granted in every namespace the policy allows.
    everywhere: BTreeSet<Verb>,
    /// Verbs granted only in named namespaces.
    in_namespaces: BTreeMap<String, BTreeSet<Verb>>,
    /// Write verbs allowed on cluster-scoped objects (no namespace): explicit grants only,
    /// unless the policy lets implied verbs cover them.
    cluster_writes: BTreeSet<Verb>,
}

impl KindGrant {
    fn add(&mut self, verbs: impl IntoIterator<Item = Verb> + Clone, namespaces: &[String]) {
        if namespaces.is_empty() {
            self.everywhere.extend(verbs);
        } else {
            for ns in namespaces {
                self.in_namespaces
                    .entry(ns.clone())
                    .or_default()
                    .extend(verbs.clone());
            }
        }
    }
}

/// Whether `verb` changes an object (and so, without a namespace, a cluster-scoped one).
fn is_write(verb: Verb) -> bool {
    !matches!(verb, Verb::Get | Verb::List)
}

/// The verbs a plugin holds, per kind. Built once per plugin version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grants {
    kinds: BTreeMap<(String, String), KindGrant>,
    namespaces: Option<BTreeSet<String>>,
}

/// What a plugin's primary kind implies.
pub(crate) const PRIMARY_VERBS: [Verb; 5] = [
    Verb::Get,
    Verb::List,
    Verb::Patch,
    Verb::Apply,
    Verb::PatchStatus,
];
/// What an owned kind implies.
pub(crate) const OWNED_VERBS: [Verb; 6] = [
    Verb::Get,
    Verb::List,
    Verb::Create,
    Verb::Patch,
    Verb::Apply,
    Verb::Delete,
];
/// What a watched kind implies.
pub(crate) const WATCHED_VERBS: [Verb; 2] = [Verb::Get, Verb::List];

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
    /// permissions (the reconciler's and the admission half's) are granted as the policy
    /// says. A plugin without a reconciler holds only its permissions.
    pub fn new<'a>(
        declared: impl Into<Declared<'a>>,
        policy: &Policy,
    ) -> Result<Self, PolicyError> {
        let declared = declared.into();
        let mut kinds: BTreeMap<(String, String), KindGrant> = BTreeMap::new();
        let mut implied = |group: &str, kind: &str, verbs: &[Verb]| {
            let entry = kinds
                .entry((group.to_owned(), kind.to_owned()))
                .or_default();
            if !policy.sensitive.contains(group, kind) {
                entry.everywhere.extend(verbs.iter().copied());
                if policy.implied_cluster_writes {
                    entry
                        .cluster_writes
                        .extend(verbs.iter().copied().filter(|v| is_write(*v)));
                }
                return;
            }
            // A sensitive kind: only what the operator granted explicitly, where it did.
            for p in policy
                .explicit
                .iter()
                .filter(|p| p.group == group && p.kind == kind)
            {
                let verbs = verbs.iter().copied().filter(|v| p.verbs.contains(v));
                entry.add(verbs, &p.namespaces);
            }
        };
        if let Some(info) = declared.reconciler {
            implied(&info.primary.group, &info.primary.kind, &PRIMARY_VERBS);
            for owned in &info.owns {
                implied(&owned.group, &owned.kind, &OWNED_VERBS);
            }
            for watch in &info.watches {
                implied(&watch.kind.group, &watch.kind.kind, &WATCHED_VERBS);
            }
        }
        for p in declared.permissions() {
            if p.kind.contains('*') || p.group.contains('*') {
                return Err(PolicyError::Wildcard {
                    plugin: declared.name.to_string(),
                    kind: kind_label(&p.group, &p.kind),
                });
            }
            if policy.extra_permissions == ExtraPermissions::Refuse {
                return Err(PolicyError::ExtraPermissionRefused {
                    plugin: declared.name.to_string(),
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
            entry.add(p.verbs.iter().copied(), &p.namespaces);
            if policy.implied_cluster_writes && p.namespaces.is_empty() {
                entry
                    .cluster_writes
                    .extend(p.verbs.iter().copied().filter(|v| is_write(*v)));
            }
        }
        // Cluster-scoped writes: what the operator granted in no particular namespace, on the
        // kinds the plugin declares.
        for p in policy.explicit.iter().filter(|p| p.namespaces.is_empty()) {
            if let Some(entry) = kinds.get_mut(&(p.group.clone(), p.kind.clone())) {
                entry
                    .cluster_writes
                    .extend(p.verbs.iter().copied().filter(|v| is_write(*v)));
            }
        }
        Ok(Self {
            kinds,
            namespaces: policy.namespaces.clone(),
        })
    }

    /// Whether `verb` on `group/kind` is granted in every namespace (not counting writes to
    /// cluster-scoped objects, which [`check`](Self::check) judges on their own).
    pub(crate) fn covers_everywhere(&self, verb: Verb, group: &str, kind: &str) -> bool {
        self.kinds
            .iter()
            .any(|((g, k), grant)| g == group && k == kind && grant.everywhere.contains(&verb))
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
        if namespace.is_none() && is_write(verb) && !grant.cluster_writes.contains(&verb) {
            return Err(deny(format!(
                "a {verb} without a namespace writes a cluster-scoped object, which only an \
                 explicit grant allows (`{{group: \"{group}\", kind: {kind}, verbs: [{verb}]}}` \
                 under the plugin's `grants` in the host config)"
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
    use crate::plugin::{Mapping, Permission, PluginInfo, PluginName, Watch};
    use kube_core::GroupVersionKind;

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

    #[test]
    fn owned_sensitive_kinds_get_only_what_the_operator_granted() {
        let mut i = info(vec![]);
        i.owns.push(GroupVersionKind::gvk("", "v1", "Secret"));
        let g = Grants::new(&i, &Policy::default()).expect("grants");
        for verb in OWNED_VERBS {
            g.check(verb, "", "Secret", Some("a"))
                .expect_err("implied nothing");
        }
        let policy = Policy {
            explicit: vec![secret_read(vec!["db".into()])],
            ..Policy::default()
        };
        let g = Grants::new(&i, &policy).expect("grants");
        g.check(Verb::Get, "", "Secret", Some("db"))
            .expect("granted get in db");
        g.check(Verb::Get, "", "Secret", Some("web"))
            .expect_err("only in db");
        g.check(Verb::List, "", "Secret", Some("db"))
            .expect_err("list not granted");
        // A plugin author's own runs get what the plugin declares.
        let g = Grants::new(&i, &Policy::declared()).expect("grants");
        g.check(Verb::Delete, "", "Secret", Some("a"))
            .expect("declared");
    }

    #[test]
    fn writes_without_a_namespace_need_an_explicit_grant() {
        let mut i = info(vec![]);
        i.owns
            .push(GroupVersionKind::gvk("", "v1", "PersistentVolume"));
        let g = Grants::new(&i, &Policy::default()).expect("grants");
        g.check(Verb::Get, "", "PersistentVolume", None)
            .expect("reads are implied");
        let err = g
            .check(Verb::Apply, "", "PersistentVolume", None)
            .expect_err("cluster-scoped write");
        assert!(
            err.to_string().contains("only an explicit grant allows"),
            "{err}"
        );
        g.check(Verb::Apply, "", "ConfigMap", Some("a"))
            .expect("namespaced write");
        let policy = Policy {
            explicit: vec![Permission {
                group: String::new(),
                kind: "PersistentVolume".into(),
                verbs: [Verb::Apply].into(),
                namespaces: vec![],
            }],
            ..Policy::default()
        };
        let g = Grants::new(&i, &policy).expect("grants");
        g.check(Verb::Apply, "", "PersistentVolume", None)
            .expect("granted");
        g.check(Verb::Delete, "", "PersistentVolume", None)
            .expect_err("only apply");
        let g = Grants::new(&i, &Policy::declared()).expect("grants");
        g.check(Verb::Delete, "", "PersistentVolume", None)
            .expect("declared");
    }
}
