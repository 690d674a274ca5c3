//! Kubernetes Events (events.k8s.io/v1) from plugins and from the host, deduplicated,
//! aggregated, rate-limited, and written in the background.
//!
//! # Series: what a plugin said is kept
//! Deduplication is kube-runtime's [`Recorder`](kube::runtime::events::Recorder): a repeat of
//! an Event within six minutes patches the first one's `series` count instead of creating
//! another object. The Recorder keys a series by reporter, object, type, reason and action,
//! but not the note, so on its own five `SuccessfulCreate` Events naming five Jobs would be
//! one Event naming the first Job, count 5. wasmop keeps notes apart as client-go's older
//! recorder (`tools/record`, what most controller-runtime operators use) does, adapted
//! ([`series`]):
//! - **distinct notes stay distinct Events**: each note gets its own Recorder, so the note is
//!   in the series key; repeats of one note are still one Event with a `series` count;
//! - **up to a bound**: [`DISTINCT_NOTES`](series::DISTINCT_NOTES) (10) distinct notes per
//!   (reporter, object, type, reason) in a period of [`NOTE_WINDOW`](series::NOTE_WINDOW)
//!   (10 minutes) from the first; past it, further new
//!   notes **aggregate** into one Event per (object, type, reason, action) whose note is
//!   `(combined from similar events): <note>` (client-go's words; the note is the first
//!   combined one, as the Recorder patches only the count of a series), counted in
//!   `wasmop_events_aggregated_total`. Notes already seen in the period keep their own series.
//!
//! Why these numbers: 10 per object and reason in 10 minutes is client-go's default, which
//! operators already read `kubectl describe` output by; it covers a controller's ordinary
//! children (a CronJob keeps 3 successful and 1 failed Job by default, a Deployment a few
//! ReplicaSets), while a loop creating hundreds of children makes 11 Events, not hundreds, per
//! reason. The period is fixed rather than sliding (client-go's restarts only after 10 quiet
//! minutes): a CronJob creating one Job a minute keeps one Event per Job instead of being
//! combined forever after its tenth. Both stay below the token bucket's burst ([`BURST`],
//! 25), so the bound, not the rate limit, decides how a burst of distinct notes is shown.
//! Memory is bounded: at most 10,000 periods (digests of at most 10 notes each) and 10,000
//! Recorders (each note's, dropped once idle past the Recorder's own six-minute series life,
//! or least recently used first when full; a dropped one only means the note's next Event
//! starts a new series, never that it joins another note's).
//!
//! # Rate limit
//! On top of that each (reporter, object) pair has a token bucket, client-go's spam filter:
//! a burst of [`BURST`], then one Event per [`REFILL`]. Events over the limit are dropped,
//! counted in `wasmop_events_dropped_total` and logged at debug level; a plugin that fails in
//! a loop cannot flood etcd. Only Events the limit admits count towards the note bound.
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
use kube::runtime::events::{Event as KubeEvent, EventType as KubeEventType};
use tokio::sync::{mpsc, oneshot};

use crate::metrics::Metrics;
use wasmop_core::cluster::EventType;

mod series;

#[cfg(test)]
use self::series::DISTINCT_NOTES;
pub(crate) use self::series::Series;
use self::series::{Aggregator, COMBINED, Recorders};

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
        /// The series it joins.
        series: Series,
    },
    /// Answer once everything queued before has been written.
    Flush(oneshot::Sender<()>),
}

/// Writes Events in the background (see the module's guarantees). Cheap to share behind an
/// `Arc`.
pub struct EventSink {
    metrics: Metrics,
    limiter: Mutex<Limiter>,
    aggregator: Mutex<Aggregator>,
    queue: mpsc::Sender<Job>,
}

