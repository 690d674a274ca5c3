//! The contract versions a plugin may be built against, and the one type the runtime calls a
//! plugin's exports through ([`PluginPre`]).
//!
//! The host implements `wasmop:plugin@0.3` (`wit/plugin.wit`) and keeps loading components
//! built against 0.2 and 0.1 (`wit/0.2.0/`, `wit/0.1.0/`, frozen) unchanged. Every version's
//! world is linked into one linker: their import names carry the version
//! (`wasmop:plugin/kube@0.1.0`), so they never collide, and a component is instantiated
//! through the bindings of the version its items name (the loader checks they all name one,
//! `loader/contract.rs`).
//!
//! Everything behind the exports speaks 0.3. An older component's `describe` answer and its
//! reconcile results are converted up here (every 0.1 and 0.2 value has a 0.3 equal: the
//! records and variants are the same); its host calls are served by the 0.3 host calls and
//! their results converted down (`hostcalls/v0_1.rs`, `hostcalls/v0_2.rs`), so one
//! implementation, with one set of checks, serves every version.
//!
//! A 0.3 component exports `reconciler`, `admission` or both; each is looked up on its own
//! (wasmtime's per-interface `GuestIndices`), so a component is asked only for what it has.

use wasmtime::Store;
use wasmtime::component::InstancePre;

use crate::bindings::{v0_1, v0_2, v0_3};
use crate::call::CallState;
use crate::loader::{ContractVersion, WIT_0_1, WIT_0_2};
use crate::request::Entry;

pub(crate) use v0_3::exports::wasmop::plugin::admission as wit_admission;
pub(crate) use v0_3::exports::wasmop::plugin::reconciler::{Action, Error, Request};
pub(crate) use v0_3::wasmop::plugin::plugin_info::Info;

use v0_3::exports::wasmop::plugin::reconciler as rec3;

/// A compiled component ready to instantiate, through the bindings of its contract version.
pub(crate) struct PluginPre {
    /// The version the component's items name (`0.1.0`, `0.2.0`, `0.3.0`).
    version: ContractVersion,
    exports: Exports,
}

/// The typed exports, by contract version.
enum Exports {
    /// Built against 0.1.
    V0_1(v0_1::PluginPre<CallState>),
    /// Built against 0.2.
    V0_2(v0_2::PluginPre<CallState>),
    /// Built against 0.3: the exports it has.
    V0_3 {
        pre: InstancePre<CallState>,
        reconciler: Option<rec3::GuestIndices>,
        admission: Option<wit_admission::GuestIndices>,
    },
}

/// What a component's `describe` exports said: its reconciler's `info`, its admission
/// half's `admission-info`, or both.
pub(crate) struct Described {
    /// The reconciler's answer, when it exports `reconciler`.
    pub info: Option<Info>,
    /// The admission half's answer, when it exports `admission`.
    pub admission: Option<wit_admission::AdmissionInfo>,
}

/// Which admission export a review calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReviewEntry {
    /// `validate`.
    Validate,
    /// `mutate`.
    Mutate,
}

/// What `validate` or `mutate` returned.
pub(crate) enum Reviewed {
    /// `validate`'s answer.
    Validated(Result<wit_admission::Allowed, wit_admission::Denial>),
    /// `mutate`'s answer.
    Mutated(Result<wit_admission::Mutation, wit_admission::Denial>),
}

