//! The host's Prometheus metrics (the binary's `http` module serves them at `/metrics`).
//!
//! Names follow controller-runtime where the meaning is the same, so existing dashboards and
//! alerts work, with the plugin name as the `controller` (`name` for the workqueue family):
//! `controller_runtime_reconcile_total{controller,result}` (result `success`, `error`,
//! `requeue_after`), `controller_runtime_reconcile_errors_total`,
//! `controller_runtime_terminal_reconcile_errors_total` (permanent plugin errors),
//! `controller_runtime_reconcile_panics_total` (plugin traps),
//! `controller_runtime_reconcile_time_seconds`, `controller_runtime_max_concurrent_reconciles`,
//! `controller_runtime_active_workers`, `workqueue_depth`, `workqueue_adds_total`,
//! `workqueue_queue_duration_seconds` (see [`crate::controller::queue`] for how they are
//! taken), `wasmop_event_to_reconcile_seconds` (watch event received → plugin called, permits
//! held; finer buckets than the workqueue's), `workqueue_retries_total`, `workqueue_work_duration_seconds` and
//! `leader_election_master_status{name}` (the Lease).
//! wasmop's own are prefixed `wasmop_` (host calls by verb and outcome are counted by
//! [`crate::controller::counted`]; `wasmop_plugin_memory_peak_bytes` and
//! `wasmop_plugin_fuel_consumed_total`, `wasmop_plugin_calls_demoted_total` and
//! `wasmop_host_calls_denied_total` come from each call's [`Usage`];
//! `wasmop_requeues_raised_total` and `wasmop_reconciles_throttled_total` from the
//! controller's floor and per-object rate limit; `wasmop_watch_objects_skipped_total{kind}`
//! counts the objects a shared watch could not decode, see [`crate::watches`]). Labels are
//! bounded: plugin names, verbs, outcome and cause labels, states, versions and digests of
//! loaded plugins, watched kinds — never object names.

mod labels;

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use self::labels::{
    CallLabels, CauseLabels, ControllerLabels, DeniedLabels, InfoLabels, KindLabels, LoadLabels,
    NameLabels, OutcomeLabels, PluginLabels, ReloadLabels, ResultLabels, Said, StateLabels,
};
use wasmop_runtime::{Action, Budget, LimitKind, Outcome, PluginErrorKind, Usage};

/// A plugin's lifecycle state, as reported by `wasmop_plugin_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginState {
    /// One of its kinds is not served by the API server yet (its CRD is missing).
    WaitingForKinds,
    /// Its controller runs.
    Running,
}

impl PluginState {
    const ALL: [PluginState; 2] = [PluginState::WaitingForKinds, PluginState::Running];

    fn label(self) -> &'static str {
        match self {
            PluginState::WaitingForKinds => "waiting-for-kinds",
            PluginState::Running => "running",
        }
    }
}

/// Reconcile durations: 5 ms doubling to about 80 s, covering a cache-only reconcile up to
/// the longest deadline a plugin is likely to be given.
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

/// Load (compile) times: 1 ms doubling to about 65 s; a cached artefact loads in
/// milliseconds, a cold compile of a large component in tens of seconds.
/// 100 µs to 13 s: event-to-reconcile latencies are sub-millisecond when the host is idle.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 18))
}

fn load_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Every metric the host records. Cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    reconciles: Family<ResultLabels, Counter>,
    reconcile_errors: Family<ControllerLabels, Counter>,
    terminal_errors: Family<ControllerLabels, Counter>,
    panics: Family<ControllerLabels, Counter>,
    reconcile_time: Histograms<ControllerLabels>,
    max_concurrent: Family<ControllerLabels, Gauge>,
    active_workers: Family<ControllerLabels, Gauge>,
    retries: Family<NameLabels, Counter>,
    depth: Family<NameLabels, Gauge>,
    adds: Family<NameLabels, Counter>,
    queue_duration: Histograms<NameLabels>,
    event_to_reconcile: Histograms<NameLabels>,
    work_duration: Histograms<NameLabels>,
    leader: Family<NameLabels, Gauge>,
    outcomes: Family<OutcomeLabels, Counter>,
    failures: Family<CauseLabels, Counter>,
    denied: Family<DeniedLabels, Counter>,
    host_calls: Family<CallLabels, Counter>,
    events_dropped: Family<PluginLabels, Counter>,
    events_failed: Family<PluginLabels, Counter>,
    plugin_state: Family<StateLabels, Gauge>,
    plugin_info: Family<InfoLabels, Gauge>,
    load_time: Histograms<LoadLabels>,
    memory_peak: Family<PluginLabels, Gauge>,
    fuel: Family<PluginLabels, Counter>,
    demoted: Family<PluginLabels, Counter>,
    requeues_raised: Family<PluginLabels, Counter>,
    throttled: Family<PluginLabels, Counter>,
    reloads: Family<ReloadLabels, Counter>,
    watch_skipped: Family<KindLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// Holds one `controller_runtime_active_workers` slot until dropped.
