//! [`DeleteOptions`]: how [`Context::delete_with`](crate::Context::delete_with) deletes —
//! what happens to the object's dependents, the preconditions it holds to, the grace period.

use crate::bindings::wasmop::plugin::kube;
use crate::error::Error;
use crate::object::{Object, ObjectRef};

/// What happens to the objects a deleted object owns (its dependents).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Propagation {
    /// The object goes at once; the garbage collector deletes its dependents afterwards.
    #[default]
    Background,
    /// The object stays (with the `foregroundDeletion` finalizer) until every dependent with
    /// `blockOwnerDeletion` is gone.
    Foreground,
    /// The dependents stay, their owner reference removed.
    Orphan,
}

/// How to delete: background propagation and no preconditions by default, as
/// [`Context::delete`](crate::Context::delete) deletes. Note that the API server's own default
/// for some kinds (batch/v1 Job: orphan) differs; these options always say which.
///
/// ```
/// use wasmop_guest::{DeleteOptions, Propagation};
///
/// let options = DeleteOptions::new()
///     .propagation(Propagation::Foreground)
///     .uid("8f0c3e1a-2b4d-4c6e-9f10-1a2b3c4d5e6f")
///     .grace_period_seconds(0);
/// assert_eq!(options, DeleteOptions::foreground().uid("8f0c3e1a-2b4d-4c6e-9f10-1a2b3c4d5e6f").grace_period_seconds(0));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeleteOptions {
    propagation: Propagation,
    uid: Option<String>,
    resource_version: Option<String>,
    grace_period_seconds: Option<u32>,
}

impl DeleteOptions {
    /// Background propagation, no preconditions, the kind's grace period.
    pub fn new() -> Self {
        Self::default()
    }

    /// [`new`](Self::new) with [`Propagation::Foreground`].
    pub fn foreground() -> Self {
        Self::new().propagation(Propagation::Foreground)
    }

    /// [`new`](Self::new) with [`Propagation::Orphan`].
    pub fn orphan() -> Self {
        Self::new().propagation(Propagation::Orphan)
    }

    /// What happens to the dependents.
    #[must_use]
    pub fn propagation(mut self, propagation: Propagation) -> Self {
        self.propagation = propagation;
        self
    }

    /// Delete only the incarnation of the name with this `metadata.uid`: an object deleted
    /// and created again under the same name is left alone (`conflict`).
    #[must_use]
    pub fn uid(mut self, uid: impl Into<String>) -> Self {
        self.uid = Some(uid.into());
        self
    }

    /// Delete only if the object is still at this `metadata.resourceVersion` (`conflict`
    /// otherwise).
    #[must_use]
    pub fn resource_version(mut self, resource_version: impl Into<String>) -> Self {
        self.resource_version = Some(resource_version.into());
        self
    }

    /// Delete `object` only as it was read: its uid and resourceVersion as preconditions.
    ///
    /// # Errors
    /// [`Error::MissingUid`] or [`Error::MissingResourceVersion`] for an object not read from
    /// the cluster.
    pub fn if_unchanged<T: Object>(self, object: &T) -> Result<Self, Error> {
        let meta = object.meta();
        let target = || ObjectRef::of(object);
        let Some(uid) = meta.uid.clone() else {
            return Err(Error::MissingUid { owner: target()? });
        };
        let Some(rv) = meta.resource_version.clone() else {
            return Err(Error::MissingResourceVersion { target: target()? });
        };
        Ok(self.uid(uid).resource_version(rv))
    }

    /// Seconds the object's finalizers (a Pod's containers) get before it is removed; `0`
    /// for at once. Without it, the kind's default.
    #[must_use]
    pub fn grace_period_seconds(mut self, seconds: u32) -> Self {
        self.grace_period_seconds = Some(seconds);
        self
    }
}

impl From<&DeleteOptions> for kube::DeleteOptions {
    fn from(options: &DeleteOptions) -> Self {
        Self {
            propagation: match options.propagation {
                Propagation::Background => kube::Propagation::Background,
                Propagation::Foreground => kube::Propagation::Foreground,
                Propagation::Orphan => kube::Propagation::Orphan,
            },
            preconditions: kube::Preconditions {
                uid: options.uid.clone(),
                resource_version: options.resource_version.clone(),
            },
            grace_period_seconds: options.grace_period_seconds,
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    #[test]
    fn if_unchanged_takes_both_preconditions_from_the_object_read() {
        let read = ConfigMap {
            metadata: ObjectMeta {
                name: Some("a".into()),
                namespace: Some("ns".into()),
                uid: Some("u-1".into()),
                resource_version: Some("42".into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        let wit = kube::DeleteOptions::from(
            &DeleteOptions::orphan()
                .if_unchanged(&read)
                .expect("read objects have both"),
        );
        assert_eq!(wit.preconditions.uid.as_deref(), Some("u-1"));
        assert_eq!(wit.preconditions.resource_version.as_deref(), Some("42"));
        assert!(matches!(wit.propagation, kube::Propagation::Orphan));
        let mut local = read.clone();
        local.metadata.resource_version = None;
        let err = DeleteOptions::new()
            .if_unchanged(&local)
            .expect_err("no resourceVersion");
        assert!(matches!(err, Error::MissingResourceVersion { .. }), "{err}");
    }
}
