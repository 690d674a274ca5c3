//! [`Context`]: the typed host calls a reconcile makes (kube reads and writes, events,
//! configuration).
//!
//! Every call is checked by the host against what the plugin declared in
//! [`describe`](crate::Reconciler::describe); a call outside it fails with
//! [`KubeError::Denied`](crate::KubeError::Denied).

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::bindings::wasmop::plugin::{config, events, kube, types};
use crate::delete::DeleteOptions;
use crate::error::Error;
use crate::object::{
    self, Gvk, Object, ObjectRef, check_scope, decode, encode, from_json, json_text,
};
use crate::stored::Stored;

/// A patch body, by patch type. Build the body with [`serde_json::json!`].
#[derive(Debug, Clone, PartialEq)]
pub enum Patch {
    /// A JSON merge patch (RFC 7386): objects merge, `null` deletes, lists are replaced.
    Merge(Value),
    /// A JSON patch (RFC 6902): an array of operations.
    Json(Value),
    /// A strategic merge patch (built-in kinds only): lists merge by their keys.
    Strategic(Value),
    /// A server-side apply patch with the plugin's field manager; must carry `apiVersion`
    /// and `kind`. [`Context::apply`] builds one from a typed object.
    Apply(Value),
}

impl From<&Patch> for kube::PatchBody {
    fn from(patch: &Patch) -> Self {
        match patch {
            Patch::Merge(body) => Self::Merge(json_text(body)),
            Patch::Json(body) => Self::Json(json_text(body)),
            Patch::Strategic(body) => Self::Strategic(json_text(body)),
            Patch::Apply(body) => Self::Apply(json_text(body)),
        }
    }
}

/// Whether an [`Event`] reports something normal or something wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Routine progress.
    Normal,
    /// Something an operator should look at.
    Warning,
}

/// A Kubernetes Event to record with [`Context::event`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Normal or warning.
    pub event_type: EventType,
    /// A short CamelCase reason, e.g. `ConfigApplied` (at most 128 characters).
    pub reason: String,
    /// What was done or failed, e.g. `Apply` (at most 128 characters).
    pub action: String,
    /// A human-readable note (at most 1024 characters; the host cuts longer notes).
    pub note: String,
}

impl Event {
    /// A normal event.
    pub fn normal(
        reason: impl Into<String>,
        action: impl Into<String>,
        note: impl Into<String>,
    ) -> Self {
        Self {
            event_type: EventType::Normal,
            reason: reason.into(),
            action: action.into(),
            note: note.into(),
        }
    }

    /// A warning event.
    pub fn warning(
        reason: impl Into<String>,
        action: impl Into<String>,
        note: impl Into<String>,
    ) -> Self {
        Self {
            event_type: EventType::Warning,
            ..Self::normal(reason, action, note)
        }
    }
}

/// The host calls available to one reconcile.
///
/// Namespaces are `Option<&str>`: `Some` for namespaced kinds, `None` for cluster-scoped
/// ones; the SDK checks this before calling the host. Every write returns the object as the
/// API server stored it, as a [`Stored`] that is decoded only if the plugin asks. Errors are [`Error`]s; `?` in `reconcile` turns them into a
/// retryable or permanent [`ReconcileError`](crate::ReconcileError) as
/// [`Error::is_retryable`] says.
///
/// ```no_run
/// # // no_run: outside a wasm host every host call panics.
/// use wasmop_guest::k8s_openapi::api::core::v1::{ConfigMap, Secret};
/// use wasmop_guest::serde_json::json;
/// use wasmop_guest::{Context, Event, ReconcileError, Patch};
///
/// #[derive(serde::Deserialize, Default)]
/// #[serde(default, deny_unknown_fields)]
/// struct Settings {
///     team: String,
/// }
///
/// fn example(cm: &ConfigMap, ctx: &Context) -> Result<(), ReconcileError> {
///     let settings: Settings = ctx.config()?;
///     let ns = Some("apps");
///     if let Some(secret) = ctx.get::<Secret>(ns, "db-password")? {
///         wasmop_guest::info!("found {:?}", secret.metadata.name);
///     }
///     for old in ctx.list::<ConfigMap>(ns, Some("generation=old"))? {
///         ctx.delete::<ConfigMap>(ns, old.metadata.name.as_deref().unwrap_or_default())?;
///     }
///     let label = Patch::Merge(json!({"metadata": {"labels": {"team": settings.team}}}));
///     ctx.patch::<ConfigMap>(ns, "settings", &label)?;
///     ctx.event(cm, Event::normal("Cleaned", "Delete", "removed old ConfigMaps"))?;
///     Ok(())
/// }
/// ```
#[derive(Debug)]
pub struct Context {
    target: ObjectRef,
}

