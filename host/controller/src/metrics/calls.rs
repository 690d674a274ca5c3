//! What each plugin call did, recorded after it: wasmop's outcome and abort cause, what the
//! call used (memory high-water mark, fuel, demotion, denied host calls), its host calls, the
//! requeues raised to the plugin's floor and the reconciles its rate limit held back, and the
//! fate of the Events it wrote.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::labels::{CallLabels, CauseLabels, DeniedLabels, OutcomeLabels, PluginLabels};
use super::workloop::controller;
use super::{Metrics, registered};
use wasmop_runtime::{Action, Budget, LimitKind, Outcome, PluginErrorKind, Usage};

/// The per-call families (labelled `plugin`).
#[derive(Clone)]
pub(super) struct Calls {
    outcomes: Family<OutcomeLabels, Counter>,
    failures: Family<CauseLabels, Counter>,
    denied: Family<DeniedLabels, Counter>,
    host_calls: Family<CallLabels, Counter>,
    memory_peak: Family<PluginLabels, Gauge>,
    fuel: Family<PluginLabels, Counter>,
    demoted: Family<PluginLabels, Counter>,
    requeues_raised: Family<PluginLabels, Counter>,
    throttled: Family<PluginLabels, Counter>,
    echoes_skipped: Family<PluginLabels, Counter>,
    events_dropped: Family<PluginLabels, Counter>,
    events_aggregated: Family<PluginLabels, Counter>,
    events_failed: Family<PluginLabels, Counter>,
}

impl Calls {
    /// Registers the per-call families in `r`.
    pub(super) fn register(r: &mut Registry) -> Self {
        Self {
            outcomes: registered(
                r,
                "wasmop_reconcile_outcomes",
                "Plugin calls per plugin and outcome (done, requeue, retryable-error, \
                 permanent-error, trap, timeout, out-of-memory, denied, limit-exceeded)",
                Family::default(),
            ),
            failures: registered(
                r,
                "wasmop_plugin_aborts",
                "Plugin calls stopped by the host, per plugin and cause (trap, deadline, fuel, \
                 out-of-memory, host-bytes, host-calls)",
                Family::default(),
            ),
            denied: registered(
                r,
                "wasmop_host_calls_denied",
                "Host calls refused by the plugin's grants, per plugin and verb",
                Family::default(),
            ),
            host_calls: registered(
                r,
                "wasmop_host_calls",
                "Host calls that reached the cluster, per plugin, verb and outcome (ok or the \
                 kube-error case)",
                Family::default(),
            ),
            memory_peak: registered(
                r,
                "wasmop_plugin_memory_peak_bytes",
                "The largest linear memory any call of the plugin reached (its high-water mark)",
                Family::default(),
            ),
            fuel: registered(
                r,
                "wasmop_plugin_fuel_consumed",
                "Fuel (roughly, wasm instructions) the plugin's calls consumed, when it has a fuel budget",
                Family::default(),
            ),
            demoted: registered(
                r,
                "wasmop_plugin_calls_demoted",
                "Calls of the plugin that computed so long that they were moved to the low-priority lane",
                Family::default(),
            ),
            requeues_raised: registered(
                r,
                "wasmop_requeues_raised",
                "Requeues the plugin asked for sooner than its minRequeueAfter, which were raised to it",
                Family::default(),
            ),
            throttled: registered(
                r,
                "wasmop_reconciles_throttled",
                "Times an object of the plugin was ready to reconcile but had used up its \
                 objectRateLimit, and waited for its next token",
                Family::default(),
            ),
            echoes_skipped: registered(
                r,
                "wasmop_own_write_echoes_skipped",
                "Changes of an owned or watched object that were the plugin's own write coming \
                 back through the watch, which did not reconcile again the object whose \
                 reconcile made the write",
                Family::default(),
            ),
            events_dropped: registered(
                r,
                "wasmop_events_dropped",
                "Kubernetes Events not written because of the per-object rate limit",
                Family::default(),
            ),
            events_aggregated: registered(
                r,
                "wasmop_events_aggregated",
                "Kubernetes Events written as the combined Event of their object and reason, \
                 because it already had 10 distinct notes in the last 10 minutes",
                Family::default(),
            ),
            events_failed: registered(
                r,
                "wasmop_events_failed",
                "Kubernetes Events the API server did not accept (written in the background, so \
                 the plugin's call had already returned)",
                Family::default(),
            ),
        }
    }
}

/// The `plugin` label set of `plugin`.
fn plugin_labels(plugin: &str) -> PluginLabels {
    PluginLabels {
        plugin: plugin.to_owned(),
    }
}