impl PluginPre {
    /// The typed exports of `pre`, a component built against `version` (one the loader has
    /// accepted). Fails if the component lacks the exports that version requires: 0.1 and
    /// 0.2 `reconciler`, 0.3 `reconciler` or `admission` (whole, with every function typed as
    /// the contract says).
    pub(crate) fn new(
        version: ContractVersion,
        pre: InstancePre<CallState>,
    ) -> wasmtime::Result<Self> {
        let exports = if version.compatible_with(&WIT_0_1) {
            Exports::V0_1(v0_1::PluginPre::new(pre)?)
        } else if version.compatible_with(&WIT_0_2) {
            Exports::V0_2(v0_2::PluginPre::new(pre)?)
        } else {
            let has = |name: &str| pre.component().get_export_index(None, name).is_some();
            let reconciler_name = format!("wasmop:plugin/reconciler@{version}");
            let admission_name = format!("wasmop:plugin/admission@{version}");
            let reconciler = has(&reconciler_name)
                .then(|| rec3::GuestIndices::new(&pre))
                .transpose()?;
            let admission = has(&admission_name)
                .then(|| wit_admission::GuestIndices::new(&pre))
                .transpose()?;
            if reconciler.is_none() && admission.is_none() {
                wasmtime::bail!("exports neither `{reconciler_name}` nor `{admission_name}`");
            }
            Exports::V0_3 {
                pre,
                reconciler,
                admission,
            }
        };
        Ok(Self { version, exports })
    }

    /// The contract version the component was built against.
    pub(crate) fn version(&self) -> ContractVersion {
        self.version
    }

    /// Instantiates the component in `store` and calls the `describe` of each interface it
    /// exports.
    pub(crate) async fn describe(
        &self,
        store: &mut Store<CallState>,
    ) -> wasmtime::Result<Described> {
        Ok(match &self.exports {
            Exports::V0_1(pre) => {
                let instance = pre.instantiate_async(&mut *store).await?;
                let info = instance
                    .wasmop_plugin_reconciler()
                    .call_describe(&mut *store)
                    .await?;
                Described {
                    info: Some(v01::up::info(info)),
                    admission: None,
                }
            }
            Exports::V0_2(pre) => {
                let instance = pre.instantiate_async(&mut *store).await?;
                let info = instance
                    .wasmop_plugin_reconciler()
                    .call_describe(&mut *store)
                    .await?;
                Described {
                    info: Some(v02::up::info(info)),
                    admission: None,
                }
            }
            Exports::V0_3 {
                pre,
                reconciler,
                admission,
            } => {
                let instance = pre.instantiate_async(&mut *store).await?;
                let info = match reconciler {
                    Some(indices) => Some(
                        indices
                            .load(&mut *store, &instance)?
                            .call_describe(&mut *store)
                            .await?,
                    ),
                    None => None,
                };
                let admission = match admission {
                    Some(indices) => Some(
                        indices
                            .load(&mut *store, &instance)?
                            .call_describe(&mut *store)
                            .await?,
                    ),
                    None => None,
                };
                Described { info, admission }
            }
        })
    }

    /// Instantiates the component in `store` and calls `entry` with `request`.
    pub(crate) async fn call(
        &self,
        store: &mut Store<CallState>,
        entry: Entry,
        request: Request,
    ) -> wasmtime::Result<Result<Action, Error>> {
        match &self.exports {
            Exports::V0_1(pre) => {
                let instance = pre.instantiate_async(&mut *store).await?;
                let exports = instance.wasmop_plugin_reconciler();
                let request = v01::down::request(request);
                let returned = match entry {
                    Entry::Reconcile => exports.call_reconcile(&mut *store, &request).await?,
                    Entry::Cleanup => exports.call_cleanup(&mut *store, &request).await?,
                };
                Ok(returned.map(v01::up::action).map_err(v01::up::error))
            }
            Exports::V0_2(pre) => {
                let instance = pre.instantiate_async(&mut *store).await?;
                let exports = instance.wasmop_plugin_reconciler();
                let request = v02::down::request(request);
                let returned = match entry {
                    Entry::Reconcile => exports.call_reconcile(&mut *store, &request).await?,
                    Entry::Cleanup => exports.call_cleanup(&mut *store, &request).await?,
                };
                Ok(returned.map(v02::up::action).map_err(v02::up::error))
            }
            Exports::V0_3 {
                pre, reconciler, ..
            } => {
                let Some(indices) = reconciler else {
                    wasmtime::bail!("the plugin does not export `reconciler`");
                };
                let instance = pre.instantiate_async(&mut *store).await?;
                let exports = indices.load(&mut *store, &instance)?;
                match entry {
                    Entry::Reconcile => exports.call_reconcile(&mut *store, &request).await,
                    Entry::Cleanup => exports.call_cleanup(&mut *store, &request).await,
                }
            }
        }
    }

