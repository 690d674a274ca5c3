//! One plugin's running controller: the version it calls (swappable), and a stop of its own.
//! A plugin that only serves admission has no controller: it is the version alone, which
//! the webhook server takes from the registry's catalog.
//!
//! # Guarantees
//! - [`Running::swap`] is one atomic replacement of the version the controller calls: a
//!   reconcile takes the current version when it starts and finishes on it; the next one
//!   starts on the new version. Watches and caches are untouched.
//! - [`Running::stop`] makes the controller take no new work, waits for its in-flight
//!   reconciles and returns when it has ended. The host's global shutdown stops it too.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use wasmop_controller::PluginSettings;
use wasmop_controller::controller::streak::{Failing, Streak};
use wasmop_controller::controller::{self, Shared};
use wasmop_runtime::Plugin;

/// A plugin's controller task, or none for a plugin that only serves admission.
pub(crate) struct Running {
    version: watch::Sender<Plugin>,
    stop: Arc<watch::Sender<bool>>,
    task: Option<JoinHandle<()>>,
}

impl Running {
    /// Starts the controller of `plugin` with `settings`. It stops at the host's shutdown
    /// (`shared.shutdown`) or at [`Running::stop`], whichever comes first. A version that
    /// fails `settings.failure_threshold` reconciles in a row is reported on `failing`. A
    /// plugin without a reconciler gets no controller; its status says it reviews.
    pub(crate) fn start(
        plugin: Plugin,
        settings: PluginSettings,
        shared: &Shared,
        failing: &mpsc::UnboundedSender<Failing>,
    ) -> Self {
        if plugin.reconciler().is_none() {
            shared.status.record(
                plugin.name().as_str(),
                wasmop_controller::status::State::Reviewing,
                None,
            );
            let (version, _) = watch::channel(plugin);
            let (stop, _) = watch::channel(false);
            return Self {
                version,
                stop: Arc::new(stop),
                task: None,
            };
        }
        let streak = Arc::new(Streak::new(
            plugin.name().clone(),
            settings.failure_threshold,
            failing.clone(),
        ));
        let (version, current) = watch::channel(plugin);
        let (stop, stopped) = watch::channel(false);
        let stop = Arc::new(stop);
        // The controller sees one shutdown signal: this plugin's own, which the host's
        // shutdown also sets. The forwarder ends with the plugin (when every receiver is gone).
        let forward = stop.clone();
        let mut global = shared.shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = global.wait_for(|stop| *stop) => { let _ = forward.send(true); }
                () = forward.closed() => {}
            }
        });
        let shared = Shared {
            shutdown: stopped,
            ..shared.clone()
        };
        let task = tokio::spawn(async move {
            let name = current.borrow().name().clone();
            if let Err(error) = controller::run(current, settings, shared.clone(), streak).await {
                let error = wasmop_core::chain(&error);
                tracing::error!(plugin = %name, error = %error, "plugin controller failed");
                shared.status.record(
                    name.as_str(),
                    wasmop_controller::status::State::Failed,
                    Some(error),
                );
            }
        });
        Self {
            version,
            stop,
            task: Some(task),
        }
    }

    /// The version the controller calls now.
    pub(crate) fn current(&self) -> Plugin {
        self.version.borrow().clone()
    }

    /// Makes `plugin` the version the controller calls, and returns the one it replaces.
    pub(crate) fn swap(&self, plugin: Plugin) -> Plugin {
        self.version.send_replace(plugin)
    }

    /// Stops the controller and waits until its in-flight reconciles are done.
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task
            && let Err(error) = task.await
        {
            tracing::error!(%error, "plugin controller task ended abnormally");
        }
    }

    /// Waits for the controller to end (after the host's shutdown).
    pub(crate) async fn join(self) {
        if let Some(task) = self.task {
            let _ = task.await;
        }
    }
}
