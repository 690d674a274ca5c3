//! `wasmop:plugin/kube`: reads and writes through the [`wasmop_core::cluster::Cluster`], each call
//! counted, its bytes charged, and checked against the plugin's grants. Objects the guest
//! passes must be JSON objects naming their kind; anything else is `invalid` to the guest.

use super::wit::kube::{Host, PatchBody as WitPatch};
use super::wit::types::{Gvk, KubeError, ObjectRef as WitObjectRef};
use super::{from_wit_gvk, from_wit_ref, invalid as refused, ref_len, to_wit_error};
use crate::call::CallState;
use wasmop_core::cluster::names;
use wasmop_core::cluster::text::{PatchKind, TextError, parse_patch as parse_text_patch};
use wasmop_core::cluster::{ClusterError, Json, ObjectRef, ObjectText, Patch};
use wasmop_core::plugin::Verb;

type HostResult<T> = wasmtime::Result<Result<T, KubeError>>;

fn parse_patch(body: WitPatch) -> Result<(Verb, Patch<Json>), ClusterError> {
    let (verb, kind, text) = match body {
        WitPatch::Merge(t) => (Verb::Patch, PatchKind::Merge, t),
        WitPatch::Strategic(t) => (Verb::Patch, PatchKind::Strategic, t),
        WitPatch::Apply(t) => (Verb::Apply, PatchKind::Apply, t),
        WitPatch::Json(t) => (Verb::Patch, PatchKind::Json, t),
    };
    let patch = parse_text_patch(kind, text).map_err(invalid)?;
    Ok((verb, patch))
}

fn invalid(e: TextError) -> ClusterError {
    ClusterError::Invalid(e.to_string())
}

fn patch_len(body: &WitPatch) -> usize {
    match body {
        WitPatch::Merge(t) | WitPatch::Json(t) | WitPatch::Strategic(t) | WitPatch::Apply(t) => {
            t.len()
        }
    }
}

/// A `list`'s kind, namespace and selector, each checked by its grammar (the selector parsed
/// and bounded), before any of them reaches a grant check or a query string.
fn list_args(
    kind: Gvk,
    namespace: Option<&str>,
    label_selector: Option<&str>,
) -> Result<wasmop_core::cluster::GroupVersionKind, ClusterError> {
    let kind = from_wit_gvk("kind", kind)?;
    if let Some(ns) = namespace {
        names::check_namespace("namespace", ns).map_err(refused)?;
    }
    if let Some(selector) = label_selector {
        names::check_selector("label-selector", selector).map_err(refused)?;
    }
    Ok(kind)
}

impl CallState {
    fn authorize_ref(&mut self, verb: Verb, target: &ObjectRef) -> Result<(), ClusterError> {
        self.host.authorize(
            verb,
            &target.kind.group,
            &target.kind.kind,
            target.namespace.as_deref(),
        )
    }

    async fn write_object(
        &mut self,
        call: &'static str,
        verb: Verb,
        object: String,
    ) -> HostResult<String> {
        let cluster = self.host.begin(call, object.len())?;
        let object = match ObjectText::parse(object) {
            Ok(parsed) => parsed,
            Err(e) => return Ok(Err(to_wit_error(invalid(e)))),
        };
        if let Err(e) = self.authorize_ref(verb, object.target()) {
            return Ok(Err(to_wit_error(e)));
        }
        let plugin = self.host.plugin();
        let result = match verb {
            Verb::Create => cluster.create(object, plugin).await,
            _ => cluster.apply(object, plugin).await,
        };
        Ok(result.map_err(to_wit_error))
    }

    async fn patch_object(
        &mut self,
        call: &'static str,
        target: WitObjectRef,
        body: WitPatch,
        status: bool,
    ) -> HostResult<String> {
        let cluster = self.host.begin(call, ref_len(&target) + patch_len(&body))?;
        let target = match from_wit_ref("target", target) {
            Ok(target) => target,
            Err(e) => return Ok(Err(to_wit_error(e))),
        };
        let (verb, patch) = match parse_patch(body) {
            Ok(parsed) => parsed,
            Err(e) => return Ok(Err(to_wit_error(e))),
        };
        let verb = if status { Verb::PatchStatus } else { verb };
        if let Err(e) = self.authorize_ref(verb, &target) {
            return Ok(Err(to_wit_error(e)));
        }
        let plugin = self.host.plugin();
        let result = if status {
            cluster.patch_status(&target, patch, plugin).await
        } else {
            cluster.patch(&target, patch, plugin).await
        };
        Ok(result.map_err(to_wit_error))
    }
}

impl Host for CallState {
    async fn get(&mut self, target: WitObjectRef) -> HostResult<String> {
        let cluster = self.host.begin("kube.get", ref_len(&target))?;
        let target = match from_wit_ref("target", target) {
            Ok(target) => target,
            Err(e) => return Ok(Err(to_wit_error(e))),
        };
        if let Err(e) = self.authorize_ref(Verb::Get, &target) {
            return Ok(Err(to_wit_error(e)));
        }
        Ok(cluster.get(&target).await.map_err(to_wit_error))
    }

    async fn list(
        &mut self,
        kind: Gvk,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> HostResult<Vec<String>> {
        let bytes = kind.group.len()
            + kind.version.len()
            + kind.kind.len()
            + namespace.as_ref().map_or(0, String::len)
            + label_selector.as_ref().map_or(0, String::len);
        let cluster = self.host.begin("kube.list", bytes)?;
        let kind = match list_args(kind, namespace.as_deref(), label_selector.as_deref()) {
            Ok(kind) => kind,
            Err(e) => return Ok(Err(to_wit_error(e))),
        };
        if let Err(e) =
            self.host
                .authorize(Verb::List, &kind.group, &kind.kind, namespace.as_deref())
        {
            return Ok(Err(to_wit_error(e)));
        }
        Ok(cluster
            .list(&kind, namespace.as_deref(), label_selector.as_deref())
            .await
            .map_err(to_wit_error))
    }

    async fn create(&mut self, object: String) -> HostResult<String> {
        self.write_object("kube.create", Verb::Create, object).await
    }

    async fn apply(&mut self, object: String) -> HostResult<String> {
        self.write_object("kube.apply", Verb::Apply, object).await
    }

    async fn patch(&mut self, target: WitObjectRef, body: WitPatch) -> HostResult<String> {
        self.patch_object("kube.patch", target, body, false).await
    }

    async fn patch_status(&mut self, target: WitObjectRef, body: WitPatch) -> HostResult<String> {
        self.patch_object("kube.patch-status", target, body, true)
            .await
    }

    async fn delete(&mut self, target: WitObjectRef) -> HostResult<()> {
        let cluster = self.host.begin("kube.delete", ref_len(&target))?;
        let target = match from_wit_ref("target", target) {
            Ok(target) => target,
            Err(e) => return Ok(Err(to_wit_error(e))),
        };
        if let Err(e) = self.authorize_ref(Verb::Delete, &target) {
            return Ok(Err(to_wit_error(e)));
        }
        Ok(cluster
            .delete(&target, self.host.plugin())
            .await
            .map_err(to_wit_error))
    }
}