pub struct ActiveWorker(Gauge);

impl Drop for ActiveWorker {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Metrics {
    /// Registers every metric in a fresh registry.
    pub fn new() -> Self {
        let mut r = Registry::default();
        let reconciles = Family::default();
        r.register(
            "controller_runtime_reconcile",
            "Reconciles per plugin (controller) and result: success, error, requeue_after",
            Family::clone(&reconciles),
        );
        let reconcile_errors = Family::default();
        r.register(
            "controller_runtime_reconcile_errors",
            "Reconciles that did not succeed, per plugin (controller)",
            Family::clone(&reconcile_errors),
        );
        let terminal_errors = Family::default();
        r.register(
            "controller_runtime_terminal_reconcile_errors",
            "Reconciles that ended in a permanent plugin error (not retried)",
            Family::clone(&terminal_errors),
        );
        let panics = Family::default();
        r.register(
            "controller_runtime_reconcile_panics",
            "Reconciles in which the plugin trapped (a panic, unreachable, stack overflow)",
            Family::clone(&panics),
        );
        let reconcile_time: Histograms<ControllerLabels> =
            Family::new_with_constructor(duration_histogram);
        r.register(
            "controller_runtime_reconcile_time_seconds",
            "Time per reconcile, per plugin (controller)",
            reconcile_time.clone(),
        );
        let max_concurrent = Family::default();
        r.register(
            "controller_runtime_max_concurrent_reconciles",
            "Reconciles of one plugin (controller) that may run at once",
            Family::clone(&max_concurrent),
        );
        let active_workers = Family::default();
        r.register(
            "controller_runtime_active_workers",
            "Reconciles of one plugin (controller) running now",
            Family::clone(&active_workers),
        );
        let retries = Family::default();
        r.register(
            "workqueue_retries",
            "Objects requeued with backoff after a failure, per plugin (name)",
            Family::clone(&retries),
        );
        let depth = Family::default();
        r.register(
            "workqueue_depth",
            "Objects waiting for a reconcile, per plugin (name)",
            Family::clone(&depth),
        );
        let adds = Family::default();
        r.register(
            "workqueue_adds",
            "Objects queued by a watch event (not already waiting), per plugin (name)",
            Family::clone(&adds),
        );
        let queue_duration: Histograms<NameLabels> =
            Family::new_with_constructor(duration_histogram);
        r.register(
            "workqueue_queue_duration_seconds",
            "Time an object waited between its watch event and its reconcile, per plugin (name)",
            queue_duration.clone(),
        );
        let event_to_reconcile: Histograms<NameLabels> =
            Family::new_with_constructor(latency_histogram);
        r.register(
            "wasmop_event_to_reconcile_seconds",
            "Time from a watch event received to the plugin called for it (permits held), per plugin (name)",
            event_to_reconcile.clone(),
        );
        let work_duration: Histograms<NameLabels> =
            Family::new_with_constructor(duration_histogram);
        r.register(
            "workqueue_work_duration_seconds",
            "Time an object was being worked on, per plugin (name)",
            work_duration.clone(),
        );
        let leader = Family::default();
        r.register(
            "leader_election_master_status",
            "1 while this host holds the leader Lease (name), else 0",
            Family::clone(&leader),
        );
        let outcomes = Family::default();
        r.register(
            "wasmop_reconcile_outcomes",
            "Plugin calls per plugin and outcome (done, requeue, retryable-error, \
             permanent-error, trap, timeout, out-of-memory, denied, limit-exceeded)",
            Family::clone(&outcomes),
        );
        let failures = Family::default();
        r.register(
            "wasmop_plugin_aborts",
            "Plugin calls stopped by the host, per plugin and cause (trap, deadline, fuel, \
             out-of-memory, host-bytes, host-calls)",
            Family::clone(&failures),
        );
        let denied = Family::default();
        r.register(
            "wasmop_host_calls_denied",
            "Host calls refused by the plugin's grants, per plugin and verb",
            Family::clone(&denied),
        );
        let host_calls = Family::default();
        r.register(
            "wasmop_host_calls",
            "Host calls that reached the cluster, per plugin, verb and outcome (ok or the \
             kube-error case)",
            Family::clone(&host_calls),
        );
        let events_dropped = Family::default();
        r.register(
            "wasmop_events_dropped",
            "Kubernetes Events not written because of the per-object rate limit",
            Family::clone(&events_dropped),
        );
        let events_failed = Family::default();
        r.register(
            "wasmop_events_failed",
            "Kubernetes Events the API server did not accept (written in the background, so \
             the plugin's call had already returned)",
            Family::clone(&events_failed),
        );
        let plugin_state = Family::default();
        r.register(
            "wasmop_plugin_state",
            "1 for the state each plugin is in (waiting-for-kinds, running)",
            Family::clone(&plugin_state),
        );
        let plugin_info = Family::default();
        r.register(
            "wasmop_plugin_info",
            "1 for each loaded plugin, with its version and component digest",
            Family::clone(&plugin_info),
        );
        let load_time: Histograms<LoadLabels> = Family::new_with_constructor(load_histogram);
        r.register(
            "wasmop_plugin_load_seconds",
            "Time to compile a plugin (or load its cached artefact)",
            load_time.clone(),
        );
        let memory_peak = Family::<PluginLabels, Gauge>::default();
        r.register(
            "wasmop_plugin_memory_peak_bytes",
            "The largest linear memory any call of the plugin reached (its high-water mark)",
            memory_peak.clone(),
        );
        let fuel = Family::<PluginLabels, Counter>::default();
        r.register(
            "wasmop_plugin_fuel_consumed",
            "Fuel (roughly, wasm instructions) the plugin's calls consumed, when it has a fuel budget",
            fuel.clone(),
        );
        let demoted = Family::<PluginLabels, Counter>::default();
        r.register(
            "wasmop_plugin_calls_demoted",
            "Calls of the plugin that computed so long that they were moved to the low-priority lane",
            demoted.clone(),
        );
        let requeues_raised = Family::<PluginLabels, Counter>::default();
        r.register(
            "wasmop_requeues_raised",
            "Requeues the plugin asked for sooner than its minRequeueAfter, which were raised to it",
            requeues_raised.clone(),
        );
        let throttled = Family::<PluginLabels, Counter>::default();
        r.register(
            "wasmop_reconciles_throttled",
            "Times an object of the plugin was ready to reconcile but had used up its \
             objectRateLimit, and waited for its next token",
            throttled.clone(),
        );
        let reloads = Family::<ReloadLabels, Counter>::default();
        r.register(
            "wasmop_plugin_reloads",
            "Plugin versions offered by the sources, per plugin and result (loaded, unchanged, \
             rejected, removed); `unknown` when a rejected component never said its name",
            reloads.clone(),
        );
        let watch_skipped = Family::<KindLabels, Counter>::default();
        r.register(
            "wasmop_watch_objects_skipped",
            "Objects (list items and watch events) a shared watch could not decode and skipped, \
             per watched kind",
            watch_skipped.clone(),
        );
        Self {
            registry: Arc::new(r),
            reconciles,
            reconcile_errors,
            terminal_errors,
            panics,
            reconcile_time,
            max_concurrent,
            active_workers,
            retries,
            depth,
            adds,
            queue_duration,
            event_to_reconcile,
            work_duration,
            leader,
            outcomes,
            failures,
            denied,
            host_calls,
            events_dropped,
            events_failed,
            plugin_state,
            plugin_info,
            load_time,
            memory_peak,
            fuel,
            demoted,
            requeues_raised,
            throttled,
            reloads,
            watch_skipped,
        }
    }

