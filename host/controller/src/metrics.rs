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
//! `leader_election_master_status{name}` (the Lease), and for admission webhooks
//! `controller_runtime_webhook_requests_total{webhook,code}`,
//! `controller_runtime_webhook_latency_seconds` and `controller_runtime_webhook_requests_in_flight`
//! (see [`WebhookRequest`]).
//! wasmop's own are prefixed `wasmop_` (host calls by verb and outcome are counted by
//! [`crate::controller::counted`]; `wasmop_plugin_memory_peak_bytes` and
//! `wasmop_plugin_fuel_consumed_total`, `wasmop_plugin_calls_demoted_total` and
//! `wasmop_host_calls_denied_total` come from each call's [`Usage`];
//! `wasmop_requeues_raised_total` and `wasmop_reconciles_throttled_total` from the
//! controller's floor and per-object rate limit; `wasmop_own_write_echoes_skipped_total` counts
//! a plugin's own writes coming back through its watches without reconciling again (see
//! [`crate::controller::echoes`]); `wasmop_admission_reviews_total` counts reviews
//! by plugin, review, operation and outcome; `wasmop_watch_objects_skipped_total{kind}`
//! counts the objects a shared watch could not decode, see [`crate::watches`]). Labels are
//! bounded: plugin names, verbs, outcome and cause labels, states, versions and digests of
//! loaded plugins, watched kinds — never object names.

mod calls;
mod labels;
mod state;
mod webhooks;
mod workloop;

use std::sync::Arc;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry};

pub(crate) use self::state::PluginState;
pub use self::webhooks::WebhookRequest;
pub(crate) use self::workloop::ActiveWorker;

/// Every metric the host records. Cheap to clone. The families are grouped by what records
/// them, each group in its own module with its recording methods.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    reconciles: workloop::Reconciles,
    queue: workloop::Workqueue,
    calls: calls::Calls,
    state: state::HostState,
    webhooks: webhooks::Webhooks,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric in a fresh registry.
    pub fn new() -> Self {
        let mut r = Registry::default();
        let reconciles = workloop::Reconciles::register(&mut r);
        let queue = workloop::Workqueue::register(&mut r);
        let calls = calls::Calls::register(&mut r);
        let state = state::HostState::register(&mut r);
        let webhooks = webhooks::Webhooks::register(&mut r);
        Self {
            registry: Arc::new(r),
            reconciles,
            queue,
            calls,
            state,
            webhooks,
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

/// Registers `metric` as `name` with `help` and hands back the handle the host records with
/// (a family clone shares its series with the registered one).
fn registered<M: Metric + Clone>(r: &mut Registry, name: &str, help: &str, metric: M) -> M {
    r.register(name, help, metric.clone());
    metric
}

/// Reconcile durations: 5 ms doubling to about 80 s, covering a cache-only reconcile up to
/// the longest deadline a plugin is likely to be given.
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

/// 100 µs to 13 s: event-to-reconcile latencies are sub-millisecond when the host is idle.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 18))
}

/// Load (compile) times: 1 ms doubling to about 65 s; a cached artefact loads in
/// milliseconds, a cold compile of a large component in tens of seconds.
fn load_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// A family of histograms, each made by a bucket constructor above.
type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use wasmop_runtime::{Action, Budget, Outcome, PluginErrorKind, Usage};

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
