//! Kubernetes Events (events.k8s.io/v1) from plugins and from the host, deduplicated,
//! rate-limited, and written in the background.
//!
//! Deduplication is kube-runtime's [`Recorder`]: a repeat of the same event (same reporter,
//! object, type, reason and action) within six minutes patches the first one's `series` count
//! instead of creating another object. On top of that each (reporter, object) pair has a token
//! bucket, client-go's spam filter: a burst of [`BURST`], then one Event per
//! [`REFILL`]. Events over the limit are dropped, counted in `wasmop_events_dropped_total` and
//! logged at debug level; a plugin that fails in a loop cannot flood etcd.
//!
//! Reporters are `wasmop/<plugin>` for what a plugin reports or what the host reports about
//! it, so `kubectl events` shows which plugin was involved.
//!
//! # Guarantees
//! - [`EventSink::publish`] decides at once whether an Event is written (the rate limit) and
//!   queues it; one writer task writes the queue in order, as client-go's event broadcaster
//!   does for controller-runtime, so a reconcile does not wait for its Events' requests.
//! - Nothing is dropped for want of room: the queue holds [`QUEUE`] Events, and when it is
//!   full `publish` waits until the writer has made room (reconciles slow down to the rate
//!   the API server takes Events).
//! - [`EventSink::flush`] returns once every Event queued before it has been written (or has
//!   failed); the host flushes after its last reconcile at shutdown.
//!
//! # Errors
//! A write the API server refuses is logged (warning) and counted in
//! `wasmop_events_failed_total`; it is not retried (kube's recorder does not retry either),
//! and the plugin's `emit` has returned already.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event as KubeEvent, EventType as KubeEventType, Recorder, Reporter};
use tokio::sync::{mpsc, oneshot};

use crate::metrics::Metrics;
use wasmop_core::cluster::EventType;

/// Events one reporter may write about one object at once: client-go's default burst.
pub(crate) const BURST: f64 = 25.0;
/// Time to earn back one Event after the burst: client-go's default (1 per 5 minutes).
pub(crate) const REFILL: Duration = Duration::from_secs(300);
/// Buckets kept before full ones are forgotten, so the limiter's memory stays bounded.
const MAX_BUCKETS: usize = 10_000;
/// The API server's limits on `reason` and `action`.
const MAX_SHORT: usize = 128;
/// The API server's limit on `note`.
const MAX_NOTE: usize = 1024;
/// Events queued for the writer: client-go's broadcaster queues 1,000. At ~1 KiB each this
/// bounds the queue's memory at about 1 MiB, and it absorbs a storm's burst (one Event per
/// reconcile) while the writer keeps up at the API server's pace.
pub(crate) const QUEUE: usize = 1000;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Token buckets per (reporter, object).
#[derive(Debug, Default)]
pub(crate) struct Limiter {
    buckets: HashMap<(String, String), Bucket>,
}