    fn controller(plugin: &str) -> ControllerLabels {
        ControllerLabels {
            controller: plugin.to_owned(),
        }
    }

    fn result(&self, plugin: &str, result: &str, elapsed: Duration) {
        self.reconciles
            .get_or_create(&ResultLabels {
                controller: plugin.to_owned(),
                result: result.to_owned(),
            })
            .inc();
        if result == "error" {
            self.reconcile_errors
                .get_or_create(&Self::controller(plugin))
                .inc();
        }
        let seconds = elapsed.as_secs_f64();
        self.reconcile_time
            .get_or_create(&Self::controller(plugin))
            .observe(seconds);
        self.work_duration
            .get_or_create(&NameLabels {
                name: plugin.to_owned(),
            })
            .observe(seconds);
    }

    /// Counts one finished plugin call and its time, under controller-runtime's result and
    /// wasmop's outcome (and abort cause, when the host stopped the call).
    pub fn reconciled(&self, plugin: &str, outcome: &Outcome, elapsed: Duration) {
        let result = match outcome {
            Outcome::Action(Action::Done) => "success",
            Outcome::Action(Action::RequeueAfter(_)) => "requeue_after",
            _ => "error",
        };
        self.result(plugin, result, elapsed);
        self.outcomes
            .get_or_create(&OutcomeLabels {
                plugin: plugin.to_owned(),
                outcome: outcome.label().to_owned(),
            })
            .inc();
        let cause = match outcome {
            Outcome::Trap { .. } => {
                self.panics.get_or_create(&Self::controller(plugin)).inc();
                Some("trap")
            }
            Outcome::PluginError {
                kind: PluginErrorKind::Permanent,
                ..
            } => {
                self.terminal_errors
                    .get_or_create(&Self::controller(plugin))
                    .inc();
                None
            }
            Outcome::Timeout(Budget::WallClock(_)) => Some("deadline"),
            Outcome::Timeout(Budget::Fuel(_)) => Some("fuel"),
            Outcome::OutOfMemory { .. } => Some("out-of-memory"),
            Outcome::LimitExceeded(LimitKind::HostBytes(_)) => Some("host-bytes"),
            Outcome::LimitExceeded(LimitKind::HostCalls(_)) => Some("host-calls"),
            _ => None,
        };
        if let Some(cause) = cause {
            self.failures
                .get_or_create(&CauseLabels {
                    plugin: plugin.to_owned(),
                    cause: cause.to_owned(),
                })
                .inc();
        }
    }

