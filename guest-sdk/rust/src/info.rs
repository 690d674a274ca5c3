//! What a plugin declares about itself: [`Info`] and its parts, built from types so that a
//! kind is never misspelt.

use crate::bindings::exports::wasmop::plugin::reconciler as wit;
use crate::bindings::wasmop::plugin::plugin_info as wit_info;
use crate::object::{Gvk, Object};

/// The verbs a [`Permission`] can grant; they mirror the host calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// [`Context::get`](crate::Context::get).
    Get,
    /// [`Context::list`](crate::Context::list).
    List,
    /// [`Context::create`](crate::Context::create).
    Create,
    /// [`Context::patch`](crate::Context::patch) with a merge, JSON or strategic patch.
    Patch,
    /// [`Context::apply`](crate::Context::apply), and `patch` with [`Patch::Apply`](crate::Patch::Apply).
    Apply,
    /// [`Context::delete`](crate::Context::delete).
    Delete,
    /// [`Context::patch_status`](crate::Context::patch_status).
    PatchStatus,
}

impl From<Verb> for wit_info::Verb {
    fn from(verb: Verb) -> Self {
        match verb {
            Verb::Get => Self::Get,
            Verb::List => Self::List,
            Verb::Create => Self::Create,
            Verb::Patch => Self::Patch,
            Verb::Apply => Self::Apply,
            Verb::Delete => Self::Delete,
            Verb::PatchStatus => Self::PatchStatus,
        }
    }
}

/// A permission beyond those the primary, owned and watched kinds imply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permission {
    gvk: Gvk,
    verbs: Vec<Verb>,
    namespaces: Vec<String>,
}

impl Permission {
    /// `verbs` on objects of kind `T`, in the namespaces the plugin watches.
    pub fn new<T: Object>(verbs: impl IntoIterator<Item = Verb>) -> Self {
        Self {
            gvk: Gvk::of::<T>(),
            verbs: verbs.into_iter().collect(),
            namespaces: Vec::new(),
        }
    }

    /// Narrows the permission to these namespaces.
    #[must_use]
    pub fn in_namespaces(
        mut self,
        namespaces: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.namespaces = namespaces.into_iter().map(Into::into).collect();
        self
    }
}

/// How a change to a watched kind selects the primary objects to reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mapping {
    /// The primary object with the same namespace and name.
    SameName,
    /// The primary object named by this label's value, in the changed object's namespace.
    Label(String),
    /// The primary object named by this annotation's value: `name` or `namespace/name`.
    Annotation(String),
    /// Every primary object in the changed object's namespace.
    AllInNamespace,
    /// Every primary object.
    All,
}

impl From<Mapping> for wit_info::Mapping {
    fn from(mapping: Mapping) -> Self {
        match mapping {
            Mapping::SameName => Self::SameName,
            Mapping::Label(key) => Self::Label(key),
            Mapping::Annotation(key) => Self::Annotation(key),
            Mapping::AllInNamespace => Self::AllInNamespace,
            Mapping::All => Self::All,
        }
    }
}

/// Everything a plugin declares, built with chained calls. The primary kind is the
/// reconciler's [`Object`](crate::Reconciler::Object) type and is filled in by the SDK.
///
/// Declaring kinds grants calls on them: the primary kind may be read (get, list), applied,
/// patched and have its status patched; owned kinds ([`owns`](Self::owns)) may also be
/// created and deleted; watched kinds ([`watches`](Self::watches)) may be read. Ask for
/// anything else with [`permission`](Self::permission), and for no more than the plugin uses:
/// the operator sees the list before installing it.
///
/// ```
/// use wasmop_guest::k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
/// use wasmop_guest::{Info, Mapping, Permission, Verb};
///
/// let info = Info::new("config-mirror", "1.0.0")
///     .selector("demo.wasmop.dev/mirror=true")
///     .owns::<ConfigMap>()
///     .watches::<Namespace>(Mapping::All)
///     .finalizer("demo.wasmop.dev/cleanup")
///     .permission(Permission::new::<Secret>([Verb::Get]).in_namespaces(["shared"]));
/// # let _ = info;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Info {
    name: String,
    version: String,
    selector: Option<String>,
    owns: Vec<Gvk>,
    watches: Vec<(Gvk, Option<String>, Mapping)>,
    finalizer: Option<String>,
    reconcile_on_metadata_change: bool,
    permissions: Vec<Permission>,
}

