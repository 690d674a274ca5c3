//! Typed Kubernetes objects: the [`Object`] trait every typed call is generic over, the
//! [`custom_resource!`](crate::custom_resource) macro for CRD types, object identities and the
//! JSON encoding objects cross the boundary in.

use std::borrow::Cow;
use std::fmt;

use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::bindings::wasmop::plugin::types;
use crate::error::Error;

mod encode;

pub(crate) use encode::{encode, json_text};

/// A Kubernetes group/version/kind, taken from a type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Gvk {
    /// API group; `""` for the core group.
    pub group: &'static str,
    /// API version within the group, e.g. `v1`.
    pub version: &'static str,
    /// Kind, e.g. `ConfigMap`.
    pub kind: &'static str,
}

impl Gvk {
    /// The GVK of `T`.
    pub fn of<T: Object>() -> Self {
        Self {
            group: static_name(T::group(&())),
            version: static_name(T::version(&())),
            kind: kind::<T>(),
        }
    }
}

impl fmt::Display for Gvk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}/{}", self.version, self.kind)
        } else {
            write!(f, "{}/{}/{}", self.group, self.version, self.kind)
        }
    }
}

impl From<Gvk> for types::Gvk {
    fn from(gvk: Gvk) -> Self {
        Self {
            group: gvk.group.to_owned(),
            version: gvk.version.to_owned(),
            kind: gvk.kind.to_owned(),
        }
    }
}

/// Whether a k8s-openapi scope marker is namespaced. Sealed: implemented for the two scopes a
/// top-level object can have (subresources are not objects).
pub trait Scope: sealed::Sealed {
    /// True for namespaced kinds.
    const NAMESPACED: bool;
}

impl Scope for NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl Scope for ClusterResourceScope {
    const NAMESPACED: bool = false;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for k8s_openapi::NamespaceResourceScope {}
    impl Sealed for k8s_openapi::ClusterResourceScope {}
}

/// A typed Kubernetes object the SDK can read and write.
///
/// Implemented for every type kube-rs knows as a static resource ([`kube_core::Resource`]
/// with `DynamicType = ()`): every k8s-openapi resource (`ConfigMap`, `Namespace`, ...), a
/// CRD type from kube's `#[derive(CustomResource)]` (see [`crd`](crate::crd), which also
/// writes its CRD), and a type declared with [`custom_resource!`](crate::custom_resource).
/// Never implemented by hand.
pub trait Object:
    kube_core::Resource<DynamicType = (), Scope: Scope> + Serialize + DeserializeOwned
{
    /// True when objects of this kind live in a namespace.
    const NAMESPACED: bool;

    /// The object's `metadata.name`, or `""` when it has none (only possible for an object
    /// built locally and not yet sent).
    fn name(&self) -> &str {
        self.meta().name.as_deref().unwrap_or_default()
    }

    /// The object's namespace; `None` for cluster-scoped kinds.
    fn namespace(&self) -> Option<&str> {
        self.meta().namespace.as_deref()
    }

    /// `metadata.generation`, which the API server bumps on every spec change.
    fn generation(&self) -> Option<i64> {
        self.meta().generation
    }

    /// True once deletion was requested (`metadata.deletionTimestamp` is set).
    fn is_being_deleted(&self) -> bool {
        self.meta().deletion_timestamp.is_some()
    }

    /// The value of label `key`, if set.
    fn label(&self, key: &str) -> Option<&str> {
        self.meta().labels.as_ref()?.get(key).map(String::as_str)
    }

    /// The value of annotation `key`, if set.
    fn annotation(&self, key: &str) -> Option<&str> {
        self.meta()
            .annotations
            .as_ref()?
            .get(key)
            .map(String::as_str)
    }
}

impl<T> Object for T
where
    T: kube_core::Resource<DynamicType = ()> + Serialize + DeserializeOwned,
    T::Scope: Scope,
{
    const NAMESPACED: bool = <T::Scope as Scope>::NAMESPACED;
}

/// `T`'s kind, e.g. `ConfigMap`.
pub(crate) fn kind<T: Object>() -> &'static str {
    static_name(T::kind(&()))
}

/// `T`'s apiVersion, e.g. `apps/v1`, or `v1` for the core group.
pub(crate) fn api_version<T: Object>() -> &'static str {
    static_name(T::api_version(&()))
}

/// `T`'s resource name in URLs, e.g. `configmaps`.
pub(crate) fn plural<T: Object>() -> &'static str {
    static_name(T::plural(&()))
}