    /// Counts a reconcile that failed in the host before or after the plugin call.
    pub fn host_failed(&self, plugin: &str, elapsed: Duration) {
        self.result(plugin, "error", elapsed);
    }

    /// Counts one object requeued with backoff.
    pub fn retried(&self, plugin: &str) {
        self.retries
            .get_or_create(&NameLabels {
                name: plugin.to_owned(),
            })
            .inc();
    }

    /// Records how many objects of `plugin` wait for a reconcile.
    pub fn queue_depth(&self, plugin: &str, n: usize) {
        self.depth
            .get_or_create(&NameLabels {
                name: plugin.to_owned(),
            })
            .set(i64::try_from(n).unwrap_or(i64::MAX));
        // Created with the depth, so a plugin that never queued reports its count as 0.
        let name = NameLabels {
            name: plugin.to_owned(),
        };
        drop(self.queue_duration.get_or_create(&name));
        drop(self.adds.get_or_create(&name));
    }

    /// Counts one object queued by a watch event.
    pub fn queue_added(&self, plugin: &str) {
        self.adds
            .get_or_create(&NameLabels {
                name: plugin.to_owned(),
            })
            .inc();
    }

    /// Records how long an object waited before its reconcile started.
    pub fn queued_for(&self, plugin: &str, waited: Duration) {
        self.queue_duration
            .get_or_create(&NameLabels {
                name: plugin.to_owned(),
            })
            .observe(waited.as_secs_f64());
    }