impl Info {
    /// A plugin named `name` (a DNS-1123 label; it names the controller, the field manager
    /// `wasmop/<name>` and metrics; the host rejects anything else) at `version` (for people;
    /// `env!("CARGO_PKG_VERSION")` is a good choice).
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            selector: None,
            owns: Vec::new(),
            watches: Vec::new(),
            finalizer: None,
            reconcile_on_metadata_change: false,
            permissions: Vec::new(),
        }
    }

    /// The plugin's name and version, which its admission half shares.
    pub(crate) fn identity(self) -> (String, String) {
        (self.name, self.version)
    }

    /// Reconciles only primary objects matching this label selector (Kubernetes syntax).
    pub fn selector(mut self, selector: impl Into<String>) -> Self {
        self.selector = Some(selector.into());
        self
    }

    /// Declares that the plugin creates `T` objects it owns through a controller
    /// ownerReference ([`owner_reference`](crate::owner_reference)): a change to one
    /// reconciles its owner. Grants get/list/create/patch/apply/delete on `T`.
    pub fn owns<T: Object>(mut self) -> Self {
        self.owns.push(Gvk::of::<T>());
        self
    }

    /// Watches `T` as well; `mapping` says which primary objects a change reconciles.
    /// Grants get/list on `T`.
    pub fn watches<T: Object>(self, mapping: Mapping) -> Self {
        self.watch(Gvk::of::<T>(), None, mapping)
    }

    /// Like [`watches`](Self::watches), for the `T` objects matching a label selector.
    pub fn watches_selected<T: Object>(
        self,
        selector: impl Into<String>,
        mapping: Mapping,
    ) -> Self {
        self.watch(Gvk::of::<T>(), Some(selector.into()), mapping)
    }

    fn watch(mut self, gvk: Gvk, selector: Option<String>, mapping: Mapping) -> Self {
        self.watches.push((gvk, selector, mapping));
        self
    }

    /// Asks the host to keep this finalizer on every primary object and to call
    /// [`cleanup`](crate::Reconciler::cleanup) when one is being deleted.
    pub fn finalizer(mut self, name: impl Into<String>) -> Self {
        self.finalizer = Some(name.into());
        self
    }

    /// Reconciles also on changes that do not bump `metadata.generation` (labels,
    /// annotations, status); by default only spec changes (and resyncs) do.
    pub fn reconcile_on_metadata_change(mut self) -> Self {
        self.reconcile_on_metadata_change = true;
        self
    }

    /// Asks for a permission beyond those implied by the primary, owned and watched kinds.
    pub fn permission(mut self, permission: Permission) -> Self {
        self.permissions.push(permission);
        self
    }

    /// The WIT record, with `primary` as the primary kind.
    pub(crate) fn into_wit(self, primary: Gvk) -> wit::Info {
        wit::Info {
            name: self.name,
            version: self.version,
            primary: primary.into(),
            primary_selector: self.selector,
            owns: self.owns.into_iter().map(Into::into).collect(),
            watches: self
                .watches
                .into_iter()
                .map(|(gvk, selector, mapping)| wit_info::Watch {
                    kind: gvk.into(),
                    selector,
                    mapping: mapping.into(),
                })
                .collect(),
            finalizer: self.finalizer,
            reconcile_on_metadata_change: self.reconcile_on_metadata_change,
            permissions: self.permissions.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<Permission> for wit_info::Permission {
    fn from(p: Permission) -> Self {
        Self {
            group: p.gvk.group.to_owned(),
            kind: p.gvk.kind.to_owned(),
            verbs: p.verbs.into_iter().map(Into::into).collect(),
            namespaces: p.namespaces,
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};

    use super::*;

    #[test]
    fn info_fills_in_the_primary_and_derives_kinds_from_types() {
        let info = Info::new("mirror", "1.2.3")
            .selector("a=b")
            .owns::<ConfigMap>()
            .watches_selected::<Namespace>("team", Mapping::All)
            .permission(
                Permission::new::<Secret>([Verb::Get, Verb::List]).in_namespaces(["shared"]),
            )
            .into_wit(Gvk::of::<ConfigMap>());
        assert_eq!(info.primary.kind, "ConfigMap");
        assert_eq!(info.primary.group, "");
        assert_eq!(info.primary_selector.as_deref(), Some("a=b"));
        assert_eq!(info.owns[0].version, "v1");
        assert_eq!(info.watches[0].kind.kind, "Namespace");
        assert_eq!(info.watches[0].selector.as_deref(), Some("team"));
        assert!(matches!(info.watches[0].mapping, wit_info::Mapping::All));
        assert_eq!(info.permissions[0].kind, "Secret");
        assert_eq!(
            info.permissions[0].verbs,
            vec![wit_info::Verb::Get, wit_info::Verb::List]
        );
        assert_eq!(info.permissions[0].namespaces, vec!["shared".to_owned()]);
        assert!(info.finalizer.is_none());
        assert!(!info.reconcile_on_metadata_change);
    }
}