    /// Instantiates the component in `store` and calls `entry` of its `admission` export
    /// with `review`. Only a 0.3 component that exports `admission` has one; the loader
    /// keeps reviews from any other.
    pub(crate) async fn review(
        &self,
        store: &mut Store<CallState>,
        entry: ReviewEntry,
        review: wit_admission::Review,
    ) -> wasmtime::Result<Reviewed> {
        let Exports::V0_3 {
            pre,
            admission: Some(indices),
            ..
        } = &self.exports
        else {
            wasmtime::bail!("the plugin does not export `admission`");
        };
        let instance = pre.instantiate_async(&mut *store).await?;
        let exports = indices.load(&mut *store, &instance)?;
        Ok(match entry {
            ReviewEntry::Validate => {
                Reviewed::Validated(exports.call_validate(&mut *store, &review).await?)
            }
            ReviewEntry::Mutate => {
                Reviewed::Mutated(exports.call_mutate(&mut *store, &review).await?)
            }
        })
    }
}

/// Conversions between a frozen version's values and their 0.3 equals, for the parts every
/// version shares: what a plugin returns (`up`) and what the host hands it (`down`). One
/// definition, instantiated per frozen version, so the two cannot drift.
macro_rules! same_shape {
    ($old:ident) => {
        /// Older values as their 0.3 equals, for what an older plugin returns.
        pub(crate) mod up {
            use crate::bindings::{v0_3, $old};

            use v0_3::exports::wasmop::plugin::reconciler as rec;
            use v0_3::wasmop::plugin::plugin_info as new;
            use v0_3::wasmop::plugin::types as new_types;
            use $old::exports::wasmop::plugin::reconciler as old_rec;
            use $old::wasmop::plugin::plugin_info as old;
            use $old::wasmop::plugin::types as old_types;

            /// A kind.
            pub(crate) fn gvk(g: old_types::Gvk) -> new_types::Gvk {
                new_types::Gvk {
                    group: g.group,
                    version: g.version,
                    kind: g.kind,
                }
            }

            /// An object reference.
            pub(crate) fn object_ref(r: old_types::ObjectRef) -> new_types::ObjectRef {
                new_types::ObjectRef {
                    kind: gvk(r.kind),
                    namespace: r.namespace,
                    name: r.name,
                }
            }

            fn verb(v: old::Verb) -> new::Verb {
                match v {
                    old::Verb::Get => new::Verb::Get,
                    old::Verb::List => new::Verb::List,
                    old::Verb::Create => new::Verb::Create,
                    old::Verb::Patch => new::Verb::Patch,
                    old::Verb::Apply => new::Verb::Apply,
                    old::Verb::Delete => new::Verb::Delete,
                    old::Verb::PatchStatus => new::Verb::PatchStatus,
                }
            }

            fn mapping(m: old::Mapping) -> new::Mapping {
                match m {
                    old::Mapping::SameName => new::Mapping::SameName,
                    old::Mapping::Label(key) => new::Mapping::Label(key),
                    old::Mapping::Annotation(key) => new::Mapping::Annotation(key),
                    old::Mapping::AllInNamespace => new::Mapping::AllInNamespace,
                    old::Mapping::All => new::Mapping::All,
                }
            }

            /// A `describe` answer. Its lists are moved as they are: the caps are checked on
            /// the 0.3 value, by the one check every version's answer goes through.
            pub(crate) fn info(i: old::Info) -> new::Info {
                new::Info {
                    name: i.name,
                    version: i.version,
                    primary: gvk(i.primary),
                    primary_selector: i.primary_selector,
                    owns: i.owns.into_iter().map(gvk).collect(),
                    watches: i
                        .watches
                        .into_iter()
                        .map(|w| new::Watch {
                            kind: gvk(w.kind),
                            selector: w.selector,
                            mapping: mapping(w.mapping),
                        })
                        .collect(),
                    finalizer: i.finalizer,
                    reconcile_on_metadata_change: i.reconcile_on_metadata_change,
                    permissions: i
                        .permissions
                        .into_iter()
                        .map(|p| new::Permission {
                            group: p.group,
                            kind: p.kind,
                            verbs: p.verbs.into_iter().map(verb).collect(),
                            namespaces: p.namespaces,
                        })
                        .collect(),
                }
            }

            /// A reconcile's action.
            pub(crate) fn action(a: old_rec::Action) -> rec::Action {
                match a {
                    old_rec::Action::Done => rec::Action::Done,
                    old_rec::Action::RequeueAfter(ms) => rec::Action::RequeueAfter(ms),
                }
            }

            /// A reconcile's error.
            pub(crate) fn error(e: old_rec::Error) -> rec::Error {
                match e {
                    old_rec::Error::Retryable(m) => rec::Error::Retryable(m),
                    old_rec::Error::Permanent(m) => rec::Error::Permanent(m),
                }
            }
        }

        /// 0.3 values as their older equals, for what the host hands an older plugin.
        pub(crate) mod down {
            use crate::bindings::{v0_3, $old};

            use v0_3::exports::wasmop::plugin::reconciler as rec;
            use v0_3::wasmop::plugin::types as new_types;
            use $old::exports::wasmop::plugin::reconciler as old_rec;
            use $old::wasmop::plugin::types as old_types;

            /// An object reference.
            pub(crate) fn object_ref(r: new_types::ObjectRef) -> old_types::ObjectRef {
                old_types::ObjectRef {
                    kind: old_types::Gvk {
                        group: r.kind.group,
                        version: r.kind.version,
                        kind: r.kind.kind,
                    },
                    namespace: r.namespace,
                    name: r.name,
                }
            }

            /// A request: the object's text is moved, not copied.
            pub(crate) fn request(r: rec::Request) -> old_rec::Request {
                old_rec::Request {
                    target: object_ref(r.target),
                    object: r.object,
                }
            }
        }
    };
}

