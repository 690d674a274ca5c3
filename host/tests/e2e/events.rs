//! End-to-end tests of the Events plugins emit, against the real API server: distinct notes
//! stay distinct Events, repeats of one note are one Event with a `series`, and past the
//! bound (10 distinct notes per object and reason) new notes aggregate into one combined
//! Event. The `event-notes` test guest emits 3 Events with one note, then 12 with distinct
//! notes, all `SuccessfulCreate` on its Target.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use crate::harness::{Host, PATIENCE, confined, message, test_kinds};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use wasmop_testenv::TestEnv;

/// The bound of distinct notes per object and reason (the host's `DISTINCT_NOTES`).
const BOUND: usize = 10;
/// Distinct notes the guest emits after its repeats: past the bound by three.
const DISTINCT: usize = 12;
/// Repeats of its one note.
const REPEATS: usize = 3;
const COMBINED: &str = "(combined from similar events): ";

/// The `SuccessfulCreate` Events about Target `name`.
async fn created_events(env: &TestEnv, name: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(env.client(), env.namespace());
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some("SuccessfulCreate")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .collect()
}

/// How many times an Event was observed: its series count, or 1 without a series.
fn count(e: &Event) -> i32 {
    e.series.as_ref().map_or(1, |s| s.count)
}

fn note(e: &Event) -> &str {
    e.note.as_deref().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread")]
async fn distinct_notes_are_distinct_events_a_repeat_is_a_series_and_past_the_bound_they_combine() {
    let env = TestEnv::start().await.unwrap();
    test_kinds(&env).await;
    let config = confined(
        &env,
        &["event-notes"],
        &format!("    config: {{distinct: {DISTINCT}, repeats: {REPEATS}}}\n"),
    );
    let mut host = Host::start(&env, &["event-notes"], &config).await;
    env.apply_yaml(
        "apiVersion: wasmop.test/v1\nkind: Target\nmetadata:\n  name: cron\n  \
         labels: {wasmop.test/plugin: event-notes}\nspec:\n  value: \"1\"\n",
    )
    .await
    .expect("Target created");
    host.wait_log("the plugin to emit its Events", |l| {
        message(l).starts_with("emitted 15 events for cron")
    })
    .await;

    // The writer writes in the background, in order: wait for the last series to be patched.
    let deadline = Instant::now() + PATIENCE;
    let events = loop {
        let events = created_events(&env, "cron").await;
        let done = |prefix: &str| {
            events
                .iter()
                .any(|e| note(e).starts_with(prefix) && count(e) >= REPEATS as i32)
        };
        if done("the same note") && done(COMBINED) {
            break events;
        }
        assert!(
            Instant::now() < deadline,
            "the Events were not all written: {:#?}",
            events
                .iter()
                .map(|e| (note(e), count(e)))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    // The plugin writes nothing, so one reconcile is expected; a second would only add to
    // the counts (and meet the rate limit), never change which Events exist.
    let reconciles = host
        .lines()
        .iter()
        .filter(|l| message(l).starts_with("emitted 15 events for cron"))
        .count();
    let summary: Vec<(&str, i32)> = events.iter().map(|e| (note(e), count(e))).collect();

    // The repeated note is one Event with a series.
    let same: Vec<&Event> = events
        .iter()
        .filter(|e| note(e) == "the same note")
        .collect();
    assert_eq!(same.len(), 1, "{summary:#?}");
    // Within the bound (the repeated note is the first of its 10), each note its own Event.
    for i in 0..BOUND - 1 {
        let n = format!("created job cron-{i}");
        assert_eq!(
            events.iter().filter(|e| note(e) == n).count(),
            1,
            "{n}: {summary:#?}"
        );
    }
    // Past it, the new notes are one combined Event, not their own.
    for i in BOUND - 1..DISTINCT {
        let n = format!("created job cron-{i}");
        assert!(!events.iter().any(|e| note(e) == n), "{n}: {summary:#?}");
    }
    let combined: Vec<&Event> = events
        .iter()
        .filter(|e| note(e).starts_with(COMBINED))
        .collect();
    assert_eq!(combined.len(), 1, "{summary:#?}");
    assert_eq!(
        note(combined[0]),
        format!("{COMBINED}created job cron-{}", BOUND - 1),
        "the combined Event carries the first note it combined"
    );
    assert_eq!(events.len(), BOUND + 1, "{summary:#?}");
    if reconciles == 1 {
        assert_eq!(count(same[0]), REPEATS as i32, "{summary:#?}");
        assert_eq!(
            count(combined[0]),
            (DISTINCT - (BOUND - 1)) as i32,
            "{summary:#?}"
        );
        assert_eq!(
            host.metric(r#"wasmop_events_aggregated_total{plugin="event-notes"}"#)
                .await,
            (DISTINCT - (BOUND - 1)) as f64
        );
    }
    host.stop().await;
}