impl EventSink {
    /// A sink writing through `client`, with its writer task. Must be called within a tokio
    /// runtime; the task ends when the sink is dropped.
    pub fn new(client: Client, metrics: Metrics) -> Self {
        let mut recorders = Recorders::new(client);
        Self::with_writer(metrics, move |plugin: String, record: Record, series| {
            let reporter = format!("wasmop/{plugin}");
            let recorder = recorders.get(&reporter, &record.note, series, Instant::now());
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
        W: FnMut(String, Record, Series) -> F + Send + 'static,
        F: Future<Output = Result<(), kube::Error>> + Send + 'static,
    {
        let (queue, jobs) = mpsc::channel(QUEUE);
        tokio::spawn(writer(jobs, write, metrics.clone()));
        Self {
            metrics,
            limiter: Mutex::default(),
            aggregator: Mutex::default(),
            queue,
        }
    }

    /// Queues `record`, as reported by `wasmop/<plugin>`, unless the rate limit drops it;
    /// waits only while the queue is full. Returns whether it was queued. Its note is cut to
    /// the API server's limit here; past the note bound it is written as the combined Event
    /// (see the module doc).
    pub async fn publish(&self, plugin: &str, mut record: Record) -> bool {
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
        // Cut before it is compared: notes that differ only past the cap are one note.
        record.note = cut(&record.note, MAX_NOTE);
        let series = self
            .aggregator
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .classify(
                plugin,
                &object,
                record.event_type,
                &record.reason,
                &record.note,
                Instant::now(),
            );
        if series == Series::Combined {
            self.metrics.event_aggregated(plugin);
            record.note = format!("{COMBINED}{}", record.note);
        }
        let job = Job::Write {
            plugin: plugin.to_owned(),
            record: Box::new(record),
            series,
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
    W: FnMut(String, Record, Series) -> F,
    F: Future<Output = Result<(), kube::Error>>,
{
    while let Some(job) = jobs.recv().await {
        match job {
            Job::Write {
                plugin,
                record,
                series,
            } => {
                let reason = record.reason.clone();
                if let Err(error) = write(plugin.clone(), *record, series).await {
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
        let sink = EventSink::with_writer(metrics.clone(), move |_plugin, record: Record, _| {
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

    #[tokio::test]
    async fn distinct_notes_keep_their_own_series_until_the_bound_then_combine() {
        let written = Arc::new(Mutex::new(Vec::new()));
        let log = written.clone();
        let metrics = Metrics::new();
        let sink =
            EventSink::with_writer(metrics.clone(), move |_plugin, record: Record, series| {
                log.lock().expect("log").push((record.note, series));
                async { Ok(()) }
            });
        let note = |note: &str| Record {
            note: note.into(),
            ..record("cron", "SuccessfulCreate")
        };
        for _ in 0..3 {
            assert!(sink.publish("p", note("the same note")).await);
        }
        for i in 0..12 {
            assert!(sink.publish("p", note(&format!("created job {i}"))).await);
        }
        sink.flush().await;
        let written = written.lock().expect("log");
        let expected: Vec<(String, Series)> =
            std::iter::repeat_n(("the same note".to_owned(), Series::Note), 3)
                .chain((0..DISTINCT_NOTES - 1).map(|i| (format!("created job {i}"), Series::Note)))
                .chain((DISTINCT_NOTES - 1..12).map(|i| {
                    (
                        format!("(combined from similar events): created job {i}"),
                        Series::Combined,
                    )
                }))
                .collect();
        assert_eq!(*written, expected);
        assert!(
            metrics
                .render()
                .contains(r#"wasmop_events_aggregated_total{plugin="p"} 3"#),
            "{}",
            metrics.render()
        );
    }

    #[tokio::test]
    async fn notes_are_cut_before_they_are_compared() {
        let written = Arc::new(Mutex::new(Vec::new()));
        let log = written.clone();
        let sink =
            EventSink::with_writer(Metrics::new(), move |_plugin, record: Record, series| {
                log.lock().expect("log").push((record.note, series));
                async { Ok(()) }
            });
        let long = "x".repeat(MAX_NOTE);
        let note = |note: String| Record {
            note,
            ..record("o", "Long")
        };
        sink.publish("p", note(format!("{long}a"))).await;
        sink.publish("p", note(format!("{long}b"))).await;
        sink.flush().await;
        let written = written.lock().expect("log");
        assert_eq!(written.len(), 2);
        assert!(
            written
                .iter()
                .all(|(n, s)| *n == long && *s == Series::Note)
        );
    }

    /// What the fake API server saw: method, note, and series count of each request.
    type Seen = Arc<Mutex<Vec<(String, String, Option<i64>)>>>;

    /// A kube `Client` whose API server echoes each Event back, recording what it was sent.
    fn echoing_client() -> (Client, Seen) {
        let seen: Seen = Arc::default();
        let log = seen.clone();
        let service = tower::service_fn(move |req: hyper::Request<kube::client::Body>| {
            let log = log.clone();
            async move {
                use http_body_util::BodyExt as _;
                let method = req.method().to_string();
                let body = match req.into_body().collect().await {
                    Ok(body) => body.to_bytes(),
                    Err(_) => bytes::Bytes::new(),
                };
                let event: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                log.lock().expect("seen").push((
                    method,
                    event["note"].as_str().unwrap_or_default().to_owned(),
                    event["series"]["count"].as_i64(),
                ));
                Ok::<_, std::convert::Infallible>(hyper::Response::new(http_body_util::Full::new(
                    body,
                )))
            }
        });
        (Client::new(service, "default"), seen)
    }

    #[tokio::test]
    async fn the_recorders_keep_one_series_per_note_and_one_for_the_combined_events() {
        let (client, seen) = echoing_client();
        let sink = EventSink::new(client, Metrics::new());
        let event = |note: &str| Record {
            regarding: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("ConfigMap".into()),
                namespace: Some("ns".into()),
                name: Some("cron".into()),
                ..ObjectReference::default()
            },
            note: note.into(),
            ..record("cron", "SuccessfulCreate")
        };
        for note in ["a", "a", "b", "a", "c"] {
            sink.publish("p", event(note)).await;
        }
        for i in 0..DISTINCT_NOTES {
            sink.publish("p", event(&format!("more {i}"))).await;
        }
        sink.flush().await;
        let seen = seen.lock().expect("seen");
        let summary: Vec<(&str, &str, Option<i64>)> = seen
            .iter()
            .map(|(m, n, c)| (m.as_str(), n.as_str(), *c))
            .collect();
        let combined = |i: usize| format!("{COMBINED}more {i}");
        let mut expected = vec![
            ("POST", "a", None),
            ("PATCH", "a", Some(2)),
            ("POST", "b", None),
            ("PATCH", "a", Some(3)),
            ("POST", "c", None),
        ];
        let more: Vec<String> = (0..DISTINCT_NOTES - 3)
            .map(|i| format!("more {i}"))
            .collect();
        expected.extend(more.iter().map(|n| ("POST", n.as_str(), None)));
        // The first combined Event is created with its note; later ones count in its series.
        let first = combined(DISTINCT_NOTES - 3);
        expected.push(("POST", first.as_str(), None));
        expected.push(("PATCH", first.as_str(), Some(2)));
        expected.push(("PATCH", first.as_str(), Some(3)));
        assert_eq!(summary, expected);
    }

    #[test]
    fn long_text_is_cut_at_a_character_boundary() {
        assert_eq!(cut("héllo", 2), "h");
        assert_eq!(cut("abc", 10), "abc");
    }
}