    /// Records the time from a watch event received to `plugin` called for it.
    pub fn event_to_reconcile(&self, plugin: &str, elapsed: Duration) {
        self.event_to_reconcile
            .get_or_create(&NameLabels {
                name: plugin.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Records how many reconciles of `plugin` may run at once.
    pub fn max_concurrent(&self, plugin: &str, n: u16) {
        self.max_concurrent
            .get_or_create(&Self::controller(plugin))
            .set(i64::from(n));
    }

    /// Counts a running reconcile until the returned guard is dropped.
    pub fn active(&self, plugin: &str) -> ActiveWorker {
        let gauge = self
            .active_workers
            .get_or_create(&Self::controller(plugin))
            .clone();
        gauge.inc();
        ActiveWorker(gauge)
    }

    /// Records whether this host holds the leader Lease `lease`.
    pub fn leader(&self, lease: &str, leading: bool) {
        self.leader
            .get_or_create(&NameLabels {
                name: lease.to_owned(),
            })
            .set(i64::from(leading));
    }

    /// Records a loaded plugin: its version and digest, and how long loading took.
    pub fn plugin_loaded(
        &self,
        plugin: &str,
        version: &str,
        digest: &str,
        load_time: Duration,
        from_cache: bool,
    ) {
        self.plugin_info
            .get_or_create(&InfoLabels {
                plugin: plugin.to_owned(),
                version: Said(version.to_owned()),
                digest: digest.to_owned(),
            })
            .set(1);
        self.load_time
            .get_or_create(&LoadLabels {
                plugin: plugin.to_owned(),
                from_cache: from_cache.to_string(),
            })
            .observe(load_time.as_secs_f64());
    }

    /// Drops the info series of a version that no longer runs (replaced or removed).
    pub fn plugin_unloaded(&self, plugin: &str, version: &str, digest: &str) {
        self.plugin_info.remove(&InfoLabels {
            plugin: plugin.to_owned(),
            version: Said(version.to_owned()),
            digest: digest.to_owned(),
        });
    }

    /// Counts `n` denied host calls of `verb`.
    pub fn denied(&self, plugin: &str, verb: &str, n: u32) {
        self.denied
            .get_or_create(&DeniedLabels {
                plugin: plugin.to_owned(),
                verb: verb.to_owned(),
            })
            .inc_by(u64::from(n));
    }

    /// Counts one host call that reached the cluster; `outcome` is `ok` or a `kube-error` case.
    pub fn host_call(&self, plugin: &str, verb: &str, outcome: &str) {
        self.host_calls
            .get_or_create(&CallLabels {
                plugin: plugin.to_owned(),
                verb: verb.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// Counts one object a shared watch of `kind` (`apiVersion/Kind`, from discovery) skipped
    /// because it does not decode.
    pub fn watch_object_skipped(&self, kind: &str) {
        self.watch_skipped
            .get_or_create(&KindLabels {
                kind: kind.to_owned(),
            })
            .inc();
    }

    /// Counts one Event dropped by the rate limit.
    pub fn event_dropped(&self, plugin: &str) {
        self.events_dropped
            .get_or_create(&PluginLabels {
                plugin: plugin.to_owned(),
            })
            .inc();
    }

    /// Counts one Event whose write failed.
    pub fn event_failed(&self, plugin: &str) {
        self.events_failed
            .get_or_create(&PluginLabels {
                plugin: plugin.to_owned(),
            })
            .inc();
    }

    /// Records what one call used: raises the plugin's memory high-water mark, adds its fuel,
    /// counts it if it was demoted to the low-priority lane.
    pub fn usage(&self, plugin: &str, usage: &Usage) {
        let labels = PluginLabels {
            plugin: plugin.to_owned(),
        };
        let peak = i64::try_from(usage.memory_peak).unwrap_or(i64::MAX);
        self.memory_peak
            .get_or_create(&labels)
            .inner()
            .fetch_max(peak, std::sync::atomic::Ordering::Relaxed);
        if let Some(fuel) = usage.fuel {
            self.fuel.get_or_create(&labels).inc_by(fuel);
        }
        if usage.demoted {
            self.demoted.get_or_create(&labels).inc();
        }
        // Every denied call, not just the one the outcome names.
        for (verb, n) in usage.denied.by_verb() {
            self.denied(plugin, verb, n);
        }
    }

    /// Counts one requeue raised to the plugin's floor.
    pub fn requeue_raised(&self, plugin: &str) {
        self.requeues_raised
            .get_or_create(&PluginLabels {
                plugin: plugin.to_owned(),
            })
            .inc();
    }

    /// Counts one object of the plugin held back by its per-object rate limit.
    pub fn throttled(&self, plugin: &str) {
        self.throttled
            .get_or_create(&PluginLabels {
                plugin: plugin.to_owned(),
            })
            .inc();
    }

    /// Records the state a plugin is in (1 for it, 0 for the others).
    pub fn plugin_state(&self, plugin: &str, state: PluginState) {
        for s in PluginState::ALL {
            self.plugin_state
                .get_or_create(&StateLabels {
                    plugin: plugin.to_owned(),
                    state: s.label().to_owned(),
                })
                .set(i64::from(s == state));
        }
    }

    /// Counts one reload of a plugin; `result` is one of the registry's bounded result labels.
    pub fn plugin_reload(&self, plugin: &str, result: &str) {
        self.reloads
            .get_or_create(&ReloadLabels {
                plugin: plugin.to_owned(),
                result: result.to_owned(),
            })
            .inc();
    }

    /// Forgets the state of a plugin that no longer runs (removed from its source).
    pub fn plugin_gone(&self, plugin: &str) {
        for s in PluginState::ALL {
            self.plugin_state.remove(&StateLabels {
                plugin: plugin.to_owned(),
                state: s.label().to_owned(),
            });
        }
    }

    /// The metrics in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denied_calls_are_counted_per_plugin_and_verb() {
        let m = Metrics::new();
        m.denied("database-config", "get", 1);
        m.denied("database-config", "get", 1);
        let text = m.render();
        assert!(
            text.contains(
                r#"wasmop_host_calls_denied_total{plugin="database-config",verb="get"} 2"#
            ),
            "{text}"
        );
    }

    #[test]
    fn every_denied_call_of_a_call_is_counted_not_only_the_first() {
        let m = Metrics::new();
        let mut denied = wasmop_runtime::Denials::default();
        for verb in ["get", "get", "get", "emit-event", "delete"] {
            denied.add(verb);
        }
        m.usage(
            "flood",
            &Usage {
                denied,
                ..Usage::default()
            },
        );
        let text = m.render();
        for (verb, n) in [("get", 3), ("emit-event", 1), ("delete", 1)] {
            let series =
                format!(r#"wasmop_host_calls_denied_total{{plugin="flood",verb="{verb}"}} {n}"#);
            assert!(text.contains(&series), "{series} in {text}");
        }
    }

    #[test]
    fn memory_high_water_mark_only_rises_and_fuel_adds_up() {
        let m = Metrics::new();
        let call = |memory_peak, fuel| Usage {
            memory_peak,
            fuel,
            ..Usage::default()
        };
        m.usage("p", &call(2 << 20, Some(1_000)));
        m.usage("p", &call(1 << 20, Some(500)));
        m.usage("p", &call(3 << 20, None));
        let text = m.render();
        assert!(
            text.contains(r#"wasmop_plugin_memory_peak_bytes{plugin="p"} 3145728"#),
            "{text}"
        );
        assert!(
            text.contains(r#"wasmop_plugin_fuel_consumed_total{plugin="p"} 1500"#),
            "{text}"
        );
    }

    #[test]
    fn demoted_calls_are_counted_per_plugin() {
        let m = Metrics::new();
        let call = |demoted| Usage {
            demoted,
            ..Usage::default()
        };
        m.usage("spinner", &call(true));
        m.usage("spinner", &call(true));
        m.usage("spinner", &call(false));
        m.usage("healthy", &call(false));
        let text = m.render();
        assert!(
            text.contains(r#"wasmop_plugin_calls_demoted_total{plugin="spinner"} 2"#),
            "{text}"
        );
        assert!(
            !text.contains(r#"wasmop_plugin_calls_demoted_total{plugin="healthy"}"#),
            "{text}"
        );
    }

    #[test]
    fn plugin_state_is_one_hot() {
        let m = Metrics::new();
        m.plugin_state("p", PluginState::WaitingForKinds);
        m.plugin_state("p", PluginState::Running);
        let text = m.render();
        assert!(
            text.contains(r#"wasmop_plugin_state{plugin="p",state="running"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"wasmop_plugin_state{plugin="p",state="waiting-for-kinds"} 0"#));
    }

    #[test]
    fn reconciles_use_controller_runtime_results_and_keep_wasmop_outcomes() {
        let m = Metrics::new();
        let ms = Duration::from_millis(20);
        m.reconciled("p", &Outcome::Action(Action::Done), ms);
        m.reconciled("p", &Outcome::Action(Action::RequeueAfter(ms)), ms);
        m.reconciled(
            "p",
            &Outcome::Trap {
                message: "boom".into(),
                backtrace: vec![],
            },
            ms,
        );
        m.reconciled("p", &Outcome::Timeout(Budget::Fuel(10)), ms);
        m.reconciled(
            "p",
            &Outcome::PluginError {
                kind: PluginErrorKind::Permanent,
                message: "no".into(),
            },
            ms,
        );
        let text = m.render();
        for line in [
            r#"controller_runtime_reconcile_total{controller="p",result="success"} 1"#,
            r#"controller_runtime_reconcile_total{controller="p",result="requeue_after"} 1"#,
            r#"controller_runtime_reconcile_total{controller="p",result="error"} 3"#,
            r#"controller_runtime_reconcile_errors_total{controller="p"} 3"#,
            r#"controller_runtime_reconcile_panics_total{controller="p"} 1"#,
            r#"controller_runtime_terminal_reconcile_errors_total{controller="p"} 1"#,
            r#"controller_runtime_reconcile_time_seconds_count{controller="p"} 5"#,
            r#"workqueue_work_duration_seconds_count{name="p"} 5"#,
            r#"wasmop_reconcile_outcomes_total{plugin="p",outcome="trap"} 1"#,
            r#"wasmop_plugin_aborts_total{plugin="p",cause="fuel"} 1"#,
            r#"wasmop_plugin_aborts_total{plugin="p",cause="trap"} 1"#,
        ] {
            assert!(text.contains(line), "missing {line} in:\n{text}");
        }
    }

    #[test]
    fn active_workers_count_down_when_the_guard_drops() {
        let m = Metrics::new();
        m.max_concurrent("p", 4);
        let a = m.active("p");
        let b = m.active("p");
        assert!(
            m.render()
                .contains(r#"controller_runtime_active_workers{controller="p"} 2"#)
        );
        drop(a);
        drop(b);
        let text = m.render();
        assert!(
            text.contains(r#"controller_runtime_active_workers{controller="p"} 0"#),
            "{text}"
        );
        assert!(text.contains(r#"controller_runtime_max_concurrent_reconciles{controller="p"} 4"#));
    }

    #[test]
    fn leadership_retries_and_loaded_plugins_are_reported() {
        let m = Metrics::new();
        m.leader("wasmop-leader", true);
        m.retried("p");
        m.plugin_loaded("p", "1.2.0", "sha256:abc", Duration::from_millis(3), false);
        let text = m.render();
        for line in [
            r#"leader_election_master_status{name="wasmop-leader"} 1"#,
            r#"workqueue_retries_total{name="p"} 1"#,
            r#"wasmop_plugin_info{plugin="p",version="1.2.0",digest="sha256:abc"} 1"#,
            r#"wasmop_plugin_load_seconds_count{plugin="p",from_cache="false"} 1"#,
        ] {
            assert!(text.contains(line), "missing {line} in:\n{text}");
        }
        m.leader("wasmop-leader", false);
        assert!(
            m.render()
                .contains(r#"leader_election_master_status{name="wasmop-leader"} 0"#)
        );
    }

    #[test]
    fn a_forged_version_stays_one_label_value() {
        let m = Metrics::new();
        let forged = "1\"} 1\n# HELP wasmop_forged x\nwasmop_forged 1\n";
        m.plugin_loaded("p", forged, "sha256:abc", Duration::from_millis(3), false);
        let text = m.render();
        assert!(
            text.contains(
                r#"wasmop_plugin_info{plugin="p",version="1\"} 1\n# HELP wasmop_forged x\nwasmop_forged 1\n",digest="sha256:abc"} 1"#
            ),
            "{text}"
        );
        assert!(
            !text.lines().any(|l| l.starts_with("wasmop_forged")),
            "{text}"
        );
        m.plugin_unloaded("p", forged, "sha256:abc");
        assert!(!m.render().contains("wasmop_plugin_info{"));
    }
}
