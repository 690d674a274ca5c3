//! Admission webhooks in a plugin: the [`Admission`] trait (validate and mutate one kind),
//! the [`Webhooks`] it registers, the [`Review`] it is given and what it answers
//! ([`Allowed`], [`Mutated`], [`Denied`]). Exported beside a [`Reconciler`] with
//! `wasmop_guest::export!(MyReconciler, admission = MyAdmission)`, or alone, by a plugin that
//! reconciles nothing and names itself:
//! `wasmop_guest::export!(admission = MyAdmission, name = "my-policy", version = "0.1.0")`.
//!
//! The host serves the webhooks over HTTPS, registers them with the API server, and calls
//! `validate` or `mutate` in a fresh instance per review, under the plugin's limits and the
//! webhook's timeout. A review may read the cluster through its [`Context`] (within the
//! plugin's grants) but not write: the webhooks are registered with `sideEffects: None`.
//!
//! ```
//! use wasmop_guest::k8s_openapi::api::core::v1::ConfigMap;
//! use wasmop_guest::admission::{Admission, Allowed, Denied, Operation, Review, Webhook, Webhooks};
//! use wasmop_guest::Context;
//!
//! struct SmallConfigs;
//!
//! impl Admission for SmallConfigs {
//!     type Object = ConfigMap;
//!
//!     fn webhooks() -> Webhooks {
//!         Webhooks::new().validating(Webhook::new([Operation::Create, Operation::Update]))
//!     }
//!
//!     fn validate(review: Review<ConfigMap>, _ctx: &Context) -> Result<Allowed, Denied> {
//!         let keys = review.object.and_then(|cm| cm.data).map_or(0, |d| d.len());
//!         if keys > 100 {
//!             return Err(Denied::invalid(format!("{keys} keys; at most 100 are allowed")));
//!         }
//!         Ok(Allowed::new())
//!     }
//! }
//!
//! wasmop_guest::export!(admission = SmallConfigs, name = "small-configs", version = "0.1.0");
//! # fn main() {}
//! ```
//!
//! [`Reconciler`]: crate::Reconciler

mod adapter;

use crate::bindings::admission::exports::wasmop::plugin::admission as wit;
use crate::bindings::wasmop::plugin::types::Gvk as WitGvk;
use crate::context::Context;
use crate::info::Permission;
use crate::object::{Gvk, Object};

pub use adapter::{AdmissionAdapter, Identity, ReconcilerIdentity};

/// An operation a webhook reviews.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    /// The object is being created.
    Create,
    /// The object is being changed.
    Update,
    /// The object is being deleted.
    Delete,
    /// A connection to a subresource (`pods/exec`, ...).
    Connect,
}

impl From<Operation> for wit::Operation {
    fn from(op: Operation) -> Self {
        match op {
            Operation::Create => Self::Create,
            Operation::Update => Self::Update,
            Operation::Delete => Self::Delete,
            Operation::Connect => Self::Connect,
        }
    }
}

impl From<wit::Operation> for Operation {
    fn from(op: wit::Operation) -> Self {
        match op {
            wit::Operation::Create => Self::Create,
            wit::Operation::Update => Self::Update,
            wit::Operation::Delete => Self::Delete,
            wit::Operation::Connect => Self::Connect,
        }
    }
}

/// What the API server does when a review cannot be answered (the plugin trapped, ran out of
/// time or memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    /// The request is refused, with a message naming the plugin and the cause.
    Fail,
    /// The request goes ahead, with a warning.
    Ignore,
}

/// One webhook: which operations on the plugin's [`Admission::Object`] kind it reviews, and
/// how. Defaults: failure policy [`FailurePolicy::Fail`], a timeout of 10 s, every namespace
/// (but those the host leaves out: by default `kube-system` and its own) and every object.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Webhook {
    operations: Vec<Operation>,
    subresource: Option<String>,
    namespace_selector: Option<String>,
    object_selector: Option<String>,
    failure_policy: FailurePolicy,
    timeout_seconds: u8,
}

impl Webhook {
    /// A webhook for `operations` on the kind.
    pub fn new(operations: impl IntoIterator<Item = Operation>) -> Self {
        Self {
            operations: operations.into_iter().collect(),
            subresource: None,
            namespace_selector: None,
            object_selector: None,
            failure_policy: FailurePolicy::Fail,
            timeout_seconds: 10,
        }
    }

    /// Reviews requests for this subresource (`status`, `scale`) instead of the object.
    pub fn subresource(mut self, subresource: impl Into<String>) -> Self {
        self.subresource = Some(subresource.into());
        self
    }

    /// Reviews only requests in namespaces matching this label selector (Kubernetes syntax).
    pub fn namespace_selector(mut self, selector: impl Into<String>) -> Self {
        self.namespace_selector = Some(selector.into());
        self
    }

    /// Reviews only objects matching this label selector (Kubernetes syntax).
    pub fn object_selector(mut self, selector: impl Into<String>) -> Self {
        self.object_selector = Some(selector.into());
        self
    }

    /// What happens when a review cannot be answered.
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.failure_policy = policy;
        self
    }

    /// How long the API server waits for an answer: 1 to 30 seconds.
    pub fn timeout_seconds(mut self, seconds: u8) -> Self {
        self.timeout_seconds = seconds;
        self
    }

    fn into_wit(self, kind: Gvk) -> wit::Registration {
        wit::Registration {
            rules: vec![wit::Rule {
                kind: WitGvk {
                    group: kind.group.into(),
                    version: kind.version.into(),
                    kind: kind.kind.into(),
                },
                operations: self.operations.into_iter().map(Into::into).collect(),
                subresource: self.subresource,
            }],
            namespace_selector: self.namespace_selector,
            object_selector: self.object_selector,
            failure_policy: match self.failure_policy {
                FailurePolicy::Fail => wit::FailurePolicy::Fail,
                FailurePolicy::Ignore => wit::FailurePolicy::Ignore,
            },
            timeout_seconds: self.timeout_seconds,
        }
    }
}

