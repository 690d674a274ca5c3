//! Errors of host calls made through [`Context`](crate::Context), and the error a reconcile
//! returns to the host.

use std::fmt;

use crate::bindings::wasmop::plugin::types::KubeError as WitKubeError;
use crate::object::ObjectRef;

/// Why a Kubernetes call failed, as the host reported it. Mirrors the WIT `kube-error`; each
/// case carries the API server's (or the host's) message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KubeError {
    /// The object does not exist (HTTP 404).
    #[error("not found: {0}")]
    NotFound(String),
    /// A write lost a race or its precondition failed (HTTP 409): the object changed since
    /// it was read.
    #[error("conflict: {0}")]
    Conflict(String),
    /// A create found an object of that name already (HTTP 409 AlreadyExists).
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// The host's Kubernetes identity may not do this (HTTP 403 from RBAC).
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// The operator's wasmop policy does not grant this call to this plugin.
    #[error("denied by the wasmop policy: {0}")]
    Denied(String),
    /// The request or the object was invalid (HTTP 400/422).
    #[error("invalid: {0}")]
    Invalid(String),
    /// The API server is unavailable or throttling and the host's retries ran out.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

impl From<WitKubeError> for KubeError {
    fn from(e: WitKubeError) -> Self {
        match e {
            WitKubeError::NotFound(m) => Self::NotFound(m),
            WitKubeError::Conflict(m) => Self::Conflict(m),
            WitKubeError::AlreadyExists(m) => Self::AlreadyExists(m),
            WitKubeError::Forbidden(m) => Self::Forbidden(m),
            WitKubeError::Denied(m) => Self::Denied(m),
            WitKubeError::Invalid(m) => Self::Invalid(m),
            WitKubeError::Unavailable(m) => Self::Unavailable(m),
            WitKubeError::Other(m) => Self::Other(m),
        }
    }
}

/// A host call that failed, with what it was about.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The host (or the API server behind it) refused or failed the call.
    #[error("{call} {target}")]
    Kube {
        /// The call: `get`, `apply`, `patch-status`, ...
        call: &'static str,
        /// What it was about: an object, or a kind and namespace for `list`.
        target: String,
        /// What went wrong.
        #[source]
        source: KubeError,
    },
    /// An object could not be encoded as JSON.
    #[error("cannot encode a {kind} as JSON")]
    Encode {
        /// The object's kind.
        kind: &'static str,
        /// The serializer's error.
        #[source]
        source: serde_json::Error,
    },
    /// A type serialized to something other than a JSON object.
    #[error("a {kind} must serialize to a JSON object")]
    NotAnObject {
        /// The object's kind.
        kind: &'static str,
    },
    /// What the host returned did not decode as the expected type.
    #[error("cannot decode the {kind} returned by {call}")]
    Decode {
        /// The expected kind.
        kind: &'static str,
        /// The call that returned it.
        call: &'static str,
        /// The deserializer's error.
        #[source]
        source: serde_json::Error,
    },
    /// The plugin's configuration does not match its config type.
    #[error("invalid plugin configuration")]
    Config(#[source] serde_json::Error),
    /// A namespaced kind was named without a namespace.
    #[error("{kind} {name} is namespaced: a namespace is required")]
    MissingNamespace {
        /// The kind.
        kind: &'static str,
        /// The name given.
        name: String,
    },
    /// A cluster-scoped kind was named with a namespace.
    #[error("{kind} is cluster-scoped: namespace `{namespace}` cannot apply")]
    UnexpectedNamespace {
        /// The kind.
        kind: &'static str,
        /// The namespace given.
        namespace: String,
    },
    /// An object has no `metadata.name`.
    #[error("the {kind} has no metadata.name")]
    MissingName {
        /// The kind.
        kind: &'static str,
    },
    /// A guarded write names an object without `metadata.resourceVersion` (it was built
    /// locally, not read from the cluster), so there is no version to guard.
    #[error(
        "{target} has no metadata.resourceVersion, so a write cannot be guarded by it; use the \
         object as read from the cluster"
    )]
    MissingResourceVersion {
        /// The object.
        target: ObjectRef,
    },
    /// An owner has no `metadata.uid` (it was built locally, not read from the cluster).
    #[error(
        "{owner} has no metadata.uid, so it cannot own objects; use the object the host passed"
    )]
    MissingUid {
        /// The would-be owner.
        owner: ObjectRef,
    },
}

