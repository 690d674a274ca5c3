//! controller-runtime's families, recorded by the work loop: reconciles by result, their
//! times and errors, how many run and may run at once, and the workqueue's depth, adds,
//! retries and waits (see [`crate::controller::queue`] for how those are taken).

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::labels::{ControllerLabels, NameLabels, ResultLabels};
use super::{Histograms, Metrics, duration_histogram, latency_histogram, registered};

/// controller-runtime's reconcile families (labelled `controller`).
#[derive(Clone)]
pub(super) struct Reconciles {
    reconciles: Family<ResultLabels, Counter>,
    reconcile_errors: Family<ControllerLabels, Counter>,
    pub(super) terminal_errors: Family<ControllerLabels, Counter>,
    pub(super) panics: Family<ControllerLabels, Counter>,
    reconcile_time: Histograms<ControllerLabels>,
    max_concurrent: Family<ControllerLabels, Gauge>,
    active_workers: Family<ControllerLabels, Gauge>,
}

/// client-go's workqueue families (labelled `name`), and wasmop's event-to-reconcile latency.
#[derive(Clone)]
pub(super) struct Workqueue {
    retries: Family<NameLabels, Counter>,
    depth: Family<NameLabels, Gauge>,
    adds: Family<NameLabels, Counter>,
    queue_duration: Histograms<NameLabels>,
    event_to_reconcile: Histograms<NameLabels>,
    work_duration: Histograms<NameLabels>,
}

impl Reconciles {
    /// Registers the reconcile families in `r`.
    pub(super) fn register(r: &mut Registry) -> Self {
        Self {
            reconciles: registered(
                r,
                "controller_runtime_reconcile",
                "Reconciles per plugin (controller) and result: success, error, requeue_after",
                Family::default(),
            ),
            reconcile_errors: registered(
                r,
                "controller_runtime_reconcile_errors",
                "Reconciles that did not succeed, per plugin (controller)",
                Family::default(),
            ),
            terminal_errors: registered(
                r,
                "controller_runtime_terminal_reconcile_errors",
                "Reconciles that ended in a permanent plugin error (not retried)",
                Family::default(),
            ),
            panics: registered(
                r,
                "controller_runtime_reconcile_panics",
                "Reconciles in which the plugin trapped (a panic, unreachable, stack overflow)",
                Family::default(),
            ),
            reconcile_time: registered(
                r,
                "controller_runtime_reconcile_time_seconds",
                "Time per reconcile, per plugin (controller)",
                Family::new_with_constructor(duration_histogram),
            ),
            max_concurrent: registered(
                r,
                "controller_runtime_max_concurrent_reconciles",
                "Reconciles of one plugin (controller) that may run at once",
                Family::default(),
            ),
            active_workers: registered(
                r,
                "controller_runtime_active_workers",
                "Reconciles of one plugin (controller) running now",
                Family::default(),
            ),
        }
    }
}

impl Workqueue {
    /// Registers the workqueue families in `r`.
    pub(super) fn register(r: &mut Registry) -> Self {
        Self {
            retries: registered(
                r,
                "workqueue_retries",
                "Objects requeued with backoff after a failure, per plugin (name)",
                Family::default(),
            ),
            depth: registered(
                r,
                "workqueue_depth",
                "Objects waiting for a reconcile, per plugin (name)",
                Family::default(),
            ),
            adds: registered(
                r,
                "workqueue_adds",
                "Objects queued by a watch event (not already waiting), per plugin (name)",
                Family::default(),
            ),
            queue_duration: registered(
                r,
                "workqueue_queue_duration_seconds",
                "Time an object waited between its watch event and its reconcile, per plugin (name)",
                Family::new_with_constructor(duration_histogram),
            ),
            event_to_reconcile: registered(
                r,
                "wasmop_event_to_reconcile_seconds",
                "Time from a watch event received to the plugin called for it (permits held), per plugin (name)",
                Family::new_with_constructor(latency_histogram),
            ),
            work_duration: registered(
                r,
                "workqueue_work_duration_seconds",
                "Time an object was being worked on, per plugin (name)",
                Family::new_with_constructor(duration_histogram),
            ),
        }
    }
}

/// Holds one `controller_runtime_active_workers` slot until dropped.
pub(crate) struct ActiveWorker(Gauge);

impl Drop for ActiveWorker {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The `controller` label set of `plugin`.
pub(super) fn controller(plugin: &str) -> ControllerLabels {
    ControllerLabels {
        controller: plugin.to_owned(),
    }
}

/// The `name` label set of `plugin` (the workqueue's and the Lease's label).
fn name(plugin: &str) -> NameLabels {
    NameLabels {
        name: plugin.to_owned(),
    }
}

impl Metrics {
    /// Counts one reconcile under controller-runtime's `result` and records its time.
    pub(super) fn result(&self, plugin: &str, result: &str, elapsed: Duration) {
        let families = &self.reconciles;
        families
            .reconciles
            .get_or_create(&ResultLabels {
                controller: plugin.to_owned(),
                result: result.to_owned(),
            })
            .inc();
        if result == "error" {
            families
                .reconcile_errors
                .get_or_create(&controller(plugin))
                .inc();
        }
        let seconds = elapsed.as_secs_f64();
        families
            .reconcile_time
            .get_or_create(&controller(plugin))
            .observe(seconds);
        self.queue
            .work_duration
            .get_or_create(&name(plugin))
            .observe(seconds);
    }

    /// Counts a reconcile that failed in the host before or after the plugin call.
    pub(crate) fn host_failed(&self, plugin: &str, elapsed: Duration) {
        self.result(plugin, "error", elapsed);
    }

    /// Counts one object requeued with backoff.
    pub(crate) fn retried(&self, plugin: &str) {
        self.queue.retries.get_or_create(&name(plugin)).inc();
    }

    /// Records how many objects of `plugin` wait for a reconcile.
    pub(crate) fn queue_depth(&self, plugin: &str, n: usize) {
        let name = name(plugin);
        self.queue
            .depth
            .get_or_create(&name)
            .set(i64::try_from(n).unwrap_or(i64::MAX));
        // Created with the depth, so a plugin that never queued reports its count as 0.
        drop(self.queue.queue_duration.get_or_create(&name));
        drop(self.queue.adds.get_or_create(&name));
    }

    /// Counts one object queued by a watch event.
    pub(crate) fn queue_added(&self, plugin: &str) {
        self.queue.adds.get_or_create(&name(plugin)).inc();
    }

    /// Records how long an object waited before its reconcile started.
    pub(crate) fn queued_for(&self, plugin: &str, waited: Duration) {
        self.queue
            .queue_duration
            .get_or_create(&name(plugin))
            .observe(waited.as_secs_f64());
    }

    /// Records the time from a watch event received to `plugin` called for it.
    pub(crate) fn event_to_reconcile(&self, plugin: &str, elapsed: Duration) {
        self.queue
            .event_to_reconcile
            .get_or_create(&name(plugin))
            .observe(elapsed.as_secs_f64());
    }

    /// Records how many reconciles of `plugin` may run at once.
    pub(crate) fn max_concurrent(&self, plugin: &str, n: u16) {
        self.reconciles
            .max_concurrent
            .get_or_create(&controller(plugin))
            .set(i64::from(n));
    }

    /// Counts a running reconcile until the returned guard is dropped.
    pub(crate) fn active(&self, plugin: &str) -> ActiveWorker {
        let gauge = self
            .reconciles
            .active_workers
            .get_or_create(&controller(plugin))
            .clone();
        gauge.inc();
        ActiveWorker(gauge)
    }
}
