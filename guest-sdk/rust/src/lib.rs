//! Write [wasmop](https://example.invalid/wasmop) reconcile plugins in Rust.
//!
//! A plugin is one type implementing [`Reconciler`], exported with [`export!`]. It works on
//! typed objects (k8s-openapi types for built-in kinds, your own serde types for CRDs through
//! [`custom_resource!`]) and reaches the cluster only through the [`Context`] the host hands
//! to each reconcile, within the permissions it declared in [`Reconciler::describe`].
//!
//! ```
//! use std::collections::BTreeMap;
//!
//! use wasmop_guest::k8s_openapi::api::core::v1::{ConfigMap, Namespace};
//! use wasmop_guest::{Action, Context, Info, Object, ReconcileError, Reconciler, owned_meta};
//!
//! /// Gives every namespace a `team-info` ConfigMap naming the namespace.
//! struct TeamInfo;
//!
//! impl Reconciler for TeamInfo {
//!     type Object = Namespace;
//!
//!     fn describe() -> Info {
//!         Info::new("team-info", env!("CARGO_PKG_VERSION")).owns::<ConfigMap>()
//!     }
//!
//!     fn reconcile(ns: Namespace, ctx: &Context) -> Result<Action, ReconcileError> {
//!         let mut metadata = owned_meta(&ns, "team-info")?;
//!         metadata.namespace = Some(ns.name().to_owned());
//!         ctx.apply(&ConfigMap {
//!             metadata,
//!             data: Some(BTreeMap::from([("namespace".to_owned(), ns.name().to_owned())])),
//!             ..ConfigMap::default()
//!         })?;
//!         Ok(Action::Done)
//!     }
//! }
//!
//! wasmop_guest::export!(TeamInfo);
//! # fn main() {}
//! ```
//!
//! Build it as a component with `cargo build --target wasm32-wasip2 --release` (the crate is
//! a `cdylib`) or `cargo component build --release`, and try it offline with `wasmop test`.
//!
//! On targets other than wasm32 the host calls are stubs that panic: the SDK compiles
//! natively so pure code (and these examples) can be tested with `cargo test`, but
//! reconciles run only inside the host.
//!
//! # Smaller plugins
//!
//! A component carries the serde code of every type it decodes or encodes, and k8s-openapi's
//! Pod and Job types are big: decoding a `Job` pulls in the decoders of `PodSpec`,
//! `Volume` and all they hold (hundreds of KB). A plugin that only reads some of an object
//! can decode it as a view instead: [`kube_core::PartialObjectMeta`] for the metadata alone,
//! or a struct of its own declared with [`custom_resource!`] under the same group, version
//! and kind. The host checks and serves it as the same kind. A plugin that lists the Jobs it
//! owns as such a view and creates one with k8s-openapi's `Job` is a third smaller
//! (wasmop's BENCHMARKS.md, section 10).
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use wasmop_guest::k8s_openapi::api::batch::v1::{Job, JobStatus};
//! use wasmop_guest::k8s_openapi::api::core::v1::ConfigMap;
//! use wasmop_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
//! use wasmop_guest::kube_core::PartialObjectMeta;
//! use wasmop_guest::{Context, Error};
//!
//! /// What the plugin reads of a Job: its metadata and status, not its PodSpec.
//! #[derive(Serialize, Deserialize)]
//! struct JobView {
//!     metadata: ObjectMeta,
//!     status: Option<JobStatus>,
//! }
//!
//! wasmop_guest::custom_resource!(JobView, group = "batch", version = "v1", kind = "Job",
//!     plural = "jobs", namespaced);
//!
//! fn succeeded(ctx: &Context, owner: &ConfigMap) -> Result<usize, Error> {
//!     let jobs: Vec<JobView> = ctx.list_owned(owner)?;
//!     Ok(jobs.iter().filter(|j| j.status.as_ref().and_then(|s| s.succeeded) > Some(0)).count())
//! }
//!
//! fn names(ctx: &Context) -> Result<Vec<String>, Error> {
//!     let jobs: Vec<PartialObjectMeta<Job>> = ctx.list(Some("default"), None)?;
//!     Ok(jobs.into_iter().filter_map(|j| j.metadata.name).collect())
//! }
//! # fn main() {}
//! ```
//!
//! The release profile `wasmop new` writes adds opt-level `"z"` and strips every symbol
//! (another 29 % off such a plugin). A plugin still over the 1 MiB of a ConfigMap goes
//! compressed (`zstd -19 plugin.wasm`: every source takes `.wasm.zst`) or in a plugin
//! directory (a volume).

pub mod admission;
// The generated bindings are the SDK's only unsafe code (see the module's docs).
#[allow(unsafe_code)]
#[doc(hidden)]
pub mod bindings;
mod conditions;
mod context;
#[cfg(feature = "crd")]
pub mod crd;
mod delete;
mod error;
mod info;
pub mod log;
// Defines the C symbol `memcmp` on wasm32 (see the module's docs), which needs `unsafe`.
#[allow(unsafe_code)]
mod memcmp;
mod object;
mod owner;
mod reconciler;
mod stored;

pub use conditions::{ConditionStatus, condition, find_condition, set_condition};
pub use context::{Context, Event, EventType, Patch};
pub use delete::{DeleteOptions, Propagation};
pub use error::{Error, KubeError, ReconcileError};
pub use info::{Info, Mapping, Permission, Verb};
pub use object::{Gvk, Object, ObjectRef, Scope};
pub use owner::{object_reference, owned_meta, owner_reference};
pub use reconciler::{Action, Reconciler};
pub use stored::Stored;

/// The Kubernetes types (the version the host is built with), re-exported so plugins use the
/// same crate version as the SDK.
pub use k8s_openapi;
/// kube-rs's client-less types and traits (the [`Object`] trait builds on its `Resource`).
pub use kube_core;
/// Re-exported for [`Patch`] bodies (`serde_json::json!`) and custom types.
pub use serde_json;

/// What the macros expand to. Not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::admission::{AdmissionAdapter, Identity, ReconcilerIdentity};
    pub use crate::bindings;
    pub use crate::reconciler::Adapter;
}
