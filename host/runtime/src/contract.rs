//! The contract versions a plugin may be built against, and the one type the runtime calls a
//! plugin's exports through ([`PluginPre`]).
//!
//! The host implements `wasmop:plugin@0.2` (`wit/plugin.wit`) and keeps loading components
//! built against 0.1 (`wit/0.1.0/plugin.wit`, frozen) unchanged. Both worlds are linked into
//! one linker: their import names carry the version (`wasmop:plugin/kube@0.1.0`), so they never
//! collide, and a component is instantiated through the bindings of the version its items name
//! (the loader checks they all name one, `loader/contract.rs`).
//!
//! Everything behind the exports speaks 0.2. A 0.1 component's `describe` answer and its
//! reconcile results are converted up here (every 0.1 value has a 0.2 equal: the records and
//! variants are the same); its host calls are served by the 0.2 host calls and their results
//! converted down (`hostcalls/v0_1.rs`), so one implementation, with one set of checks, serves
//! both versions.

use wasmtime::Store;
use wasmtime::component::InstancePre;

use crate::bindings::{v0_1, v0_2};
use crate::call::CallState;
use crate::loader::{ContractVersion, WIT_0_1};
use crate::request::Entry;

pub(crate) use v0_2::exports::wasmop::plugin::reconciler::{Action, Error, Request};
pub(crate) use v0_2::wasmop::plugin::plugin_info::Info;

/// A compiled component ready to instantiate, through the bindings of its contract version.
pub(crate) struct PluginPre {
    /// The version the component's items name (`0.1.0`, `0.2.0`).
    version: ContractVersion,
    exports: Exports,
}

/// The typed exports, by contract version.
enum Exports {
    /// Built against 0.1.
    V0_1(v0_1::PluginPre<CallState>),
    /// Built against 0.2.
    V0_2(v0_2::PluginPre<CallState>),
}

impl PluginPre {
    /// The typed exports of `pre`, a component built against `version` (one the loader has
    /// accepted). Fails if the component lacks the exports that version requires.
    pub(crate) fn new(
        version: ContractVersion,
        pre: InstancePre<CallState>,
    ) -> wasmtime::Result<Self> {
        let exports = if version.compatible_with(&WIT_0_1) {
            Exports::V0_1(v0_1::PluginPre::new(pre)?)
        } else {
            Exports::V0_2(v0_2::PluginPre::new(pre)?)
        };
        Ok(Self { version, exports })
    }

    /// The contract version the component was built against.
    pub(crate) fn version(&self) -> ContractVersion {
        self.version
    }

    /// Instantiates the component in `store` and calls `describe`.
    pub(crate) async fn describe(&self, store: &mut Store<CallState>) -> wasmtime::Result<Info> {
        Ok(match &self.exports {
            Exports::V0_1(pre) => {
                let instance = pre.instantiate_async(&mut *store).await?;
                let info = instance
                    .wasmop_plugin_reconciler()
                    .call_describe(&mut *store)
                    .await?;
                up::info(info)
            }
            Exports::V0_2(pre) => {
                let instance = pre.instantiate_async(&mut *store).await?;
                instance
                    .wasmop_plugin_reconciler()
                    .call_describe(&mut *store)
                    .await?
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
                let request = down::request(request);
                let returned = match entry {
                    Entry::Reconcile => exports.call_reconcile(&mut *store, &request).await?,
                    Entry::Cleanup => exports.call_cleanup(&mut *store, &request).await?,
                };
                Ok(returned.map(up::action).map_err(up::error))
            }
            Exports::V0_2(pre) => {
                let instance = pre.instantiate_async(&mut *store).await?;
                let exports = instance.wasmop_plugin_reconciler();
                match entry {
                    Entry::Reconcile => exports.call_reconcile(&mut *store, &request).await,
                    Entry::Cleanup => exports.call_cleanup(&mut *store, &request).await,
                }
            }
        }
    }
}

/// 0.1 values as their 0.2 equals, for what a 0.1 plugin returns.
pub(crate) mod up {
    use crate::bindings::{v0_1, v0_2};

    use v0_1::exports::wasmop::plugin::reconciler as old_rec;
    use v0_1::wasmop::plugin::plugin_info as old;
    use v0_1::wasmop::plugin::types as old_types;
    use v0_2::exports::wasmop::plugin::reconciler as rec;
    use v0_2::wasmop::plugin::plugin_info as new;
    use v0_2::wasmop::plugin::types as new_types;

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

    /// A `describe` answer. Its lists are moved as they are: the caps are checked on the 0.2
    /// value, by the one check every version's answer goes through.
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

/// 0.2 values as their 0.1 equals, for what the host hands a 0.1 plugin.
pub(crate) mod down {
    use crate::bindings::{v0_1, v0_2};

    use v0_1::exports::wasmop::plugin::reconciler as old_rec;
    use v0_1::wasmop::plugin::types as old_types;
    use v0_2::exports::wasmop::plugin::reconciler as rec;
    use v0_2::wasmop::plugin::types as new_types;

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

    /// A Kubernetes error as 0.1 has it: 0.1 has no `already-exists`, and called it
    /// `conflict`.
    pub(crate) fn kube_error(e: new_types::KubeError) -> old_types::KubeError {
        use new_types::KubeError as N;
        use old_types::KubeError as O;
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
