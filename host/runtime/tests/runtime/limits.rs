//! The limits of a call: fuel, memory (and its high-water mark), the wall-clock deadline
//! that also covers host calls, policy confinement, the instance pool's size, and fuel
//! metering configured per runtime.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use wasmop_core::cluster::{
    Cluster, ClusterError, DeleteParams, Event, GroupVersionKind, Json, ObjectRef, ObjectText,
    Patch,
};
use wasmop_core::plugin::PluginName;
use wasmop_core::policy::Policy;
use wasmop_runtime::{
    Action, Budget, Call, CallReport, Limits, LoadError, LoadOptions, Outcome, Runtime,
    RuntimeConfig,
};

use crate::support::{
    Sluggish, database_config_call, load, request, runtime, seeded, target, test_limits,
};

#[tokio::test]
async fn fuel_budget_stops_a_spinning_guest() {
    let _shared = crate::support::shared().await;
    let limits = Limits {
        fuel: Some(50_000_000),
        ..test_limits()
    };
    let rt = Runtime::new(RuntimeConfig::default().concurrency(2).limits(limits)).expect("runtime");
    let plugin = load(&rt, "infinite-loop").await;
    let object = target("spin", "1");
    let outcome = plugin
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object)),
        )
        .await
        .outcome;
    assert_eq!(
        outcome,
        Outcome::Timeout(Budget::Fuel(50_000_000)),
        "{outcome}"
    );
    assert!(outcome.to_string().contains("fuel budget of 50000000"));
}

#[tokio::test]
async fn a_call_reports_its_memory_high_water_mark_and_the_fuel_it_used() {
    let _shared = crate::support::shared().await;
    let limits = Limits {
        fuel: Some(5_000_000_000),
        ..test_limits()
    };
    let rt = Runtime::new(RuntimeConfig::default().concurrency(2).limits(limits)).expect("runtime");
    let plugin = load(&rt, "well-behaved").await;
    let object = target("measured", "1");
    let CallReport { outcome, usage, .. } = plugin
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object)),
        )
        .await;
    assert_eq!(outcome, Outcome::Action(Action::Done), "{outcome}");
    // At least the guest's initial linear memory, and within its limit.
    assert!(usage.memory_peak >= 64 << 10, "{usage:?}");
    assert!(usage.memory_peak <= Limits::default().memory, "{usage:?}");
    let fuel = usage
        .fuel
        .expect("fuel is reported when the plugin has a budget");
    assert!(fuel > 0 && fuel < 5_000_000_000, "{usage:?}");

    let spinning = load(&rt, "infinite-loop").await;
    let object = target("spin", "1");
    let CallReport { outcome, usage, .. } = spinning
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object)),
        )
        .await;
    assert_eq!(
        outcome,
        Outcome::Timeout(Budget::Fuel(5_000_000_000)),
        "{outcome}"
    );
    assert_eq!(usage.fuel, Some(5_000_000_000), "the whole budget was used");
}

/// A cluster whose reads never answer.
struct Stuck;

#[async_trait]
impl Cluster for Stuck {
    async fn get(&self, _: &ObjectRef) -> Result<String, ClusterError> {
        std::future::pending().await
    }
    async fn list(
        &self,
        _: &GroupVersionKind,
        _: Option<&str>,
        _: Option<&str>,
    ) -> Result<Vec<String>, ClusterError> {
        std::future::pending().await
    }
    async fn create(&self, _: ObjectText, _: &PluginName) -> Result<String, ClusterError> {
        std::future::pending().await
    }
    async fn apply(&self, _: ObjectText, _: &PluginName) -> Result<String, ClusterError> {
        std::future::pending().await
    }
    async fn patch(
        &self,
        _: &ObjectRef,
        _: Patch<Json>,
        _: &PluginName,
    ) -> Result<String, ClusterError> {
        std::future::pending().await
    }
    async fn patch_status(
        &self,
        _: &ObjectRef,
        _: Patch<Json>,
        _: &PluginName,
    ) -> Result<String, ClusterError> {
        std::future::pending().await
    }
    async fn delete(
        &self,
        _: &ObjectRef,
        _: &DeleteParams,
        _: &PluginName,
    ) -> Result<(), ClusterError> {
        std::future::pending().await
    }
    async fn emit_event(&self, _: Event, _: &PluginName) -> Result<(), ClusterError> {
        std::future::pending().await
    }
}

#[tokio::test]
async fn deadline_covers_time_spent_in_host_calls() {
    let _shared = crate::support::shared().await;
    let limits = Limits {
        deadline: Duration::from_millis(300),
        ..Limits::default()
    };
    let rt = Runtime::new(RuntimeConfig::default().concurrency(2).limits(limits)).expect("runtime");
    let plugin = load(&rt, "well-behaved").await;
    let outcome = plugin
        .call(
            Arc::new(Stuck),
            Call::reconcile(request(target("slow", "1"))),
        )
        .await
        .outcome;
    assert_eq!(
        outcome,
        Outcome::Timeout(Budget::WallClock(Duration::from_millis(300)))
    );
}

