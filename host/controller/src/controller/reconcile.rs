//! One reconcile of one primary object: scope check, finalizer handling, the plugin call, and
//! turning its [`Outcome`] into the next step (requeue, backoff, Event, metric, log).

use std::sync::Arc;

use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{ObjectMeta, TypeMeta};
use tokio::sync::SemaphorePermit;
use tracing::Instrument;

use super::PluginCtx;
use super::finalizer::{self, FinalizerError};
use crate::events::Record;
use crate::metrics::ActiveWorker;
use crate::watches::CachedObject;
use wasmop_core::cluster::{EventType, ObjectRef};
use wasmop_core::plugin::PluginInfo;
use wasmop_runtime::{
    self as runtime, Call, CallReport, Outcome, Plugin, PluginErrorKind, Request, RequestObject,
};

/// Why a reconcile failed on the host's side (the plugin's own failures are outcomes).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReconcileError {
    /// Adding or removing the finalizer failed.
    #[error("finalizer handling failed for {target}")]
    Finalizer {
        /// The object (boxed to keep the error small).
        target: Box<ObjectRef>,
        /// Why (boxed: kube errors are large, and this is the cold path).
        #[source]
        source: Box<FinalizerError>,
    },
}

impl ReconcileError {
    /// The object concerned.
    pub(crate) fn target(&self) -> &ObjectRef {
        match self {
            ReconcileError::Finalizer { target, .. } => target,
        }
    }
}

/// The entry point the controller's work loop ([`super::runner`]) calls; gives the delay
/// after which to reconcile the object again, if any.
pub(crate) async fn reconcile(
    obj: Arc<CachedObject>,
    ctx: Arc<PluginCtx>,
) -> Result<Option<Duration>, ReconcileError> {
    let event_at = ctx.queue.started(obj.namespace().as_deref(), &obj.name());
    if !ctx.in_scope(&obj) {
        return Ok(None);
    }
    let target = ctx.target_of(&obj);
    // This reconcile runs to its end on the version current now, even if a new one is
    // swapped in meanwhile.
    let plugin = ctx.current();
    let span = tracing::info_span!(
        "reconcile",
        plugin = %plugin.name(),
        object.ref = %target,
        plugin.digest = %plugin.digest().short(),
    );
    let started = std::time::Instant::now();
    let result = run(obj, target, ctx.clone(), plugin.clone(), event_at)
        .instrument(span)
        .await;
    if let Err(error) = &result {
        let plugin = plugin.name().as_str();
        ctx.shared.metrics.host_failed(plugin, started.elapsed());
        ctx.shared
            .status
            .reconciled(plugin, Some(wasmop_core::chain(error)));
    }
    result
}

async fn run(
    obj: Arc<CachedObject>,
    target: ObjectRef,
    ctx: Arc<PluginCtx>,
    plugin: Plugin,
    event_at: Option<tokio::time::Instant>,
) -> Result<Option<Duration>, ReconcileError> {
    let _admitted = admit(&ctx, &plugin, event_at).await;
    let started = std::time::Instant::now();
    let recording = ctx.cluster_for(&target);
    let info = &*ctx.info;
    let meta = obj.meta();
    let deleting = meta.deletion_timestamp.is_some();
    let has_finalizer = |f: &str| meta.finalizers.iter().flatten().any(|x| x == f);
    let api = ctx.primary_api(target.namespace.as_deref());
    let finalizer_error = |source| ReconcileError::Finalizer {
        target: Box::new(target.clone()),
        source: Box::new(source),
    };

    let (CallReport { outcome, usage, .. }, cleanup) = match (&info.finalizer, deleting) {
        (Some(f), true) if has_finalizer(f) => {
            tracing::info!("object is being deleted; calling cleanup");
            let request = request(&target, &obj);
            (
                plugin.call(recording.clone(), Call::cleanup(request)).await,
                true,
            )
        }
        // Being deleted without our finalizer: nothing of ours to do.
        (_, true) => return Ok(None),
        (Some(f), false) => {
            let current = if has_finalizer(f) {
                obj.clone()
            } else {
                let types = TypeMeta {
                    api_version: ctx.primary.resource.api_version.clone(),
                    kind: ctx.primary.resource.kind.clone(),
                };
                let added = finalizer::add(&api, &meta, f, &info.name, &types)
                    .await
                    .map_err(finalizer_error)?;
                tracing::debug!(finalizer = %f, "finalizer added");
                Arc::new(added)
            };
            let request = request(&target, &current);
            (
                plugin
                    .call(recording.clone(), Call::reconcile(request))
                    .await,
                false,
            )
        }
        (None, false) => {
            let request = request(&target, &obj);
            (
                plugin
                    .call(recording.clone(), Call::reconcile(request))
                    .await,
                false,
            )
        }
    };

    ctx.shared.metrics.usage(plugin.name().as_str(), &usage);
    if cleanup && outcome == Outcome::Action(runtime::Action::Done) {
        remove_finalizer(&api, &meta, &target, info).await?;
    }
    let requeue = settle(
        &ctx,
        &plugin,
        &obj,
        &target,
        outcome,
        cleanup,
        started.elapsed(),
    )
    .await;
    // A change held back from this reconcile while its write was in flight was not that
    // write's echo: it triggers the object again now, as it would have without the hold.
    if recording.retrigger() {
        return Ok(Some(Duration::ZERO));
    }
    Ok(requeue)
}