/// A name from [`kube_core::Resource`] as a `&'static str`, which the SDK's identities and
/// errors hold. Every resource with `DynamicType = ()` that k8s-openapi, kube's derives and
/// [`custom_resource!`](crate::custom_resource) produce names itself with literals, so this
/// borrows; only a hand-written impl that builds a name at run time is leaked, for as long as
/// the guest instance lives, which is one call.
fn static_name(name: Cow<'static, str>) -> &'static str {
    match name {
        Cow::Borrowed(name) => name,
        Cow::Owned(name) => name.leak(),
    }
}

/// The identity of one object: its kind, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectRef {
    /// The object's kind.
    pub gvk: Gvk,
    /// Its namespace; `None` for cluster-scoped kinds.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

impl ObjectRef {
    /// The identity of the `T` named `name` in `namespace`, checking that a namespace is given
    /// exactly when `T` is namespaced.
    pub fn new<T: Object>(namespace: Option<&str>, name: &str) -> Result<Self, Error> {
        let gvk = Gvk::of::<T>();
        if name.is_empty() {
            return Err(Error::MissingName { kind: gvk.kind });
        }
        if T::NAMESPACED && namespace.is_none() {
            return Err(Error::MissingNamespace {
                kind: gvk.kind,
                name: name.to_owned(),
            });
        }
        check_scope::<T>(namespace)?;
        Ok(Self {
            gvk,
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
        })
    }

    /// The identity of `object`, from its metadata.
    pub fn of<T: Object>(object: &T) -> Result<Self, Error> {
        Self::new::<T>(object.namespace(), object.name())
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{} {namespace}/{}", self.gvk.kind, self.name),
            None => write!(f, "{} {}", self.gvk.kind, self.name),
        }
    }
}

impl From<ObjectRef> for types::ObjectRef {
    fn from(target: ObjectRef) -> Self {
        Self {
            kind: target.gvk.into(),
            namespace: target.namespace,
            name: target.name,
        }
    }
}

/// Checks that a namespace is given only for a namespaced `T` (`None` is valid for both: a
/// cluster-scoped object, or every namespace for `list`).
pub(crate) fn check_scope<T: Object>(namespace: Option<&str>) -> Result<(), Error> {
    match namespace {
        Some(namespace) if !T::NAMESPACED => Err(Error::UnexpectedNamespace {
            kind: kind::<T>(),
            namespace: namespace.to_owned(),
        }),
        _ => Ok(()),
    }
}

/// Decodes one object the host returned from `call`.
pub(crate) fn decode<T: Object>(json: &str, call: &'static str) -> Result<T, Error> {
    from_json(json).map_err(|source| Error::Decode {
        kind: kind::<T>(),
        call,
        source,
    })
}

/// Parses JSON the host wrote into `T`. When the JSON does not fit `T`, the error has no line
/// and column: the host's serialization is not something a plugin author can look at, so a
/// position in it would only make messages (and golden reports) change with the host. A
/// syntax error keeps its position.
///
/// One deserializer for both: a second one (such as `serde_json::from_value` for the error)
/// would compile every `Deserialize` impl under `T` twice, which for a Job or a Pod is
/// hundreds of kilobytes of the plugin.
pub(crate) fn from_json<T: DeserializeOwned>(json: &str) -> Result<T, serde_json::Error> {
    serde_json::from_str(json).map_err(without_position)
}

/// A data error's message without the ` at line L column C` serde_json appends.
fn without_position(e: serde_json::Error) -> serde_json::Error {
    if !e.is_data() {
        return e;
    }
    let text = e.to_string();
    let position = format!(" at line {} column {}", e.line(), e.column());
    let message = text.strip_suffix(&position).unwrap_or(&text);
    <serde_json::Error as serde::de::Error>::custom(message)
}