/// 0.1 values and their 0.3 equals.
pub(crate) mod v01 {
    same_shape!(v0_1);

    /// A Kubernetes error as 0.1 has it: 0.1 has no `already-exists`, and called it
    /// `conflict`.
    pub(crate) fn kube_error(
        e: crate::bindings::v0_3::wasmop::plugin::types::KubeError,
    ) -> crate::bindings::v0_1::wasmop::plugin::types::KubeError {
        use crate::bindings::v0_1::wasmop::plugin::types::KubeError as O;
        use crate::bindings::v0_3::wasmop::plugin::types::KubeError as N;
        match e {
            N::NotFound(m) => O::NotFound(m),
            N::Conflict(m) | N::AlreadyExists(m) => O::Conflict(m),
            N::Forbidden(m) => O::Forbidden(m),
            N::Denied(m) => O::Denied(m),
            N::Invalid(m) => O::Invalid(m),
            N::Unavailable(m) => O::Unavailable(m),
            N::Other(m) => O::Other(m),
        }
    }
}

/// 0.2 values and their 0.3 equals.
pub(crate) mod v02 {
    same_shape!(v0_2);

    /// A Kubernetes error as 0.2 has it (the same cases as 0.3).
    pub(crate) fn kube_error(
        e: crate::bindings::v0_3::wasmop::plugin::types::KubeError,
    ) -> crate::bindings::v0_2::wasmop::plugin::types::KubeError {
        use crate::bindings::v0_2::wasmop::plugin::types::KubeError as O;
        use crate::bindings::v0_3::wasmop::plugin::types::KubeError as N;
        match e {
            N::NotFound(m) => O::NotFound(m),
            N::Conflict(m) => O::Conflict(m),
            N::AlreadyExists(m) => O::AlreadyExists(m),
            N::Forbidden(m) => O::Forbidden(m),
            N::Denied(m) => O::Denied(m),
            N::Invalid(m) => O::Invalid(m),
            N::Unavailable(m) => O::Unavailable(m),
            N::Other(m) => O::Other(m),
        }
    }
}
