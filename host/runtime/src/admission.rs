//! Admission reviews: what a plugin that exports `admission` (contract 0.3) declares
//! ([`AdmissionInfo`], checked at load by `describe/admission.rs`), what one review is given
//! ([`Review`]) and how it ends ([`ReviewReport`]: a [`Verdict`] or the [`Outcome`] of a
//! call that failed).
//!
//! Everything the plugin returns is hostile input and is checked here, once, before anyone
//! shows it: the denial's message and the warnings end up in a user's terminal (`kubectl`
//! prints them), so they are cut and escaped ([`PluginText`]); the reason and code become an
//! HTTP status and must be what Kubernetes accepts; a mutated object must be a JSON object
//! of the same identity, and is turned into the JSON patch (RFC 6902) the API server applies
//! by the host, not the plugin. A review whose answer breaks a rule fails like a trap
//! ([`ReviewReport::result`] is an [`Outcome::Trap`] naming the rule), and its
//! registration's failure policy decides.

mod review;

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use serde_json::Value;
use wasmop_core::cluster::GroupVersionKind;
use wasmop_core::plugin::Permission;
use wasmop_core::plugin::text::PluginText;

use super::outcome::{Outcome, Usage};
use super::request::LogLine;

pub(crate) use review::review;

/// The longest denial message kept; longer ones are cut (and say so).
pub const MAX_MESSAGE_BYTES: usize = 1024;
/// The most warnings one answer carries; further ones are dropped.
pub const MAX_WARNINGS: usize = 16;
/// The longest warning kept; longer ones are cut.
pub const MAX_WARNING_BYTES: usize = 256;
/// The longest denial reason.
pub const MAX_REASON_LEN: usize = 128;
/// The largest mutated object taken back: the API server's own limit on a request body.
pub const MAX_MUTATED_BYTES: usize = 3 << 20;

/// An operation a registration reviews.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    /// The object is being created.
    Create,
    /// The object is being changed.
    Update,
    /// The object is being deleted.
    Delete,
    /// A connection to a subresource.
    Connect,
}

impl Operation {
    /// As the API server spells it (`CREATE`, ...), in webhook rules and AdmissionReviews.
    pub fn as_api(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

impl From<kube_core::admission::Operation> for Operation {
    fn from(op: kube_core::admission::Operation) -> Self {
        use kube_core::admission::Operation as O;
        match op {
            O::Create => Operation::Create,
            O::Update => Operation::Update,
            O::Delete => Operation::Delete,
            O::Connect => Operation::Connect,
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_api())
    }
}

/// What the API server does when a review cannot be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    /// The request is refused.
    Fail,
    /// The request goes ahead, with a warning.
    Ignore,
}

impl FailurePolicy {
    /// As webhook configurations spell it.
    pub fn as_api(self) -> &'static str {
        match self {
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        }
    }
}

/// One kind a registration reviews, and the operations on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The kind.
    pub kind: GroupVersionKind,
    /// The operations (at least one).
    pub operations: BTreeSet<Operation>,
    /// A subresource instead of the object itself.
    pub subresource: Option<String>,
}

/// One webhook a plugin asks the host to register, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// What it reviews (1 to 16 rules).
    pub rules: Vec<Rule>,
    /// A label selector on the request's namespace.
    pub namespace_selector: Option<String>,
    /// A label selector on the object.
    pub object_selector: Option<String>,
    /// What happens when a review cannot be answered.
    pub failure_policy: FailurePolicy,
    /// How long the API server waits (1 to 30 s).
    pub timeout: Duration,
}

impl Registration {
    /// Whether a request for `kind` (its `subresource`, if any) and `operation` is one this
    /// registration reviews.
    pub fn covers(
        &self,
        kind: &GroupVersionKind,
        subresource: Option<&str>,
        operation: Operation,
    ) -> bool {
        self.rules.iter().any(|r| {
            r.kind.group == kind.group
                && r.kind.kind == kind.kind
                && r.subresource.as_deref() == subresource
                && r.operations.contains(&operation)
        })
    }
}

/// What a plugin's admission half declared, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionInfo {
    /// The validating webhook it serves with `validate`.
    pub validating: Option<Registration>,
    /// The mutating webhook it serves with `mutate`.
    pub mutating: Option<Registration>,
    /// Reads beyond the reviewed object (admission-only plugins).
    pub permissions: Vec<Permission>,
}

impl AdmissionInfo {
    /// The registration `kind` of review answers to.
    pub fn registration(&self, kind: ReviewKind) -> Option<&Registration> {
        match kind {
            ReviewKind::Validate => self.validating.as_ref(),
            ReviewKind::Mutate => self.mutating.as_ref(),
        }
    }
}

/// Which export a review calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReviewKind {
    /// `validate`: admit or refuse.
    Validate,
    /// `mutate`: admit (changed or not) or refuse.
    Mutate,
}

impl ReviewKind {
    /// `validate` or `mutate`, for logs, metrics and paths.
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewKind::Validate => "validate",
            ReviewKind::Mutate => "mutate",
        }
    }
}

/// The resource a request is for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Resource {
    /// API group; `""` for the core group.
    pub group: String,
    /// API version.
    pub version: String,
    /// The plural resource name.
    pub resource: String,
}

/// Who made a request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    /// The user's name.
    pub username: String,
    /// Their uid, when known.
    pub uid: String,
    /// Their groups.
    pub groups: Vec<String>,
    /// Further attributes, by key.
    pub extra: Vec<(String, Vec<String>)>,
}

