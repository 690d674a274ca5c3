//! One of a plugin's controllers (one per namespace it is confined to, else one), from the
//! setup of its triggers to its end: wait for its caches, wait for the leader Lease, record
//! the plugin's finalizer, then reconcile until the host shuts down or the Lease is lost.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future;
use tokio::sync::OnceCell;

use super::kinds::Kinds;
use super::triggers::{self, Scope, Triggers};
use super::{PluginCtx, reconcile, runner};
use crate::orphans::Entry;
use crate::settings::PluginSettings;
use crate::status::State;
use crate::watches::{ObjectKey, SharedWatch, Store};
use wasmop_core::chain;

/// What the controllers of one plugin do once between them.
#[derive(Clone)]
pub(super) struct Startup {
    /// Controllers whose caches are not synced yet: the last to sync reports the plugin
    /// synced.
    unsynced: Arc<AtomicUsize>,
    /// Set once the finalizer entry is written, by the first controller that starts
    /// reconciling: before any finalizer is added, and never by a standby.
    recorded: Arc<OnceCell<()>>,
    /// The finalizer entry of a plugin that declares a finalizer.
    entry: Option<Entry>,
}

impl Startup {
    /// The startup of `controllers` controllers of a plugin with finalizer entry `entry`.
    pub(super) fn new(controllers: usize, entry: Option<Entry>) -> Self {
        Self {
            unsynced: Arc::new(AtomicUsize::new(controllers)),
            recorded: Arc::new(OnceCell::new()),
            entry,
        }
    }
}

/// Sets up the controller of `scope` (its triggers and watches start now, so its caches
/// fill even on a standby) and gives the future that runs it until shutdown.
pub(super) fn controller(
    ctx: Arc<PluginCtx>,
    name: String,
    kinds: &Kinds,
    scope: &Scope,
    startup: Startup,
    settings: &PluginSettings,
    every_change: bool,
) -> impl Future<Output = ()> + Send + use<> {
    let primary_watch = triggers::primary_watch(&ctx, kinds, scope);
    let store = primary_watch.store();
    let triggers = triggers::triggers(&ctx, kinds, scope, &primary_watch, every_change);
    let feeds = triggers::feeds(&ctx.shared, kinds, scope, primary_watch);
    let loop_settings = (usize::from(settings.concurrency), settings.object_rate);
    async move {
        if !synced(&ctx, &name, &feeds, &startup).await || !leading(&ctx).await {
            return;
        }
        record_finalizer(&ctx, &name, &startup).await;
        reconcile_while_leading(ctx, name, triggers, store, loop_settings).await;
    }
}

/// Waits until every watch in `feeds` has synced its cache; the last of the plugin's
/// controllers to get there reports the plugin synced (`running` or `standby`). `false` when
/// the host shuts down first.
async fn synced(
    ctx: &PluginCtx,
    name: &str,
    feeds: &[Arc<SharedWatch>],
    startup: &Startup,
) -> bool {
    let shared = &ctx.shared;
    let mut shutdown = shared.shutdown.clone();
    tokio::select! {
        _ = future::join_all(feeds.iter().map(|w| w.ready())) => {}
        _ = shutdown.wait_for(|stop| *stop) => return false,
    }
    if startup.unsynced.fetch_sub(1, Ordering::AcqRel) == 1 {
        let leading = *shared.leading.borrow();
        let state = if leading {
            State::Running
        } else {
            State::Standby
        };
        // Logged before readiness can flip, so a log reader never sees ready first.
        tracing::info!(plugin = %name, leading, "plugin caches synced");
        shared.status.record(name, state, None);
    }
    true
}

/// Waits until this host may reconcile; `false` when the host shuts down first (or the
/// leadership channel closes, which it does only as the host goes away).
async fn leading(ctx: &PluginCtx) -> bool {
    let mut leading = ctx.shared.leading.clone();
    let mut shutdown = ctx.shared.shutdown.clone();
    tokio::select! {
        r = leading.wait_for(|l| *l) => r.is_ok(),
        _ = shutdown.wait_for(|stop| *stop) => false,
    }
}

/// Records the plugin's finalizer (once for all its controllers), so that the orphan rule can
/// release it if the plugin is removed later. A failure is logged and the plugin still runs.
async fn record_finalizer(ctx: &PluginCtx, name: &str, startup: &Startup) {
    let Some(entry) = &startup.entry else {
        return;
    };
    startup
        .recorded
        .get_or_init(|| async {
            if let Err(error) = ctx.shared.orphans.record(ctx.current().name(), entry).await {
                tracing::error!(plugin = %name, error = %chain(&error), "cannot record the plugin's finalizer");
            }
        })
        .await;
}

/// Runs the work loop over `triggers` until the host shuts down or this host loses the
/// leader Lease; `(concurrency, object_rate)` are the plugin's.
async fn reconcile_while_leading(
    ctx: Arc<PluginCtx>,
    plugin_name: String,
    triggers: Triggers,
    store: Store,
    (concurrency, object_rate): (usize, Option<super::throttle::ObjectRate>),
) {
    let mut shutdown = ctx.shared.shutdown.clone();
    let mut leading = ctx.shared.leading.clone();
    let stop = async move {
        let _ = shutdown.wait_for(|stop| *stop).await;
    };
    let start = |key: ObjectKey| {
        let Some(obj) = store.get(key.namespace.as_deref(), &key.name).map(Arc::new) else {
            ctx.queue.dropped(key.namespace.as_deref(), &key.name);
            tracing::debug!(plugin = %plugin_name, object = %key, "object gone before its reconcile");
            return None;
        };
        let ctx = ctx.clone();
        Some(async move {
            match reconcile::reconcile(obj.clone(), ctx.clone()).await {
                Ok(requeue) => requeue,
                Err(error) => Some(reconcile::error_policy(obj, &error, ctx)),
            }
        })
    };
    let (metrics, throttled_plugin) = (ctx.shared.metrics.clone(), plugin_name.clone());
    let loop_settings = runner::Settings {
        concurrency,
        rate: object_rate,
        on_throttled: move |key: &ObjectKey| {
            metrics.throttled(&throttled_plugin);
            tracing::debug!(plugin = %throttled_plugin, object = %key, "object reconciled as often as its rate limit allows: it waits for its next token");
        },
    };
    let reconciling = runner::run(triggers, loop_settings, start, stop);
    // Without the lease nothing may reconcile: dropping the loop drops in-flight
    // reconciles at their next await point.
    tokio::select! {
        () = reconciling => {}
        () = async {
            // A closed channel (the host is going away) is not a loss: keep draining.
            if leading.wait_for(|l| !*l).await.is_err() {
                future::pending::<()>().await;
            }
        } => {
            tracing::warn!(plugin = %plugin_name, "leadership lost: reconciling stopped");
        }
    }
}