impl Limiter {
    /// Takes a token for `reporter` and `object` at `now`; false when there is none.
    pub(crate) fn admit(&mut self, reporter: &str, object: &str, now: Instant) -> bool {
        if self.buckets.len() >= MAX_BUCKETS {
            self.buckets.retain(|_, b| refill(*b, now).tokens < BURST);
        }
        let bucket = self
            .buckets
            .entry((reporter.to_owned(), object.to_owned()))
            .or_insert(Bucket {
                tokens: BURST,
                at: now,
            });
        *bucket = refill(*bucket, now);
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

fn refill(b: Bucket, now: Instant) -> Bucket {
    let earned = now.saturating_duration_since(b.at).as_secs_f64() / REFILL.as_secs_f64();
    Bucket {
        tokens: (b.tokens + earned).min(BURST),
        at: now,
    }
}

/// One Event to write.
#[derive(Debug, Clone)]
pub struct Record {
    /// The object it is about (with its uid when known, so `kubectl describe` finds it).
    pub regarding: ObjectReference,
    /// Normal or warning.
    pub event_type: EventType,
    /// Short CamelCase reason.
    pub reason: String,
    /// What was done.
    pub action: String,
    /// Human-readable text.
    pub note: String,
}

/// What the writer task is asked to do.
enum Job {
    /// Write one Event as `wasmop/<plugin>`.
    Write {
        plugin: String,
        /// Boxed: a queued job stays small.
        record: Box<Record>,
    },
    /// Answer once everything queued before has been written.
    Flush(oneshot::Sender<()>),
}

/// Writes Events in the background (see the module's guarantees). Cheap to share behind an
/// `Arc`.
pub struct EventSink {
    metrics: Metrics,
    limiter: Mutex<Limiter>,
    queue: mpsc::Sender<Job>,
}

impl EventSink {
    /// A sink writing through `client`, with its writer task. Must be called within a tokio
    /// runtime; the task ends when the sink is dropped.
    pub fn new(client: Client, metrics: Metrics) -> Self {
        let mut recorders: HashMap<String, Recorder> = HashMap::new();
        Self::with_writer(metrics, move |plugin: String, record: Record| {
            let reporter = format!("wasmop/{plugin}");
            let recorder = recorders
                .entry(reporter.clone())
                .or_insert_with(|| {
                    Recorder::new(
                        client.clone(),
                        Reporter {
                            controller: reporter,
                            instance: std::env::var("POD_NAME").ok(),
                        },
                    )
                })
                .clone();
            async move {
                recorder
                    .publish(&kube_event(&record), &record.regarding)
                    .await
            }
        })
    }

    /// A sink whose writer task calls `write` for each Event, one at a time, in order.
    pub(crate) fn with_writer<W, F>(metrics: Metrics, write: W) -> Self
    where
        W: FnMut(String, Record) -> F + Send + 'static,
        F: Future<Output = Result<(), kube::Error>> + Send + 'static,
    {
        let (queue, jobs) = mpsc::channel(QUEUE);
        tokio::spawn(writer(jobs, write, metrics.clone()));
        Self {
            metrics,
            limiter: Mutex::default(),
            queue,
        }
    }

    /// Queues `record`, as reported by `wasmop/<plugin>`, unless the rate limit drops it;
    /// waits only while the queue is full. Returns whether it was queued.
    pub async fn publish(&self, plugin: &str, record: Record) -> bool {
        let object = format!(
            "{}/{}/{}/{}",
            record.regarding.api_version.as_deref().unwrap_or(""),
            record.regarding.kind.as_deref().unwrap_or(""),
            record.regarding.namespace.as_deref().unwrap_or(""),
            record.regarding.name.as_deref().unwrap_or("")
        );
        let admitted = self
            .limiter
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .admit(plugin, &object, Instant::now());
        if !admitted {
            self.metrics.event_dropped(plugin);
            tracing::debug!(plugin, object, reason = %record.reason, "event dropped by the rate limit");
            return false;
        }
        let job = Job::Write {
            plugin: plugin.to_owned(),
            record: Box::new(record),
        };
        if self.queue.send(job).await.is_err() {
            // The writer ends only with its runtime: the host is going away.
            self.metrics.event_failed(plugin);
            tracing::warn!(
                plugin,
                object,
                "the Event writer has stopped; Event not written"
            );
            return false;
        }
        true
    }

    /// Waits until every Event queued before this call has been written (or has failed).
    pub async fn flush(&self) {
        let (done, written) = oneshot::channel();
        if self.queue.send(Job::Flush(done)).await.is_ok() {
            let _ = written.await;
        }
    }
}

/// The writer task: writes queued Events one at a time, in order, until the sink is dropped.
async fn writer<W, F>(mut jobs: mpsc::Receiver<Job>, mut write: W, metrics: Metrics)
where
    W: FnMut(String, Record) -> F,
    F: Future<Output = Result<(), kube::Error>>,
{
    while let Some(job) = jobs.recv().await {
        match job {
            Job::Write { plugin, record } => {
                let reason = record.reason.clone();
                if let Err(error) = write(plugin.clone(), *record).await {
                    metrics.event_failed(&plugin);
                    tracing::warn!(plugin, reason, error = %wasmop_core::chain(&error), "cannot write the Event");
                }
            }
            Job::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
}

/// The kube-runtime Event of `record`, cut to the API server's limits.
fn kube_event(record: &Record) -> KubeEvent {
    KubeEvent {
        type_: match record.event_type {
            EventType::Normal => KubeEventType::Normal,
            EventType::Warning => KubeEventType::Warning,
        },
        reason: cut(&record.reason, MAX_SHORT),
        note: Some(cut(&record.note, MAX_NOTE)),
        action: cut(&record.action, MAX_SHORT),
        secondary: None,
    }
}

/// `text` cut to at most `max` bytes at a character boundary, owned.
fn cut(text: &str, max: usize) -> String {
    wasmop_core::plugin::text::cut(text, max).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_admitted_then_one_event_per_refill() {
        let mut l = Limiter::default();
        let t0 = Instant::now();
        for _ in 0..25 {
            assert!(l.admit("wasmop/p", "o", t0));
        }
        assert!(!l.admit("wasmop/p", "o", t0));
        assert!(l.admit("wasmop/p", "other", t0), "buckets are per object");
        assert!(!l.admit("wasmop/p", "o", t0 + REFILL / 2));
        assert!(l.admit("wasmop/p", "o", t0 + REFILL));
        assert!(!l.admit("wasmop/p", "o", t0 + REFILL));
    }

    use std::sync::Arc;

    use tokio::sync::Semaphore;

    /// A sink whose writer records the reasons it wrote, each write waiting for a permit of
    /// `gate`; writes whose reason is `refused` fail.
    fn gated_sink(gate: Arc<Semaphore>) -> (EventSink, Arc<Mutex<Vec<String>>>, Metrics) {
        let written = Arc::new(Mutex::new(Vec::new()));
        let metrics = Metrics::new();
        let log = written.clone();
        let sink = EventSink::with_writer(metrics.clone(), move |_plugin, record: Record| {
            let (gate, log) = (gate.clone(), log.clone());
            async move {
                gate.acquire().await.expect("open").forget();
                if record.reason == "refused" {
                    return Err(kube::Error::LinesCodecMaxLineLengthExceeded);
                }
                log.lock().expect("log").push(record.reason);
                Ok(())
            }
        });
        (sink, written, metrics)
    }

    fn record(name: &str, reason: &str) -> Record {
        Record {
            regarding: ObjectReference {
                name: Some(name.into()),
                ..ObjectReference::default()
            },
            event_type: EventType::Normal,
            reason: reason.into(),
            action: "Test".into(),
            note: String::new(),
        }
    }

    #[tokio::test]
    async fn publish_returns_before_the_write_and_flush_waits_for_it() {
        let gate = Arc::new(Semaphore::new(0));
        let (sink, written, _) = gated_sink(gate.clone());
        assert!(sink.publish("p", record("a", "First")).await);
        assert!(sink.publish("p", record("a", "Second")).await);
        let flush = sink.flush();
        tokio::pin!(flush);
        assert!(futures::poll!(flush.as_mut()).is_pending());
        assert!(
            written.lock().expect("log").is_empty(),
            "nothing written yet"
        );
        gate.add_permits(2);
        flush.await;
        assert_eq!(*written.lock().expect("log"), ["First", "Second"]);
    }

    #[tokio::test]
    async fn a_full_queue_makes_publish_wait_and_loses_nothing() {
        let gate = Arc::new(Semaphore::new(0));
        let (sink, written, metrics) = gated_sink(gate.clone());
        // One Event in the writer's hands, QUEUE waiting: all queued at once.
        for i in 0..=QUEUE {
            assert!(sink.publish("p", record(&format!("o{i}"), "Queued")).await);
            tokio::task::yield_now().await;
        }
        let over = sink.publish("p", record("over", "Over"));
        tokio::pin!(over);
        assert!(futures::poll!(over.as_mut()).is_pending(), "waits for room");
        gate.add_permits(QUEUE + 2);
        assert!(over.await);
        sink.flush().await;
        let written = written.lock().expect("log");
        assert_eq!(written.len(), QUEUE + 2);
        assert_eq!(written.last().map(String::as_str), Some("Over"));
        assert!(!metrics.render().contains("wasmop_events_dropped_total{"));
    }

    #[tokio::test]
    async fn a_refused_event_is_counted_and_the_next_ones_are_written() {
        let gate = Arc::new(Semaphore::new(10));
        let (sink, written, metrics) = gated_sink(gate);
        sink.publish("p", record("a", "refused")).await;
        sink.publish("p", record("a", "After")).await;
        sink.flush().await;
        assert_eq!(*written.lock().expect("log"), ["After"]);
        assert!(
            metrics
                .render()
                .contains(r#"wasmop_events_failed_total{plugin="p"} 1"#),
            "{}",
            metrics.render()
        );
    }

    #[test]
    fn long_text_is_cut_at_a_character_boundary() {
        assert_eq!(cut("héllo", 2), "h");
        assert_eq!(cut("abc", 10), "abc");
    }
}