impl Error {
    /// The Kubernetes error behind this one, if it is one.
    pub fn kube_error(&self) -> Option<&KubeError> {
        match self {
            Self::Kube { source, .. } => Some(source),
            _ => None,
        }
    }

    /// True when the object did not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self.kube_error(), Some(KubeError::NotFound(_)))
    }

    /// True when a write lost a race or its precondition failed.
    pub fn is_conflict(&self) -> bool {
        matches!(self.kube_error(), Some(KubeError::Conflict(_)))
    }

    /// True when a create found an object of that name.
    pub fn is_already_exists(&self) -> bool {
        matches!(self.kube_error(), Some(KubeError::AlreadyExists(_)))
    }

    /// Whether retrying the reconcile later could succeed: true for failures of the moment
    /// (not found, conflict, already exists, unavailable, RBAC that an operator can fix); false for mistakes
    /// that repeat until the object or the plugin changes (a call the wasmop policy denies,
    /// an invalid object, JSON that does not fit the types, bad configuration).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Kube { source, .. } => {
                !matches!(source, KubeError::Denied(_) | KubeError::Invalid(_))
            }
            _ => false,
        }
    }
}

/// Why a reconcile failed; the host retries a retryable error with backoff and reports a
/// permanent one without retrying until the object changes.
///
/// `?` converts an [`Error`] from a host call, classified by [`Error::is_retryable`], with its
/// whole chain of causes in the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconcileError {
    retryable: bool,
    message: String,
}

impl ReconcileError {
    /// A passing problem: the host retries with per-object exponential backoff.
    pub fn retryable(message: impl fmt::Display) -> Self {
        Self {
            retryable: true,
            message: message.to_string(),
        }
    }

    /// The object cannot be reconciled as it is: the host reports it and waits for a change.
    pub fn permanent(message: impl fmt::Display) -> Self {
        Self {
            retryable: false,
            message: message.to_string(),
        }
    }

    /// True for a retryable error.
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }

    /// The message the host reports.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ReconcileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ReconcileError {}

impl From<Error> for ReconcileError {
    fn from(e: Error) -> Self {
        let message = chain(&e);
        if e.is_retryable() {
            Self::retryable(message)
        } else {
            Self::permanent(message)
        }
    }
}

/// `error: cause: cause`, the form the host logs and reports.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kube(source: KubeError) -> Error {
        Error::Kube {
            call: "apply",
            target: "ConfigMap ns/a".into(),
            source,
        }
    }

    #[test]
    fn reconcile_error_carries_the_whole_chain() {
        let e = ReconcileError::from(kube(KubeError::Conflict(
            "the object has been modified".into(),
        )));
        assert!(e.is_retryable());
        assert_eq!(
            e.message(),
            "apply ConfigMap ns/a: conflict: the object has been modified"
        );
    }

    #[test]
    fn denied_and_invalid_calls_are_permanent() {
        assert!(!ReconcileError::from(kube(KubeError::Denied("no".into()))).is_retryable());
        assert!(!ReconcileError::from(kube(KubeError::Invalid("no".into()))).is_retryable());
        assert!(ReconcileError::from(kube(KubeError::Unavailable("later".into()))).is_retryable());
        assert!(kube(KubeError::NotFound("gone".into())).is_not_found());
        let exists = kube(KubeError::AlreadyExists("taken".into()));
        assert!(exists.is_already_exists() && !exists.is_conflict());
        assert!(ReconcileError::from(exists).is_retryable());
    }

    #[test]
    fn bad_config_is_permanent_and_explains_the_field() {
        let source = serde_json::from_str::<u32>("\"x\"").expect_err("not a number");
        let e = ReconcileError::from(Error::Config(source));
        assert!(!e.is_retryable());
        assert!(
            e.message()
                .starts_with("invalid plugin configuration: invalid type"),
            "{}",
            e.message()
        );
    }
}