impl Context {
    pub(crate) fn new(target: ObjectRef) -> Self {
        Self { target }
    }

    /// The object being reconciled.
    pub fn target(&self) -> &ObjectRef {
        &self.target
    }

    /// Reads one object; `Ok(None)` when it does not exist.
    pub fn get<T: Object>(&self, namespace: Option<&str>, name: &str) -> Result<Option<T>, Error> {
        let target = ObjectRef::new::<T>(namespace, name)?;
        match kube::get(&target.clone().into()) {
            Ok(json) => decode(&json, "get").map(Some),
            Err(types::KubeError::NotFound(_)) => Ok(None),
            Err(e) => Err(kube_error("get", target.to_string(), e)),
        }
    }

    /// Lists the `T` objects in `namespace` (`None`: every namespace the plugin may read)
    /// matching `selector` (Kubernetes label-selector syntax), if given.
    pub fn list<T: Object>(
        &self,
        namespace: Option<&str>,
        selector: Option<&str>,
    ) -> Result<Vec<T>, Error> {
        check_scope::<T>(namespace)?;
        let gvk = Gvk::of::<T>();
        let items = kube::list(&gvk.into(), namespace, selector).map_err(|e| {
            let mut target = object::plural::<T>().to_owned();
            if let Some(namespace) = namespace {
                target.push_str(&format!(" in {namespace}"));
            }
            if let Some(selector) = selector {
                target.push_str(&format!(" matching {selector:?}"));
            }
            kube_error("list", target, e)
        })?;
        items.iter().map(|json| decode(json, "list")).collect()
    }

    /// The `T` objects with an owner reference to `owner` (controller or not): in `owner`'s
    /// namespace when both kinds are namespaced, in every namespace the plugin may read when
    /// `owner` is cluster-scoped. controller-runtime's owner-field index, built into the host:
    /// for a kind the plugin [`owns`](crate::Info::owns) or watches it is answered from the
    /// host's cache without an API request, and the host hands over (and the plugin decodes)
    /// only the owned objects, however many others of the kind there are. For other kinds the
    /// host makes one list request and filters it.
    ///
    /// ```no_run
    /// # // no_run: outside a wasm host every host call panics.
    /// # use wasmop_guest::{Context, ReconcileError};
    /// use wasmop_guest::k8s_openapi::api::batch::v1::Job;
    /// use wasmop_guest::k8s_openapi::api::core::v1::ConfigMap;
    ///
    /// fn children(owner: &ConfigMap, ctx: &Context) -> Result<usize, ReconcileError> {
    ///     Ok(ctx.list_owned::<Job, _>(owner)?.len())
    /// }
    /// ```
    ///
    /// # Errors
    /// [`Error::MissingUid`] when `owner` was not read from the cluster.
    pub fn list_owned<T: Object, O: Object>(&self, owner: &O) -> Result<Vec<T>, Error> {
        let owner_ref = ObjectRef::of(owner)?;
        let Some(uid) = owner.meta().uid.as_deref() else {
            return Err(Error::MissingUid { owner: owner_ref });
        };
        let namespace = if T::NAMESPACED {
            owner.namespace()
        } else {
            None
        };
        let gvk = Gvk::of::<T>();
        let items = kube::list_owned(&gvk.into(), namespace, uid).map_err(|e| {
            kube_error(
                "list-owned",
                format!("{} of {owner_ref}", object::plural::<T>()),
                e,
            )
        })?;
        items
            .iter()
            .map(|json| decode(json, "list-owned"))
            .collect()
    }

    /// Creates `object`; fails with [`KubeError::AlreadyExists`](crate::KubeError::AlreadyExists)
    /// if one of that name exists (see [`Error::is_already_exists`]).
    pub fn create<T: Object>(&self, object: &T) -> Result<Stored<T>, Error> {
        let target = ObjectRef::of(object)?;
        let stored = kube::create(&encode(object)?)
            .map_err(|e| kube_error("create", target.to_string(), e))?;
        Ok(Stored::new(stored, "create"))
    }