/// The webhooks a plugin asks the host to register: a validating one, a mutating one, or
/// both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use]
pub struct Webhooks {
    validating: Option<Webhook>,
    mutating: Option<Webhook>,
    permissions: Vec<Permission>,
}

impl Webhooks {
    /// No webhooks yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The validating webhook, served by [`Admission::validate`].
    pub fn validating(mut self, webhook: Webhook) -> Self {
        self.validating = Some(webhook);
        self
    }

    /// The mutating webhook, served by [`Admission::mutate`].
    pub fn mutating(mut self, webhook: Webhook) -> Self {
        self.mutating = Some(webhook);
        self
    }

    /// Asks for reads (`get`, `list`) beyond the reviewed object, for a plugin whose
    /// reconciler's grants do not already cover them. Writes are refused at load.
    pub fn permission(mut self, permission: Permission) -> Self {
        self.permissions.push(permission);
        self
    }
}

/// Who made a request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// The user's name, e.g. `system:serviceaccount:shop:deployer`.
    pub username: String,
    /// Their uid, when the authenticator gives one.
    pub uid: String,
    /// Their groups.
    pub groups: Vec<String>,
    /// Further attributes, by key.
    pub extra: Vec<(String, Vec<String>)>,
}

/// One admission request for a `T`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Review<T> {
    /// The request's uid (for logs).
    pub uid: String,
    /// The operation.
    pub operation: Operation,
    /// The subresource, when the request is for one.
    pub sub_resource: Option<String>,
    /// The object's name; `None` on a create whose name the API server generates.
    pub name: Option<String>,
    /// Its namespace; `None` for cluster-scoped kinds.
    pub namespace: Option<String>,
    /// Who asked.
    pub user: UserInfo,
    /// The object as it would be stored; `None` on delete.
    pub object: Option<T>,
    /// The object as it is stored, on update and delete.
    pub old_object: Option<T>,
    /// Whether nothing will be stored (a server-side dry run).
    pub dry_run: bool,
}

/// Admits a request, with warnings for the client (`kubectl` prints them) if any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use]
pub struct Allowed {
    warnings: Vec<String>,
}

impl Allowed {
    /// Admits the request.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a warning (at most 16 are shown, each at most 256 characters).
    pub fn warning(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }
}

/// Refuses a request: the client gets an error with this message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Denied {
    message: String,
    reason: Option<String>,
    code: Option<u16>,
    warnings: Vec<String>,
}

impl Denied {
    /// Refuses the request as `Forbidden` (HTTP 403) with `message` (at most 1024
    /// characters are shown).
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            reason: None,
            code: None,
            warnings: Vec::new(),
        }
    }

    /// Refuses the request as `Invalid` (HTTP 422): the object breaks a rule.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(message).reason("Invalid").code(422)
    }

    /// The status reason: CamelCase, e.g. `Forbidden`, `Invalid`, `Conflict`.
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// The HTTP status code, 400 to 599.
    pub fn code(mut self, code: u16) -> Self {
        self.code = Some(code);
        self
    }

    /// Adds a warning.
    pub fn warning(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }

    fn into_wit(self) -> wit::Denial {
        wit::Denial {
            message: self.message,
            reason: self.reason,
            code: self.code,
            warnings: self.warnings,
        }
    }
}

/// A mutating review's admission: the object as it should be stored, or unchanged.
///
/// The host computes the JSON patch from the object under review to this one. Fields the
/// type `T` does not know are kept as they were: the object you return is laid over the
/// one under review, so a plugin built against an older schema never strips newer fields.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct Mutated<T> {
    object: Option<T>,
    warnings: Vec<String>,
}

impl<T> Mutated<T> {
    /// Admits the request as it is.
    pub fn unchanged() -> Self {
        Self {
            object: None,
            warnings: Vec::new(),
        }
    }

    /// Admits the request with `object` stored instead (same kind, name and namespace).
    pub fn to(object: T) -> Self {
        Self {
            object: Some(object),
            warnings: Vec::new(),
        }
    }

    /// Adds a warning.
    pub fn warning(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }
}

/// The admission half of a plugin: validates and mutates objects of one kind before the API
/// server stores them. Exported beside the plugin's [`Reconciler`] (whose name and version it
/// shares) with `wasmop_guest::export!(MyReconciler, admission = MyAdmission)`.
pub trait Admission {
    /// The kind reviewed: a k8s-openapi type, or a CRD type.
    type Object: Object;

    /// The webhooks to register. Called once per loaded version; must not make host calls.
    fn webhooks() -> Webhooks;

    /// Admits or refuses a request (the validating webhook). The default admits everything.
    fn validate(review: Review<Self::Object>, ctx: &Context) -> Result<Allowed, Denied> {
        let _ = (review, ctx);
        Ok(Allowed::new())
    }

    /// Admits a request, changed or not, or refuses it (the mutating webhook, which runs
    /// before every validating one). The default admits it unchanged.
    fn mutate(
        review: Review<Self::Object>,
        ctx: &Context,
    ) -> Result<Mutated<Self::Object>, Denied> {
        let _ = (review, ctx);
        Ok(Mutated::unchanged())
    }
}