/// Removes the plugin's finalizer from an object whose cleanup is done, so that its deletion
/// can complete.
async fn remove_finalizer(
    api: &kube::Api<kube::api::DynamicObject>,
    meta: &ObjectMeta,
    target: &ObjectRef,
    info: &PluginInfo,
) -> Result<(), ReconcileError> {
    let Some(f) = &info.finalizer else {
        return Ok(());
    };
    finalizer::remove(api, meta, f, &info.name)
        .await
        .map_err(|source| ReconcileError::Finalizer {
            target: Box::new(target.clone()),
            source: Box::new(source),
        })?;
    tracing::info!(finalizer = %f, "cleanup done; finalizer removed");
    Ok(())
}

/// What a reconcile holds while it runs: the host's and the plugin's concurrency permits and
/// its `active_workers` slot, all released when it is dropped.
struct Admitted<'a> {
    _global: Option<SemaphorePermit<'a>>,
    _own: Option<SemaphorePermit<'a>>,
    _active: ActiveWorker,
}

/// Waits for the permits of one reconcile of `plugin`, then records the time from its watch
/// event (`event_at`) to now, when the plugin is about to be called.
async fn admit<'a>(
    ctx: &'a PluginCtx,
    plugin: &Plugin,
    event_at: Option<tokio::time::Instant>,
) -> Admitted<'a> {
    let name = plugin.name().as_str();
    // Semaphores are never closed, so acquiring cannot fail; the global permit is held for
    // the whole call so the host-wide bound covers host calls too.
    let global = ctx.shared.global.acquire().await.ok();
    let own = ctx.permits.acquire().await.ok();
    let active = ctx.shared.metrics.active(name);
    if let Some(at) = event_at {
        ctx.shared.metrics.event_to_reconcile(name, at.elapsed());
    }
    Admitted {
        _global: global,
        _own: own,
        _active: active,
    }
}

/// The request for `obj`: its cached JSON text (trimmed when cached), which the runtime
/// passes on as it is.
fn request(target: &ObjectRef, obj: &CachedObject) -> Request {
    Request {
        target: target.clone(),
        object: RequestObject::Text(obj.text().to_owned()),
    }
}

/// Maps an outcome onto the next step, and reports failures.
async fn settle(
    ctx: &PluginCtx,
    plugin: &Plugin,
    obj: &CachedObject,
    target: &ObjectRef,
    outcome: Outcome,
    cleanup: bool,
    elapsed: Duration,
) -> Option<Duration> {
    ctx.streak.record(plugin.digest(), &outcome);
    let plugin = plugin.name().as_str();
    ctx.shared.metrics.reconciled(plugin, &outcome, elapsed);
    ctx.shared
        .status
        .reconciled(plugin, (!outcome.is_success()).then(|| outcome.to_string()));
    let entry = if cleanup { "cleanup" } else { "reconcile" };
    match &outcome {
        Outcome::Action(action) => {
            ctx.backoffs.succeeded(target);
            tracing::info!(outcome = %outcome, "{entry} succeeded");
            return match action {
                runtime::Action::Done => None,
                runtime::Action::RequeueAfter(d) => Some(requeue_delay(ctx, plugin, *d)),
            };
        }
        Outcome::PluginError {
            kind: PluginErrorKind::Permanent,
            ..
        } => {
            ctx.backoffs.succeeded(target);
            tracing::warn!(outcome = %outcome, "{entry} failed permanently; waiting for the object to change");
            report(ctx, obj, target, "ReconcileFailed", entry, &outcome).await;
            return None;
        }
        // Every denied call of the reconcile was counted with its usage.
        Outcome::Denied(_) => {
            report(ctx, obj, target, "HostCallDenied", entry, &outcome).await;
        }
        Outcome::PluginError { .. } => {
            report(ctx, obj, target, "ReconcileFailed", entry, &outcome).await
        }
        _ => report(ctx, obj, target, "PluginFailed", entry, &outcome).await,
    }
    let (delay, failures) = ctx.backoffs.failed(target);
    ctx.shared.metrics.retried(plugin);
    tracing::warn!(
        outcome = %outcome,
        failures,
        retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
        "{entry} failed; retrying with backoff"
    );
    Some(delay)
}