/// The abort cause of an outcome the host stopped (`None` for the plugin's own endings).
fn abort_cause(outcome: &Outcome) -> Option<&'static str> {
    match outcome {
        Outcome::Trap { .. } => Some("trap"),
        Outcome::Timeout(Budget::WallClock(_)) => Some("deadline"),
        Outcome::Timeout(Budget::Fuel(_)) => Some("fuel"),
        Outcome::OutOfMemory { .. } => Some("out-of-memory"),
        Outcome::LimitExceeded(LimitKind::HostBytes(_)) => Some("host-bytes"),
        Outcome::LimitExceeded(LimitKind::HostCalls(_)) => Some("host-calls"),
        _ => None,
    }
}

impl Metrics {
    /// Counts one finished plugin call and its time, under controller-runtime's result and
    /// wasmop's outcome (and abort cause, when the host stopped the call).
    pub(crate) fn reconciled(&self, plugin: &str, outcome: &Outcome, elapsed: Duration) {
        let result = match outcome {
            Outcome::Action(Action::Done) => "success",
            Outcome::Action(Action::RequeueAfter(_)) => "requeue_after",
            _ => "error",
        };
        self.result(plugin, result, elapsed);
        self.calls
            .outcomes
            .get_or_create(&OutcomeLabels {
                plugin: plugin.to_owned(),
                outcome: outcome.label().to_owned(),
            })
            .inc();
        // controller-runtime counts traps as panics and permanent errors as terminal.
        let also = match outcome {
            Outcome::Trap { .. } => Some(&self.reconciles.panics),
            Outcome::PluginError {
                kind: PluginErrorKind::Permanent,
                ..
            } => Some(&self.reconciles.terminal_errors),
            _ => None,
        };
        if let Some(family) = also {
            family.get_or_create(&controller(plugin)).inc();
        }
        if let Some(cause) = abort_cause(outcome) {
            self.calls
                .failures
                .get_or_create(&CauseLabels {
                    plugin: plugin.to_owned(),
                    cause: cause.to_owned(),
                })
                .inc();
        }
    }

    /// Counts `n` denied host calls of `verb`.
    pub(crate) fn denied(&self, plugin: &str, verb: &str, n: u32) {
        self.calls
            .denied
            .get_or_create(&DeniedLabels {
                plugin: plugin.to_owned(),
                verb: verb.to_owned(),
            })
            .inc_by(u64::from(n));
    }

    /// Counts one host call that reached the cluster; `outcome` is `ok` or a `kube-error` case.
    pub(crate) fn host_call(&self, plugin: &str, verb: &str, outcome: &str) {
        self.calls
            .host_calls
            .get_or_create(&CallLabels {
                plugin: plugin.to_owned(),
                verb: verb.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// Records what one call used: raises the plugin's memory high-water mark, adds its fuel,
    /// counts it if it was demoted to the low-priority lane.
    pub(crate) fn usage(&self, plugin: &str, usage: &Usage) {
        let labels = plugin_labels(plugin);
        let peak = i64::try_from(usage.memory_peak).unwrap_or(i64::MAX);
        self.calls
            .memory_peak
            .get_or_create(&labels)
            .inner()
            .fetch_max(peak, std::sync::atomic::Ordering::Relaxed);
        if let Some(fuel) = usage.fuel {
            self.calls.fuel.get_or_create(&labels).inc_by(fuel);
        }
        if usage.demoted {
            self.calls.demoted.get_or_create(&labels).inc();
        }
        // Every denied call, not just the one the outcome names.
        for (verb, n) in usage.denied.by_verb() {
            self.denied(plugin, verb, n);
        }
    }

    /// Counts one requeue raised to the plugin's floor.
    pub(crate) fn requeue_raised(&self, plugin: &str) {
        let labels = plugin_labels(plugin);
        self.calls.requeues_raised.get_or_create(&labels).inc();
    }

    /// Counts one object of the plugin held back by its per-object rate limit.
    pub(crate) fn throttled(&self, plugin: &str) {
        self.calls
            .throttled
            .get_or_create(&plugin_labels(plugin))
            .inc();
    }

    /// Counts `n` echoes of the plugin's own writes that triggered no reconcile.
    pub(crate) fn echoes_skipped(&self, plugin: &str, n: usize) {
        self.calls
            .echoes_skipped
            .get_or_create(&plugin_labels(plugin))
            .inc_by(u64::try_from(n).unwrap_or(u64::MAX));
    }

    /// Counts one Event dropped by the rate limit.
    pub(crate) fn event_dropped(&self, plugin: &str) {
        let labels = plugin_labels(plugin);
        self.calls.events_dropped.get_or_create(&labels).inc();
    }

    /// Counts one Event aggregated into its object's combined Event (past the note bound).
    pub(crate) fn event_aggregated(&self, plugin: &str) {
        let labels = plugin_labels(plugin);
        self.calls.events_aggregated.get_or_create(&labels).inc();
    }

    /// Counts one Event whose write failed.
    pub(crate) fn event_failed(&self, plugin: &str) {
        let labels = plugin_labels(plugin);
        self.calls.events_failed.get_or_create(&labels).inc();
    }
}