/// Declares a CRD type by hand: implements [`k8s_openapi::Resource`] and
/// [`k8s_openapi::Metadata`] for a struct with a `metadata: ObjectMeta` field, which makes it
/// an [`Object`]. No CRD is generated: for a plugin's own CRD, kube's
/// `#[derive(CustomResource)]` declares the type and writes its CRD (see [`crd`](crate::crd));
/// this macro is for a kind someone else installs, without schemars in the build.
///
/// Arguments: the type, then `group`, `version`, `kind`, `plural` (the resource name in URLs)
/// and the scope, `namespaced` or `cluster`.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use wasmop_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
/// use wasmop_guest::Object;
///
/// #[derive(Serialize, Deserialize)]
/// struct Database {
///     metadata: ObjectMeta,
///     spec: DatabaseSpec,
/// }
///
/// #[derive(Serialize, Deserialize)]
/// struct DatabaseSpec {
///     engine: String,
/// }
///
/// wasmop_guest::custom_resource!(Database, group = "demo.wasmop.dev", version = "v1",
///     kind = "Database", plural = "databases", namespaced);
///
/// assert!(Database::NAMESPACED);
/// assert_eq!(wasmop_guest::Gvk::of::<Database>().to_string(), "demo.wasmop.dev/v1/Database");
/// ```
#[macro_export]
macro_rules! custom_resource {
    ($ty:ty, group = $group:literal, version = $version:literal, kind = $kind:literal, plural = $plural:literal, namespaced $(,)?) => {
        $crate::custom_resource!(@impl $ty, $group, $version, $kind, $plural, NamespaceResourceScope);
    };
    ($ty:ty, group = $group:literal, version = $version:literal, kind = $kind:literal, plural = $plural:literal, cluster $(,)?) => {
        $crate::custom_resource!(@impl $ty, $group, $version, $kind, $plural, ClusterResourceScope);
    };
    (@impl $ty:ty, $group:literal, $version:literal, $kind:literal, $plural:literal, $scope:ident) => {
        impl $crate::k8s_openapi::Resource for $ty {
            const API_VERSION: &'static str = ::core::concat!($group, "/", $version);
            const GROUP: &'static str = $group;
            const KIND: &'static str = $kind;
            const VERSION: &'static str = $version;
            const URL_PATH_SEGMENT: &'static str = $plural;
            type Scope = $crate::k8s_openapi::$scope;
        }

        impl $crate::k8s_openapi::Metadata for $ty {
            type Ty = $crate::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

            fn metadata(&self) -> &Self::Ty {
                &self.metadata
            }

            fn metadata_mut(&mut self) -> &mut Self::Ty {
                &mut self.metadata
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    #[derive(serde::Serialize, serde::Deserialize, Default)]
    struct Widget {
        metadata: ObjectMeta,
        size: u32,
    }
    crate::custom_resource!(
        Widget,
        group = "example.com",
        version = "v1alpha1",
        kind = "Widget",
        plural = "widgets",
        cluster
    );

    #[test]
    fn builtin_and_custom_kinds_know_their_scope() {
        const { assert!(ConfigMap::NAMESPACED) };
        const { assert!(!Namespace::NAMESPACED) };
        const { assert!(!Widget::NAMESPACED) };
        assert_eq!(
            Gvk::of::<Widget>().to_string(),
            "example.com/v1alpha1/Widget"
        );
        assert_eq!(Gvk::of::<ConfigMap>().to_string(), "v1/ConfigMap");
    }

    #[test]
    fn object_ref_requires_a_namespace_exactly_for_namespaced_kinds() {
        assert!(matches!(
            ObjectRef::new::<ConfigMap>(None, "a"),
            Err(Error::MissingNamespace {
                kind: "ConfigMap",
                ..
            })
        ));
        assert!(matches!(
            ObjectRef::new::<Namespace>(Some("x"), "a"),
            Err(Error::UnexpectedNamespace { .. })
        ));
        assert!(matches!(
            ObjectRef::new::<Namespace>(None, ""),
            Err(Error::MissingName { .. })
        ));
        let target = ObjectRef::new::<ConfigMap>(Some("ns"), "a").expect("valid ref");
        assert_eq!(target.to_string(), "ConfigMap ns/a");
    }

    #[test]
    fn encoding_a_custom_type_adds_api_version_and_kind() {
        let widget = Widget {
            metadata: ObjectMeta {
                name: Some("w".into()),
                ..ObjectMeta::default()
            },
            size: 3,
        };
        let json: serde_json::Value =
            serde_json::from_str(&encode(&widget).expect("encodes")).expect("json");
        assert_eq!(json["apiVersion"], "example.com/v1alpha1");
        assert_eq!(json["kind"], "Widget");
        assert_eq!(json["size"], 3);
    }

    #[test]
    fn a_misfit_is_reported_without_a_position_in_the_host_json() {
        let err = from_json::<ConfigMap>(
            "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"data\":{\"a\":1}}",
        )
        .expect_err("data values are strings");
        assert!(!err.to_string().contains("line"), "{err}");
        let err = from_json::<ConfigMap>("{").expect_err("truncated");
        assert!(err.to_string().contains("line 1"), "{err}");
    }

    #[test]
    fn decoding_names_the_kind_and_the_call() {
        let err = decode::<ConfigMap>("{\"apiVersion\":\"v1\",\"kind\":\"Secret\"}", "get")
            .expect_err("kind mismatch");
        assert!(err.to_string().contains("ConfigMap"), "{err}");
        assert!(err.to_string().contains("get"), "{err}");
    }
}
