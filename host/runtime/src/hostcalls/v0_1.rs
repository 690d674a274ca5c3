//! The imports of a plugin built against `wasmop:plugin@0.1` (frozen, `wit/0.1.0/`), served
//! by the 0.3 host calls beside this file: each argument converted up, each result down
//! ([`crate::contract`]). What 0.1 promised holds: `create` of an existing object fails with
//! `conflict` (0.2's `already-exists`), `delete` propagates in the background with no
//! preconditions, and patches carry no resourceVersion guard. Every check, limit and grant is
//! the 0.3 call's: there is no second implementation to drift.

use crate::bindings::v0_1::wasmop::plugin as old;
use crate::bindings::v0_3::wasmop::plugin as new;
use crate::call::CallState;
use crate::contract::v01::{kube_error, up};

type HostResult<T> = wasmtime::Result<Result<T, old::types::KubeError>>;

/// A 0.3 host call's result as the 0.1 plugin receives it.
fn answer<T>(result: wasmtime::Result<Result<T, new::types::KubeError>>) -> HostResult<T> {
    result.map(|r| r.map_err(kube_error))
}

fn patch_body(body: old::kube::PatchBody) -> new::kube::PatchBody {
    use new::kube::PatchBody as N;
    use old::kube::PatchBody as O;
    match body {
        O::Merge(t) => N::Merge(t),
        O::Json(t) => N::Json(t),
        O::Strategic(t) => N::Strategic(t),
        O::Apply(t) => N::Apply(t),
    }
}

impl old::types::Host for CallState {}
impl old::plugin_info::Host for CallState {}

impl old::kube::Host for CallState {
    async fn get(&mut self, target: old::types::ObjectRef) -> HostResult<String> {
        answer(new::kube::Host::get(self, up::object_ref(target)).await)
    }

    async fn list(
        &mut self,
        kind: old::types::Gvk,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> HostResult<Vec<String>> {
        answer(new::kube::Host::list(self, up::gvk(kind), namespace, label_selector).await)
    }

    async fn create(&mut self, object: String) -> HostResult<String> {
        answer(new::kube::Host::create(self, object).await)
    }

    async fn apply(&mut self, object: String) -> HostResult<String> {
        answer(new::kube::Host::apply(self, object).await)
    }

    async fn patch(
        &mut self,
        target: old::types::ObjectRef,
        body: old::kube::PatchBody,
    ) -> HostResult<String> {
        let target = up::object_ref(target);
        answer(new::kube::Host::patch(self, target, patch_body(body), None).await)
    }

    async fn patch_status(
        &mut self,
        target: old::types::ObjectRef,
        body: old::kube::PatchBody,
    ) -> HostResult<String> {
        let target = up::object_ref(target);
        answer(new::kube::Host::patch_status(self, target, patch_body(body), None).await)
    }

    async fn delete(&mut self, target: old::types::ObjectRef) -> HostResult<()> {
        // 0.1's one way to delete.
        let options = new::kube::DeleteOptions {
            propagation: new::kube::Propagation::Background,
            preconditions: new::kube::Preconditions {
                uid: None,
                resource_version: None,
            },
            grace_period_seconds: None,
        };
        answer(new::kube::Host::delete(self, up::object_ref(target), options).await)
    }
}

unchanged_imports!(v0_1, v01);
