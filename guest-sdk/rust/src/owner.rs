//! Owner references: how a plugin marks the objects it creates as its primary object's, so the
//! host reconciles the owner when they change and Kubernetes garbage-collects them with it.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::error::Error;
use crate::object::{self, Object, ObjectRef};

/// A controller reference to `owner` (`controller: true`, `blockOwnerDeletion: true`), for
/// `metadata.ownerReferences` of an object the plugin creates.
///
/// A namespaced owner can only own objects in its own namespace; a cluster-scoped owner (a
/// Namespace, say) can own objects anywhere. Kubernetes ignores other references, so copies
/// in other namespaces need a finalizer instead.
///
/// # Errors
/// [`Error::MissingUid`] when `owner` has no uid or [`Error::MissingName`] when it has no
/// name: an owner must be an object read from the cluster, such as the one `reconcile` gets.
pub fn owner_reference<T: Object>(owner: &T) -> Result<OwnerReference, Error> {
    let target = ObjectRef::of(owner)?;
    let Some(uid) = owner.meta().uid.clone() else {
        return Err(Error::MissingUid { owner: target });
    };
    Ok(OwnerReference {
        api_version: object::api_version::<T>().to_owned(),
        kind: object::kind::<T>().to_owned(),
        name: target.name,
        uid,
        controller: Some(true),
        block_owner_deletion: Some(true),
    })
}

/// A reference to `object` as status fields and Events carry one (a `core/v1`
/// `ObjectReference`: apiVersion, kind, namespace, name, uid, resourceVersion), e.g. a
/// CronJob's `status.active` Jobs: client-go's `reference.GetReference`.
///
/// ```
/// use wasmop_guest::k8s_openapi::api::batch::v1::Job;
/// use wasmop_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
///
/// let job = Job {
///     metadata: ObjectMeta {
///         name: Some("nightly-29001".into()),
///         namespace: Some("apps".into()),
///         uid: Some("u-1".into()),
///         ..ObjectMeta::default()
///     },
///     ..Job::default()
/// };
/// let r = wasmop_guest::object_reference(&job).unwrap();
/// assert_eq!((r.api_version.as_deref(), r.kind.as_deref()), (Some("batch/v1"), Some("Job")));
/// assert_eq!(r.uid.as_deref(), Some("u-1"));
/// ```
///
/// # Errors
/// [`Error::MissingName`] (or a namespace error) when `object` does not name itself.
pub fn object_reference<T: Object>(object: &T) -> Result<ObjectReference, Error> {
    let target = ObjectRef::of(object)?;
    let meta = object.meta();
    Ok(ObjectReference {
        api_version: Some(object::api_version::<T>().to_owned()),
        kind: Some(object::kind::<T>().to_owned()),
        namespace: target.namespace,
        name: Some(target.name),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        field_path: None,
    })
}

/// Metadata for an object named `name` owned by `owner`: in the owner's namespace (none for
/// a cluster-scoped owner), with a controller reference to it.
///
/// ```
/// use wasmop_guest::k8s_openapi::api::core::v1::ConfigMap;
/// use wasmop_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
///
/// let owner = ConfigMap {
///     metadata: ObjectMeta {
///         name: Some("source".into()),
///         namespace: Some("apps".into()),
///         uid: Some("0d5c1f5e-4a5e-4a4e-9a36-5e1a7b5f3b1c".into()),
///         ..ObjectMeta::default()
///     },
///     ..ConfigMap::default()
/// };
/// let meta = wasmop_guest::owned_meta(&owner, "source-copy").unwrap();
/// assert_eq!(meta.namespace.as_deref(), Some("apps"));
/// assert_eq!(meta.owner_references.unwrap()[0].controller, Some(true));
/// ```
///
/// # Errors
/// As [`owner_reference`].
pub fn owned_meta<T: Object>(owner: &T, name: impl Into<String>) -> Result<ObjectMeta, Error> {
    Ok(ObjectMeta {
        name: Some(name.into()),
        namespace: owner.namespace().map(str::to_owned),
        owner_references: Some(vec![owner_reference(owner)?]),
        ..ObjectMeta::default()
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Namespace;

    use super::*;

    #[test]
    fn owner_without_uid_is_refused_with_its_name() {
        let owner = Namespace {
            metadata: ObjectMeta {
                name: Some("team-a".into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        let err = owner_reference(&owner).expect_err("no uid");
        assert!(
            err.to_string()
                .starts_with("Namespace team-a has no metadata.uid"),
            "{err}"
        );
    }

    #[test]
    fn cluster_scoped_owner_gives_a_controller_reference() {
        let owner = Namespace {
            metadata: ObjectMeta {
                name: Some("team-a".into()),
                uid: Some("u-1".into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        let meta = owned_meta(&owner, "defaults").expect("owner is complete");
        assert_eq!(meta.namespace, None);
        let reference = &meta.owner_references.expect("set")[0];
        assert_eq!(
            (
                reference.api_version.as_str(),
                reference.kind.as_str(),
                reference.name.as_str(),
                reference.uid.as_str()
            ),
            ("v1", "Namespace", "team-a", "u-1")
        );
        assert_eq!(
            (reference.controller, reference.block_owner_deletion),
            (Some(true), Some(true))
        );
    }
}
