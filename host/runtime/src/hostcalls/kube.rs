//! `wasmop:plugin/kube`: reads and writes through the [`wasmop_core::cluster::Cluster`], each call
//! counted, its bytes charged, and checked against the plugin's grants. Objects the guest
//! passes must be JSON objects naming their kind; anything else is `invalid` to the guest.
//! uids and resourceVersions (preconditions, `list-owned`'s owner) are checked as tokens
//! ([`names::check_token`]) before they reach a request body or an index.

use super::wit::kube::{
    DeleteOptions, Host, PatchBody as WitPatch, Preconditions as WitPreconditions, Propagation,
};
use super::wit::types::{Gvk, KubeError, ObjectRef as WitObjectRef};
use super::{from_wit_gvk, from_wit_ref, invalid as refused, ref_len, to_wit_error};
use crate::call::CallState;
use wasmop_core::cluster::names;
use wasmop_core::cluster::text::{PatchKind, TextError, guarded, parse_patch as parse_text_patch};
use wasmop_core::cluster::{
    ClusterError, DeleteParams, Json, ObjectRef, ObjectText, Patch, Preconditions,
    PropagationPolicy,
};
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

/// A uid or resourceVersion the guest passed, checked as a token; `field` names it.
fn token(field: &str, value: Option<String>) -> Result<Option<String>, ClusterError> {
    if let Some(v) = &value {
        names::check_token(field, v).map_err(refused)?;
    }
    Ok(value)
}

/// `delete-options` as the API's `DeleteOptions`, every value checked.
fn delete_params(options: DeleteOptions) -> Result<DeleteParams, ClusterError> {
    let WitPreconditions {
        uid,
        resource_version,
    } = options.preconditions;
    let uid = token("options.preconditions.uid", uid)?;
    let resource_version = token("options.preconditions.resource-version", resource_version)?;
    let preconditions = (uid.is_some() || resource_version.is_some()).then_some(Preconditions {
        uid,
        resource_version,
    });
    Ok(DeleteParams {
        dry_run: false,
        grace_period_seconds: options.grace_period_seconds,
        propagation_policy: Some(match options.propagation {
            Propagation::Background => PropagationPolicy::Background,
            Propagation::Foreground => PropagationPolicy::Foreground,
            Propagation::Orphan => PropagationPolicy::Orphan,
        }),
        preconditions,
    })
}

/// Bytes the guest passed in `delete-options`.
fn options_len(options: &DeleteOptions) -> usize {
    let p = &options.preconditions;
    p.uid.as_ref().map_or(0, String::len) + p.resource_version.as_ref().map_or(0, String::len)
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
        if_resource_version: Option<String>,
        status: bool,
    ) -> HostResult<String> {
        let bytes = ref_len(&target)
            + patch_len(&body)
            + if_resource_version.as_ref().map_or(0, String::len);
        let cluster = self.host.begin(call, bytes)?;
        let target = match from_wit_ref("target", target) {
            Ok(target) => target,
            Err(e) => return Ok(Err(to_wit_error(e))),
        };
        let parsed = parse_patch(body).and_then(|(verb, patch)| {
            match token("if-resource-version", if_resource_version)? {
                Some(rv) => Ok((verb, guarded(patch, &rv).map_err(invalid)?)),
                None => Ok((verb, patch)),
            }
        });
        let (verb, patch) = match parsed {
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

    async fn list_owned(
        &mut self,
        kind: Gvk,
        namespace: Option<String>,
        owner_uid: String,
    ) -> HostResult<Vec<String>> {
        let bytes = kind.group.len()
            + kind.version.len()
            + kind.kind.len()
            + namespace.as_ref().map_or(0, String::len)
            + owner_uid.len();
        let cluster = self.host.begin("kube.list-owned", bytes)?;
        let checked = list_args(kind, namespace.as_deref(), None).and_then(|kind| {
            names::check_token("owner-uid", &owner_uid).map_err(refused)?;
            Ok(kind)
        });
        let kind = match checked {
            Ok(kind) => kind,
            Err(e) => return Ok(Err(to_wit_error(e))),
        };
        if let Err(e) = self.host.authorize_as(
            "list-owned",
            Verb::List,
            &kind.group,
            &kind.kind,
            namespace.as_deref(),
        ) {
            return Ok(Err(to_wit_error(e)));
        }
        Ok(cluster
            .list_owned(&kind, namespace.as_deref(), &owner_uid)
            .await
            .map_err(to_wit_error))
    }

    async fn create(&mut self, object: String) -> HostResult<String> {
        self.write_object("kube.create", Verb::Create, object).await
    }

    async fn apply(&mut self, object: String) -> HostResult<String> {
        self.write_object("kube.apply", Verb::Apply, object).await
    }

    async fn patch(
        &mut self,
        target: WitObjectRef,
        body: WitPatch,
        if_resource_version: Option<String>,
    ) -> HostResult<String> {
        self.patch_object("kube.patch", target, body, if_resource_version, false)
            .await
    }

    async fn patch_status(
        &mut self,
        target: WitObjectRef,
        body: WitPatch,
        if_resource_version: Option<String>,
    ) -> HostResult<String> {
        self.patch_object("kube.patch-status", target, body, if_resource_version, true)
            .await
    }

    async fn delete(&mut self, target: WitObjectRef, options: DeleteOptions) -> HostResult<()> {
        let cluster = self
            .host
            .begin("kube.delete", ref_len(&target) + options_len(&options))?;
        let checked =
            from_wit_ref("target", target).and_then(|target| Ok((target, delete_params(options)?)));
        let (target, params) = match checked {
            Ok(checked) => checked,
            Err(e) => return Ok(Err(to_wit_error(e))),
        };
        if let Err(e) = self.authorize_ref(Verb::Delete, &target) {
            return Ok(Err(to_wit_error(e)));
        }
        Ok(cluster
            .delete(&target, &params, self.host.plugin())
            .await
            .map_err(to_wit_error))
    }
}