    /// Server-side applies `object` with the field manager `wasmop/<plugin>` (forced, as
    /// controllers do). Set only the fields the plugin manages: what it sets, it owns; what
    /// it leaves out, it leaves to others.
    pub fn apply<T: Object>(&self, object: &T) -> Result<Stored<T>, Error> {
        let target = ObjectRef::of(object)?;
        let stored = kube::apply(&encode(object)?)
            .map_err(|e| kube_error("apply", target.to_string(), e))?;
        Ok(Stored::new(stored, "apply"))
    }

    /// Patches the `T` named `name`.
    pub fn patch<T: Object>(
        &self,
        namespace: Option<&str>,
        name: &str,
        patch: &Patch,
    ) -> Result<Stored<T>, Error> {
        self.patch_guarded(namespace, name, patch, None)
    }

    /// Patches `object` only if it is still as it was read: the write carries `object`'s
    /// `metadata.resourceVersion`, and fails with [`KubeError::Conflict`](crate::KubeError::Conflict)
    /// if anything changed the object since (see [`Error::is_conflict`]: read it again, or
    /// return the error to be retried).
    ///
    /// # Errors
    /// [`Error::MissingResourceVersion`] for an object not read from the cluster.
    pub fn patch_if_unchanged<T: Object>(
        &self,
        object: &T,
        patch: &Patch,
    ) -> Result<Stored<T>, Error> {
        let rv = resource_version(object)?;
        self.patch_guarded(object.namespace(), object.name(), patch, Some(rv))
    }

    fn patch_guarded<T: Object>(
        &self,
        namespace: Option<&str>,
        name: &str,
        patch: &Patch,
        resource_version: Option<&str>,
    ) -> Result<Stored<T>, Error> {
        let target = ObjectRef::new::<T>(namespace, name)?;
        let stored = kube::patch(&target.clone().into(), &patch.into(), resource_version)
            .map_err(|e| kube_error("patch", target.to_string(), e))?;
        Ok(Stored::new(stored, "patch"))
    }

    /// Patches the status subresource of the `T` named `name`.
    pub fn patch_status<T: Object>(
        &self,
        namespace: Option<&str>,
        name: &str,
        patch: &Patch,
    ) -> Result<Stored<T>, Error> {
        self.patch_status_body(namespace, name, &patch.into(), None)
    }

    /// Sets `object`'s status to `status` with a merge patch of the status subresource
    /// (`{"status": status}`: fields of `status` that serialize to `null` are removed).
    pub fn update_status<T: Object, S: Serialize>(
        &self,
        object: &T,
        status: &S,
    ) -> Result<Stored<T>, Error> {
        let body = kube::PatchBody::Merge(status_patch::<T, S>(status)?);
        self.patch_status_body(object.namespace(), object.name(), &body, None)
    }

    /// [`update_status`](Self::update_status), only if `object` is still as it was read: a
    /// status computed from a stale read fails with
    /// [`KubeError::Conflict`](crate::KubeError::Conflict) instead of overwriting a newer one
    /// (last writer wins otherwise). The guard is `object`'s `metadata.resourceVersion`.
    ///
    /// # Errors
    /// [`Error::MissingResourceVersion`] for an object not read from the cluster.
    pub fn update_status_if_unchanged<T: Object, S: Serialize>(
        &self,
        object: &T,
        status: &S,
    ) -> Result<Stored<T>, Error> {
        let rv = resource_version(object)?;
        let body = kube::PatchBody::Merge(status_patch::<T, S>(status)?);
        self.patch_status_body(object.namespace(), object.name(), &body, Some(rv))
    }

    /// [`patch_status`](Self::patch_status) with a body already written as text.
    fn patch_status_body<T: Object>(
        &self,
        namespace: Option<&str>,
        name: &str,
        body: &kube::PatchBody,
        resource_version: Option<&str>,
    ) -> Result<Stored<T>, Error> {
        let target = ObjectRef::new::<T>(namespace, name)?;
        let stored = kube::patch_status(&target.clone().into(), body, resource_version)
            .map_err(|e| kube_error("patch-status", target.to_string(), e))?;
        Ok(Stored::new(stored, "patch-status"))
    }

    /// Deletes the `T` named `name` with background propagation (owned objects are
    /// garbage-collected) and no preconditions. Deleting an object that does not exist
    /// succeeds.
    pub fn delete<T: Object>(&self, namespace: Option<&str>, name: &str) -> Result<(), Error> {
        self.delete_with::<T>(namespace, name, &DeleteOptions::new())
    }