/// The delay of a requeue the plugin asked for: at least the plugin's floor, so that a
/// plugin that requeues after 0 ms cannot spin. A raised requeue is counted and logged at
/// debug level (the plugin's own answer stays in the reconcile's log line).
fn requeue_delay(ctx: &PluginCtx, plugin: &str, asked: Duration) -> Duration {
    if asked >= ctx.min_requeue_after {
        return asked;
    }
    ctx.shared.metrics.requeue_raised(plugin);
    tracing::debug!(
        asked_ms = u64::try_from(asked.as_millis()).unwrap_or(u64::MAX),
        floor_ms = u64::try_from(ctx.min_requeue_after.as_millis()).unwrap_or(u64::MAX),
        "requeue raised to the plugin's minRequeueAfter"
    );
    ctx.min_requeue_after
}

async fn report(
    ctx: &PluginCtx,
    obj: &CachedObject,
    target: &ObjectRef,
    reason: &str,
    entry: &str,
    outcome: &Outcome,
) {
    let record = Record {
        regarding: reference(&obj.meta(), target),
        event_type: EventType::Warning,
        reason: reason.to_owned(),
        action: if entry == "cleanup" {
            "Cleanup"
        } else {
            "Reconcile"
        }
        .to_owned(),
        note: outcome.to_string(),
    };
    let plugin = ctx.current();
    let plugin = plugin.name().as_str();
    // Written in the background: a failure is logged and counted by the sink.
    ctx.shared.events.publish(plugin, record).await;
}

/// The Event reference of a primary object with metadata `meta`.
pub(crate) fn reference(meta: &ObjectMeta, target: &ObjectRef) -> ObjectReference {
    ObjectReference {
        api_version: Some(target.api_version()),
        kind: Some(target.kind.kind.clone()),
        namespace: target.namespace.clone(),
        name: Some(target.name.clone()),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        ..ObjectReference::default()
    }
}

/// What the controller does when [`reconcile`] itself failed: retry with the object's
/// backoff (the delay returned).
pub(crate) fn error_policy(
    _obj: Arc<CachedObject>,
    error: &ReconcileError,
    ctx: Arc<PluginCtx>,
) -> Duration {
    let (delay, failures) = ctx.backoffs.failed(error.target());
    let plugin = ctx.current();
    ctx.shared.metrics.retried(plugin.name().as_str());
    tracing::warn!(
        plugin = %plugin.name(),
        object.ref = %error.target(),
        error = %wasmop_core::chain(error),
        failures,
        retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
        "reconcile failed in the host; retrying with backoff"
    );
    delay
}

#[cfg(test)]
mod tests {
    use kube::api::DynamicObject;
    use kube::core::GroupVersionKind;

    use super::*;

    #[test]
    fn request_text_is_the_cached_trimmed_object() {
        let obj: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": "a", "namespace": "ns",
                "managedFields": [{"manager": "kubectl"}],
                "annotations": {
                    "kubectl.kubernetes.io/last-applied-configuration": "{}",
                    "keep": "me"
                }
            },
            "data": {"k": "v"}
        }))
        .expect("object");
        let types = TypeMeta {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        };
        let cached = CachedObject::new(obj, &types).expect("cached");
        let target = ObjectRef::new(
            GroupVersionKind::gvk("", "v1", "ConfigMap"),
            Some("ns".into()),
            "a",
        );
        let RequestObject::Text(text) = request(&target, &cached).object else {
            panic!("the controller passes text");
        };
        assert_eq!(text, cached.text());
        let sent: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(
            sent,
            serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "a", "namespace": "ns", "annotations": {"keep": "me"}},
                "data": {"k": "v"}
            })
        );
    }
}
