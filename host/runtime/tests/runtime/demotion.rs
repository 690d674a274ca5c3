//! Demotion to the low-priority lane: a spinning call moves there and keeps its limits,
//! a dropped one stops and frees its slot, waiting for the cluster does not count, and a
//! plugin whose last call computed long starts its next one there.

use std::sync::Arc;
use std::time::Duration;

use wasmop_runtime::{
    Action, Budget, Call, CallReport, Compiler, LimitKind, Limits, Outcome, Runtime, RuntimeConfig,
};

use crate::hostile::{expect_hostile, expect_outcome, start_hostile};
use crate::support::{Sluggish, healthy_call, load, request, seeded, target, test_limits};

/// A runtime that demotes calls to the low-priority lane after `after` of guest computing.
fn demoting(after: Duration, compiler: Compiler, concurrency: u32, limits: Limits) -> Runtime {
    Runtime::new(
        RuntimeConfig::default()
            .concurrency(concurrency)
            .limits(limits)
            .compiler(compiler)
            .demote_after(Some(after)),
    )
    .expect("a demoting runtime starts")
}

/// Waits (polling) until `rt` has `n` demoted calls running; a hang here is the failure.
async fn until_demoted_running(rt: &Runtime, n: usize) {
    while rt.demoted_running() != n {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spinning_call_is_demoted_and_still_times_out_with_its_usage_while_a_healthy_one_works() {
    let _alone = crate::support::alone().await;
    // Both compilers: tiered loading runs Winch code through the same epoch callback.
    for compiler in [Compiler::Cranelift, Compiler::Winch] {
        let rt = demoting(Duration::from_millis(20), compiler, 16, test_limits());
        let healthy = load(&rt, "well-behaved").await;
        let spinning = load(&rt, "infinite-loop").await;
        let object = target("spin", "1");
        let cluster = seeded(vec![object.clone()]);
        let spin = tokio::spawn(async move {
            spinning
                .call(cluster, Call::reconcile(request(object)))
                .await
        });
        until_demoted_running(&rt, 1).await;
        // A healthy plugin called meanwhile completes correctly, and is not demoted.
        let mut calls = 0u32;
        while !spin.is_finished() || calls < 3 {
            calls += 1;
            healthy_call(&healthy, &format!("h{calls}"), &calls.to_string()).await;
        }
        let object = target("measured", "1");
        let CallReport { outcome, usage, .. } = healthy
            .call(
                seeded(vec![object.clone()]),
                Call::reconcile(request(object)),
            )
            .await;
        assert_eq!(outcome, Outcome::Action(Action::Done), "{outcome}");
        assert!(!usage.demoted, "a quick call stays where it is: {usage:?}");

        let CallReport { outcome, usage, .. } = spin.await.expect("the spinning call's task");
        expect_outcome("infinite-loop", &outcome);
        assert!(usage.demoted, "{compiler:?}: {usage:?}");
        assert!(
            usage.memory_peak >= 64 << 10,
            "usage still reported: {usage:?}"
        );
        assert_eq!(rt.demoted_running(), 0, "the lane has no task left");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_hostile_guest_keeps_its_typed_outcome_when_demoted_at_once() {
    let _alone = crate::support::alone().await;
    // Demoted at the first slice of computing: the limits (memory, host calls and bytes,
    // output, grants, deadline) hold on the lane, and host calls made from there still work.
    let rt = demoting(
        Duration::from_millis(1),
        Compiler::Cranelift,
        16,
        test_limits(),
    );
    let hostile = start_hostile(&rt).await;
    expect_hostile(hostile, None, "demoted at once").await;
    healthy_call(&load(&rt, "well-behaved").await, "after", "done").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demoted_call_dropped_by_its_caller_stops_and_frees_its_slot() {
    let _alone = crate::support::alone().await;
    // One instance slot, and a deadline far beyond the test: only cancelling frees the slot.
    let limits = Limits {
        deadline: Duration::from_secs(120),
        ..Limits::default()
    };
    let rt = demoting(Duration::from_millis(5), Compiler::Cranelift, 1, limits);
    let spinning = load(&rt, "infinite-loop").await;
    let healthy = load(&rt, "well-behaved").await;
    let object = target("spin", "1");
    let cluster = seeded(vec![object.clone()]);
    let spin = tokio::spawn(async move {
        spinning
            .call(cluster, Call::reconcile(request(object)))
            .await
            .outcome
    });
    until_demoted_running(&rt, 1).await;
    spin.abort();
    assert!(spin.await.expect_err("aborted").is_cancelled());
    until_demoted_running(&rt, 0).await;
    // The only slot is free again: a healthy call gets it (it would wait two minutes for the
    // spinning call's deadline otherwise).
    tokio::time::timeout(
        Duration::from_secs(60),
        healthy_call(&healthy, "after", "1"),
    )
    .await
    .expect("the cancelled call gave its slot back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_for_the_cluster_does_not_count_towards_demotion() {
    let _alone = crate::support::alone().await;
    // 1000 reads of 2 ms each: seconds spent waiting, each read spanning epoch ticks, and
    // little computing between them. Counting the tick after each read would demote it.
    let limits = Limits {
        deadline: Duration::from_secs(60),
        ..Limits::default()
    };
    let rt = demoting(Duration::from_millis(50), Compiler::Cranelift, 2, limits);
    let flood = load(&rt, "host-call-flood").await;
    let object = target("victim", "1");
    let cluster = Arc::new(Sluggish(
        seeded(vec![object.clone()]),
        Duration::from_millis(2),
    ));
    let CallReport { outcome, usage, .. } =
        flood.call(cluster, Call::reconcile(request(object))).await;
    assert_eq!(
        outcome,
        Outcome::LimitExceeded(LimitKind::HostCalls(1000)),
        "{outcome}"
    );
    assert!(!usage.demoted, "{usage:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_whose_last_call_computed_long_starts_on_the_lane_until_a_call_ends_sooner() {
    let _alone = crate::support::alone().await;
    let limits = Limits {
        deadline: Duration::from_millis(300),
        ..test_limits()
    };
    let rt = demoting(Duration::from_millis(20), Compiler::Cranelift, 4, limits);
    let spinning = load(&rt, "infinite-loop").await;
    assert!(
        !spinning.starts_demoted(),
        "a new version starts on the host"
    );
    let object = target("spin", "1");

    // Demoted while it runs; it computed long, so the plugin's next call starts on the lane.
    let CallReport { outcome, usage, .. } = spinning
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object.clone())),
        )
        .await;
    assert!(
        matches!(outcome, Outcome::Timeout(Budget::WallClock(_))),
        "{outcome}"
    );
    assert!(usage.demoted, "{usage:?}");
    assert!(spinning.starts_demoted(), "after a call that computed long");

    // Started on the lane: it keeps every limit there and still computes long.
    let CallReport { outcome, usage, .. } = spinning
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object.clone())),
        )
        .await;
    assert!(
        matches!(outcome, Outcome::Timeout(Budget::WallClock(_))),
        "{outcome}"
    );
    assert!(usage.demoted, "{usage:?}");
    assert!(spinning.starts_demoted());

    // Its `cleanup` returns at once: a call that ends sooner brings the plugin back to the
    // host's threads (this call itself ran on the lane, as it started demoted).
    let CallReport { outcome, usage, .. } = spinning
        .call(seeded(vec![object.clone()]), Call::cleanup(request(object)))
        .await;
    assert_eq!(outcome, Outcome::Action(Action::Done), "{outcome}");
    assert!(usage.demoted, "started on the lane: {usage:?}");
    assert!(!spinning.starts_demoted(), "after a call that ended sooner");
    assert_eq!(rt.demoted_running(), 0, "the lane has no task left");
}