    /// Deletes the `T` named `name` as `options` say: propagation, uid and resourceVersion
    /// preconditions (a failed one is [`KubeError::Conflict`](crate::KubeError::Conflict) and
    /// deletes nothing), grace period. Deleting an object that does not exist succeeds.
    ///
    /// ```no_run
    /// # // no_run: outside a wasm host every host call panics.
    /// # use wasmop_guest::{Context, ReconcileError};
    /// use wasmop_guest::k8s_openapi::api::batch::v1::Job;
    /// use wasmop_guest::{DeleteOptions, Object};
    ///
    /// fn prune(old: &Job, ctx: &Context) -> Result<(), ReconcileError> {
    ///     // Jobs orphan their Pods unless told otherwise; and only the Job as it was read.
    ///     let options = DeleteOptions::new().if_unchanged(old)?;
    ///     ctx.delete_with::<Job>(old.namespace(), old.name(), &options)?;
    ///     Ok(())
    /// }
    /// ```
    pub fn delete_with<T: Object>(
        &self,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<(), Error> {
        let target = ObjectRef::new::<T>(namespace, name)?;
        kube::delete(&target.clone().into(), &options.into())
            .map_err(|e| kube_error("delete", target.to_string(), e))
    }

    /// Records a Kubernetes Event about `regarding`. The host writes it in the background: an
    /// `Ok` means it was queued (or dropped by the host's rate limit), not yet written.
    pub fn event<T: Object>(&self, regarding: &T, event: Event) -> Result<(), Error> {
        let target = ObjectRef::of(regarding)?;
        let record = events::Event {
            regarding: target.clone().into(),
            event_type: match event.event_type {
                EventType::Normal => events::EventType::Normal,
                EventType::Warning => events::EventType::Warning,
            },
            reason: event.reason,
            action: event.action,
            note: event.note,
        };
        events::emit(&record).map_err(|e| kube_error("event on", target.to_string(), e))
    }

    /// The plugin's configuration as the operator wrote it, decoded into `C` (the host gives
    /// `{}` when there is none, so give `C` defaults with `#[serde(default)]`, and reject
    /// typos with `#[serde(deny_unknown_fields)]`).
    pub fn config<C: DeserializeOwned>(&self) -> Result<C, Error> {
        from_json(&config::get()).map_err(Error::Config)
    }
}

/// `object`'s resourceVersion, which a guarded write needs.
fn resource_version<T: Object>(object: &T) -> Result<&str, Error> {
    match object.meta().resource_version.as_deref() {
        Some(rv) => Ok(rv),
        None => Err(Error::MissingResourceVersion {
            target: ObjectRef::of(object)?,
        }),
    }
}

fn kube_error(call: &'static str, target: String, source: types::KubeError) -> Error {
    Error::Kube {
        call,
        target,
        source: source.into(),
    }
}

/// The merge patch `{"status": status}` as JSON text, written straight from `status`.
fn status_patch<T: Object, S: Serialize>(status: &S) -> Result<String, Error> {
    #[derive(Serialize)]
    struct StatusPatch<'a, S> {
        status: &'a S,
    }
    serde_json::to_string(&StatusPatch { status }).map_err(|source| Error::Encode {
        kind: object::kind::<T>(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    use super::*;

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Status {
        observed_generation: Option<i64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        phase: &'static str,
    }

    #[test]
    fn a_status_patch_is_the_status_under_one_key_with_nulls_that_remove_fields() {
        let status = Status {
            observed_generation: None,
            message: None,
            phase: "Ready",
        };
        let body = status_patch::<ConfigMap, _>(&status).expect("encodes");
        assert_eq!(
            body,
            r#"{"status":{"observedGeneration":null,"phase":"Ready"}}"#
        );
        // The same patch the `Value` path built.
        let value = serde_json::to_value(&status).expect("encodes");
        let parsed: Value = serde_json::from_str(&body).expect("valid JSON");
        assert_eq!(parsed, json!({ "status": value }));
    }

    #[test]
    fn a_status_that_cannot_be_written_is_an_encode_error_naming_the_kind() {
        let status = std::collections::BTreeMap::from([(vec![1u8], 1)]);
        let err = status_patch::<ConfigMap, _>(&status).expect_err("a list is no key");
        assert!(
            matches!(
                err,
                Error::Encode {
                    kind: "ConfigMap",
                    ..
                }
            ),
            "{err:?}"
        );
    }
}
