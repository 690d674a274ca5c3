//! controller-runtime's workqueue figures — `workqueue_depth`, `workqueue_adds_total`,
//! `workqueue_queue_duration_seconds` — for the controller's work loop
//! ([`super::runner`]). The controller reports each trigger it feeds the loop
//! ([`Queue::added`]), each reconcile that starts ([`Queue::started`]) and each trigger the
//! loop drops because the object is gone ([`Queue::dropped`]); the queue here mirrors the
//! loop's deduplication:
//! an object already waiting is not added twice, and one triggered while it is being
//! reconciled waits again (controller-runtime's "dirty while processing").
//!
//! # Assumptions
//! Requeues the loop makes on its own (a plugin's `requeue-after`, backoff after an
//! error, the periodic resync) are not seen here: they are not counted as adds and their
//! reconciles have no queue time. Retries are counted by `workqueue_retries_total`.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::{Mutex, PoisonError};

use tokio::time::Instant;

use crate::metrics::Metrics;

type Key = (Option<String>, String);

/// One plugin's view of its queue. The map holds at most one entry per object of the
/// plugin's primary kind, so it is bounded by the cache.
pub(crate) struct Queue {
    plugin: String,
    metrics: Metrics,
    waiting: Mutex<HashMap<Key, Instant>>,
}

impl Queue {
    /// An empty queue for `plugin`, reported at depth 0.
    pub(crate) fn new(plugin: &str, metrics: Metrics) -> Self {
        metrics.queue_depth(plugin, 0);
        Self {
            plugin: plugin.to_owned(),
            metrics,
            waiting: Mutex::new(HashMap::new()),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut HashMap<Key, Instant>) -> T) -> T {
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        let out = f(&mut waiting);
        self.metrics.queue_depth(&self.plugin, waiting.len());
        out
    }

    /// A trigger for this object reached the work loop.
    pub(crate) fn added(&self, namespace: Option<&str>, name: &str) {
        let key = (namespace.map(str::to_owned), name.to_owned());
        let new = self.with(|w| match w.entry(key) {
            Entry::Occupied(_) => false,
            Entry::Vacant(v) => {
                v.insert(Instant::now());
                true
            }
        });
        if new {
            self.metrics.queue_added(&self.plugin);
        }
    }

    /// A reconcile of this object starts: it leaves the queue. Returns when its watch event
    /// was received, if a watch event queued it (not a requeue the loop made).
    pub(crate) fn started(&self, namespace: Option<&str>, name: &str) -> Option<Instant> {
        let key = (namespace.map(str::to_owned), name.to_owned());
        let since = self.with(|w| w.remove(&key));
        if let Some(since) = since {
            self.metrics.queued_for(&self.plugin, since.elapsed());
        }
        since
    }

    /// The loop dropped this object's trigger (the object is not in the cache).
    pub(crate) fn dropped(&self, namespace: Option<&str>, name: &str) {
        let key = (namespace.map(str::to_owned), name.to_owned());
        self.with(|w| w.remove(&key));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn sample(text: &str, series: &str) -> String {
        text.lines()
            .find_map(|l| l.strip_prefix(series))
            .unwrap_or_else(|| panic!("no {series} in {text}"))
            .trim()
            .to_owned()
    }

    #[tokio::test(start_paused = true)]
    async fn an_object_waiting_is_added_once_and_its_wait_is_measured() {
        let m = Metrics::new();
        let q = Queue::new("p", m.clone());
        q.added(Some("ns"), "a");
        q.added(Some("ns"), "a");
        q.added(Some("ns"), "b");
        let text = m.render();
        assert_eq!(sample(&text, r#"workqueue_depth{name="p"}"#), "2");
        assert_eq!(sample(&text, r#"workqueue_adds_total{name="p"}"#), "2");
        tokio::time::advance(Duration::from_millis(300)).await;
        q.started(Some("ns"), "a");
        let text = m.render();
        assert_eq!(sample(&text, r#"workqueue_depth{name="p"}"#), "1");
        assert_eq!(
            sample(&text, r#"workqueue_queue_duration_seconds_count{name="p"}"#),
            "1"
        );
        assert_eq!(
            sample(&text, r#"workqueue_queue_duration_seconds_sum{name="p"}"#),
            "0.3"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn started_gives_when_the_watch_event_came_and_none_for_a_requeue() {
        let m = Metrics::new();
        let q = Queue::new("p", m.clone());
        let before = Instant::now();
        q.added(Some("ns"), "a");
        tokio::time::advance(Duration::from_micros(700)).await;
        assert_eq!(q.started(Some("ns"), "a"), Some(before));
        assert_eq!(q.started(Some("ns"), "requeued"), None);
        m.event_to_reconcile("p", Duration::from_micros(700));
        let text = m.render();
        assert_eq!(
            sample(
                &text,
                r#"wasmop_event_to_reconcile_seconds_bucket{le="0.0008",name="p"}"#
            ),
            "1"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_trigger_during_a_reconcile_queues_the_object_again() {
        let m = Metrics::new();
        let q = Queue::new("p", m.clone());
        q.added(None, "a");
        q.started(None, "a");
        q.added(None, "a");
        assert_eq!(
            sample(&m.render(), r#"workqueue_adds_total{name="p"}"#),
            "2"
        );
        assert_eq!(sample(&m.render(), r#"workqueue_depth{name="p"}"#), "1");
    }

    #[tokio::test(start_paused = true)]
    async fn dropped_triggers_and_unseen_requeues_leave_the_depth_right() {
        let m = Metrics::new();
        let q = Queue::new("p", m.clone());
        q.added(None, "gone");
        q.dropped(None, "gone");
        // A requeue the loop made on its own: no entry, no queue time.
        q.started(None, "requeued");
        let text = m.render();
        assert_eq!(sample(&text, r#"workqueue_depth{name="p"}"#), "0");
        assert_eq!(
            sample(&text, r#"workqueue_queue_duration_seconds_count{name="p"}"#),
            "0"
        );
    }
}
