//! `wasmop:plugin/kube`: reads and writes through the [`crate::cluster::Cluster`], each call
//! counted, its bytes charged, and checked against the plugin's grants. Objects the guest
//! passes must be JSON objects naming their kind; anything else is `invalid` to the guest.

use serde_json::Value;

use super::wit::kube::{Host, PatchBody as WitPatch};
use super::wit::types::{Gvk, KubeError, ObjectRef as WitObjectRef};
use super::{from_wit_gvk, from_wit_ref, ref_len, to_wit_error};
use crate::cluster::{ClusterError, ObjectRef, Patch};
use crate::plugin::Verb;
use crate::runtime::call::CallState;

type HostResult<T> = wasmtime::Result<Result<T, KubeError>>;

fn parse_object(text: &str) -> Result<(Value, ObjectRef), ClusterError> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| ClusterError::Invalid(format!("the object is not valid JSON: {e}")))?;
    let target = ObjectRef::of(&value).map_err(|e| ClusterError::Invalid(e.to_string()))?;
    Ok((value, target))
}

fn parse_patch(body: WitPatch) -> Result<(Verb, Patch<Value>), ClusterError> {
    let json = |text: &str| {
        serde_json::from_str::<Value>(text)
            .map_err(|e| ClusterError::Invalid(format!("the patch is not valid JSON: {e}")))
    };
    Ok(match body {
        WitPatch::Merge(t) => (Verb::Patch, Patch::Merge(json(&t)?)),
        WitPatch::Strategic(t) => (Verb::Patch, Patch::Strategic(json(&t)?)),
        WitPatch::Apply(t) => (Verb::Apply, Patch::Apply(json(&t)?)),
        WitPatch::Json(t) => {
            let ops: json_patch::Patch = serde_json::from_str(&t).map_err(|e| {
                ClusterError::Invalid(format!("the patch is not a valid JSON patch: {e}"))
            })?;
            (Verb::Patch, Patch::Json(ops))
        }
    })
}

fn patch_len(body: &WitPatch) -> usize {
    match body {
        WitPatch::Merge(t) | WitPatch::Json(t) | WitPatch::Strategic(t) | WitPatch::Apply(t) => {
            t.len()
        }
    }
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
        let (value, target) = match parse_object(&object) {
            Ok(parsed) => parsed,
            Err(e) => return Ok(Err(to_wit_error(e))),
        };
        if let Err(e) = self.authorize_ref(verb, &target) {
            return Ok(Err(to_wit_error(e)));
        }
        let plugin = self.host.plugin();
        let result = match verb {
            Verb::Create => cluster.create(value, plugin).await,
            _ => cluster.apply(value, plugin).await,
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
        let target = from_wit_ref(target);
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
        let target = from_wit_ref(target);
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
        let kind = from_wit_gvk(kind);
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
        let target = from_wit_ref(target);
        if let Err(e) = self.authorize_ref(Verb::Delete, &target) {
            return Ok(Err(to_wit_error(e)));
        }
        Ok(cluster
            .delete(&target, self.host.plugin())
            .await
            .map_err(to_wit_error))
    }
}