/// One admission request, as the plugin receives it: the essentials of an `AdmissionReview`.
#[derive(Debug, Clone, PartialEq)]
pub struct Review {
    /// The request's uid.
    pub uid: String,
    /// The object's kind.
    pub kind: GroupVersionKind,
    /// The resource it is served under.
    pub resource: Resource,
    /// The subresource, if the request is for one.
    pub sub_resource: Option<String>,
    /// The operation.
    pub operation: Operation,
    /// The object's name (`None` on a create with `generateName`).
    pub name: Option<String>,
    /// Its namespace (`None` for cluster-scoped kinds).
    pub namespace: Option<String>,
    /// Who asked.
    pub user_info: UserInfo,
    /// The object as it would be stored.
    pub object: Option<Value>,
    /// The object as it is stored (update, delete).
    pub old_object: Option<Value>,
    /// Whether nothing will be stored.
    pub dry_run: bool,
}

/// Why an AdmissionReview cannot be reviewed.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The AdmissionReview has no `request`.
    #[error("the AdmissionReview has no request")]
    NoRequest,
    /// The request's object or old object is not a JSON object.
    #[error("the AdmissionReview's {which} cannot be read: {source}")]
    Object {
        /// `object` or `oldObject`.
        which: &'static str,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

impl Review {
    /// The review of an AdmissionReview's request, as the API server sends it
    /// (`admission.k8s.io/v1`), parsed by kube-core's types.
    ///
    /// # Errors
    /// [`ReviewError`] when the review has no request or an object cannot be read.
    pub fn from_admission_review(
        review: kube_core::admission::AdmissionReview<kube_core::DynamicObject>,
    ) -> Result<Self, ReviewError> {
        let request: kube_core::admission::AdmissionRequest<kube_core::DynamicObject> =
            review.try_into().map_err(|_| ReviewError::NoRequest)?;
        Self::from_request(request)
    }

    /// The review of one AdmissionRequest.
    ///
    /// # Errors
    /// [`ReviewError::Object`] when an object cannot be turned into JSON.
    pub fn from_request(
        request: kube_core::admission::AdmissionRequest<kube_core::DynamicObject>,
    ) -> Result<Self, ReviewError> {
        let value = |which, o: Option<kube_core::DynamicObject>| {
            o.map(|o| {
                serde_json::to_value(o).map_err(|source| ReviewError::Object { which, source })
            })
            .transpose()
        };
        let user = request.user_info;
        Ok(Review {
            uid: request.uid,
            kind: GroupVersionKind::gvk(
                &request.kind.group,
                &request.kind.version,
                &request.kind.kind,
            ),
            resource: Resource {
                group: request.resource.group,
                version: request.resource.version,
                resource: request.resource.resource,
            },
            sub_resource: request.sub_resource.filter(|s| !s.is_empty()),
            operation: request.operation.into(),
            name: Some(request.name).filter(|n| !n.is_empty()),
            namespace: request.namespace.filter(|n| !n.is_empty()),
            user_info: UserInfo {
                username: user.username.unwrap_or_default(),
                uid: user.uid.unwrap_or_default(),
                groups: user.groups.unwrap_or_default(),
                extra: user.extra.unwrap_or_default().into_iter().collect(),
            },
            object: value("object", request.object)?,
            old_object: value("oldObject", request.old_object)?,
            dry_run: request.dry_run,
        })
    }
}

/// A plugin's answer to a review, checked.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The request goes ahead.
    Allowed {
        /// Warnings for the client, cut and escaped.
        warnings: Vec<PluginText>,
        /// For a mutating review that changed the object: the JSON patch (RFC 6902) from the
        /// object under review to the plugin's. `None` when nothing changed.
        patch: Option<json_patch::Patch>,
    },
    /// The request is refused.
    Denied {
        /// Why, cut and escaped.
        message: PluginText,
        /// The status reason (`Forbidden` unless the plugin said otherwise).
        reason: String,
        /// The HTTP status code (403 unless the plugin said otherwise).
        code: u16,
        /// Warnings for the client, cut and escaped.
        warnings: Vec<PluginText>,
    },
}

impl Verdict {
    /// A short, bounded label for metrics and reports: `allowed`, `patched` or `denied`.
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Allowed { patch: None, .. } => "allowed",
            Verdict::Allowed { patch: Some(_), .. } => "patched",
            Verdict::Denied { .. } => "denied",
        }
    }
}

/// How one review went.
#[derive(Debug, Clone, PartialEq)]
#[must_use = "a review's result says whether the request may go ahead"]
#[non_exhaustive]
pub struct ReviewReport {
    /// The plugin's verdict, or how the call failed (a trap, a timeout, running out of
    /// memory, a breached limit, an answer that broke a rule of the contract): a failure is
    /// answered by the registration's failure policy.
    pub result: Result<Verdict, Outcome>,
    /// What it used of its budgets.
    pub usage: Usage,
    /// The plugin's log lines, when the review captured them.
    pub logs: Vec<LogLine>,
}

/// One review to make: which export, for which request, and for how long at most.
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewCall {
    pub(crate) kind: ReviewKind,
    pub(crate) review: Review,
    /// A deadline shorter than the plugin's own (the webhook's `timeoutSeconds` less the
    /// time the request has already taken).
    pub(crate) deadline: Option<Duration>,
    pub(crate) capture_logs: bool,
}

impl ReviewCall {
    /// A call of `kind` for `review`.
    pub fn new(kind: ReviewKind, review: Review) -> Self {
        Self {
            kind,
            review,
            deadline: None,
            capture_logs: false,
        }
    }

    /// Ends the review within `deadline` if that is sooner than the plugin's own deadline.
    #[must_use]
    pub fn within(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Keeps the plugin's log lines in [`ReviewReport::logs`].
    #[must_use]
    pub fn capturing_logs(mut self) -> Self {
        self.capture_logs = true;
        self
    }
}