#[tokio::test]
async fn policy_confinement_denies_calls_outside_the_allowed_namespaces() {
    let _shared = crate::support::shared().await;
    let rt = runtime();
    let options = LoadOptions {
        policy: Policy {
            namespaces: Some(["elsewhere".to_owned()].into()),
            ..Policy::default()
        },
        ..LoadOptions::default()
    };
    let plugin = rt
        .load_file(wasmop_test_guests::component("well-behaved"), options)
        .await
        .expect("loads");
    let object = target("a", "1");
    let cluster = seeded(vec![object.clone()]);
    let outcome = plugin
        .call(cluster.clone(), Call::reconcile(request(object)))
        .await
        .outcome;
    let Outcome::Denied(denial) = &outcome else {
        panic!("expected a denial, got {outcome}");
    };
    assert_eq!(denial.verb, "get");
    assert!(
        outcome
            .to_string()
            .contains("confines the plugin to namespaces elsewhere"),
        "{outcome}"
    );
    assert!(
        cluster.writes().is_empty(),
        "a denied call never reaches the cluster"
    );
}

#[tokio::test]
async fn a_memory_limit_above_the_runtimes_is_refused() {
    let _shared = crate::support::shared().await;
    let rt = runtime();
    let options = LoadOptions {
        limits: Some(Limits {
            memory: 1 << 30,
            ..test_limits()
        }),
        ..LoadOptions::default()
    };
    let err = rt
        .load_file(wasmop_test_guests::component("well-behaved"), options)
        .await
        .expect_err("refused");
    assert!(matches!(err, LoadError::Limits(_)), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_beyond_the_pool_size_wait_for_a_free_slot() {
    let _shared = crate::support::shared().await;
    let rt = Runtime::new(
        RuntimeConfig::default()
            .concurrency(2)
            .limits(test_limits()),
    )
    .expect("runtime");
    let plugin = load(&rt, "well-behaved").await;
    let calls: Vec<_> = (0..12)
        .map(|i| {
            let plugin = plugin.clone();
            tokio::spawn(async move {
                let object = target(&format!("c{i}"), "1");
                let cluster = Sluggish(seeded(vec![object.clone()]), Duration::from_millis(20));
                plugin
                    .call(Arc::new(cluster), Call::reconcile(request(object)))
                    .await
                    .outcome
            })
        })
        .collect();
    for call in calls {
        let outcome = call.await.expect("task");
        assert_eq!(outcome, Outcome::Action(Action::Done), "{outcome}");
    }
}

#[tokio::test]
async fn a_metered_runtime_runs_plugins_without_a_budget_and_stops_those_over_theirs() {
    let _shared = crate::support::shared().await;
    let rt = Runtime::new(
        RuntimeConfig::default()
            .concurrency(2)
            .limits(test_limits())
            .consume_fuel(true),
    )
    .expect("runtime");
    // No budget: the store gets all the fuel there is, and no fuel is reported.
    let unlimited = load(&rt, "well-behaved").await;
    let object = target("unmetered", "1");
    let CallReport { outcome, usage, .. } = unlimited
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object)),
        )
        .await;
    assert_eq!(outcome, Outcome::Action(Action::Done), "{outcome}");
    assert_eq!(usage.fuel, None, "{usage:?}");

    let budget = |fuel| LoadOptions {
        limits: Some(Limits {
            fuel: Some(fuel),
            ..test_limits()
        }),
        ..LoadOptions::default()
    };
    let generous = unlimited
        .with_options(budget(5_000_000_000))
        .expect("budget");
    database_config_call(
        &load(&rt, "database-config")
            .await
            .with_options(budget(5_000_000_000))
            .expect("budget"),
        "metered",
        5432,
    )
    .await;
    let object = target("generous", "2");
    let CallReport { outcome, usage, .. } = generous
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object)),
        )
        .await;
    assert_eq!(outcome, Outcome::Action(Action::Done), "{outcome}");
    assert!(usage.fuel.is_some_and(|f| f > 0), "{usage:?}");

    let tiny = unlimited.with_options(budget(1000)).expect("budget");
    let object = target("tiny", "3");
    let outcome = tiny
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object)),
        )
        .await
        .outcome;
    assert_eq!(outcome, Outcome::Timeout(Budget::Fuel(1000)), "{outcome}");
}

#[tokio::test]
async fn a_fuel_budget_on_an_unmetered_runtime_is_refused_with_the_reason() {
    let _shared = crate::support::shared().await;
    let rt = runtime();
    let options = LoadOptions {
        limits: Some(Limits {
            fuel: Some(1000),
            ..test_limits()
        }),
        ..LoadOptions::default()
    };
    let err = rt
        .load_file(wasmop_test_guests::component("well-behaved"), options)
        .await
        .expect_err("refused");
    assert!(err.to_string().contains("fuel"), "{err}");
}
