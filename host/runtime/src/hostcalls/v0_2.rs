//! The imports of a plugin built against `wasmop:plugin@0.2` (frozen, `wit/0.2.0/`), served
//! by the 0.3 host calls beside this file: 0.3 changed none of the imports, so each call is
//! the 0.3 one with its arguments converted up and its results down
//! ([`crate::contract::v02`]). Every check, limit and grant is the 0.3 call's.

use crate::bindings::v0_2::wasmop::plugin as old;
use crate::bindings::v0_3::wasmop::plugin as new;
use crate::call::CallState;
use crate::contract::v02::{kube_error, up};

type HostResult<T> = wasmtime::Result<Result<T, old::types::KubeError>>;

/// A 0.3 host call's result as the 0.2 plugin receives it.
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

fn delete_options(o: old::kube::DeleteOptions) -> new::kube::DeleteOptions {
    use new::kube::Propagation as N;
    use old::kube::Propagation as O;
    new::kube::DeleteOptions {
        propagation: match o.propagation {
            O::Background => N::Background,
            O::Foreground => N::Foreground,
            O::Orphan => N::Orphan,
        },
        preconditions: new::kube::Preconditions {
            uid: o.preconditions.uid,
            resource_version: o.preconditions.resource_version,
        },
        grace_period_seconds: o.grace_period_seconds,
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

    async fn list_owned(
        &mut self,
        kind: old::types::Gvk,
        namespace: Option<String>,
        owner_uid: String,
    ) -> HostResult<Vec<String>> {
        answer(new::kube::Host::list_owned(self, up::gvk(kind), namespace, owner_uid).await)
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
        if_resource_version: Option<String>,
    ) -> HostResult<String> {
        let target = up::object_ref(target);
        let body = patch_body(body);
        answer(new::kube::Host::patch(self, target, body, if_resource_version).await)
    }

    async fn patch_status(
        &mut self,
        target: old::types::ObjectRef,
        body: old::kube::PatchBody,
        if_resource_version: Option<String>,
    ) -> HostResult<String> {
        let target = up::object_ref(target);
        let body = patch_body(body);
        answer(new::kube::Host::patch_status(self, target, body, if_resource_version).await)
    }

    async fn delete(
        &mut self,
        target: old::types::ObjectRef,
        options: old::kube::DeleteOptions,
    ) -> HostResult<()> {
        let target = up::object_ref(target);
        answer(new::kube::Host::delete(self, target, delete_options(options)).await)
    }
}

unchanged_imports!(v0_2, v02);
