//! Kubernetes Events (events.k8s.io/v1) from plugins and from the host, deduplicated and
//! rate-limited.
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

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event as KubeEvent, EventType as KubeEventType, Recorder, Reporter};

use crate::cluster::EventType;
use crate::metrics::Metrics;

/// Events one reporter may write about one object at once: client-go's default burst.
pub const BURST: f64 = 25.0;
/// Time to earn back one Event after the burst: client-go's default (1 per 5 minutes).
pub const REFILL: Duration = Duration::from_secs(300);
/// Buckets kept before full ones are forgotten, so the limiter's memory stays bounded.
const MAX_BUCKETS: usize = 10_000;
/// The API server's limits on `reason` and `action`.
const MAX_SHORT: usize = 128;
/// The API server's limit on `note`.
const MAX_NOTE: usize = 1024;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Token buckets per (reporter, object).
#[derive(Debug, Default)]
pub struct Limiter {
    buckets: HashMap<(String, String), Bucket>,
}

impl Limiter {
    /// Takes a token for `reporter` and `object` at `now`; false when there is none.
    pub fn admit(&mut self, reporter: &str, object: &str, now: Instant) -> bool {
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

/// Writes Events. Cheap to share behind an `Arc`.
pub struct EventSink {
    client: Client,
    metrics: Metrics,
    recorders: Mutex<HashMap<String, Recorder>>,
    limiter: Mutex<Limiter>,
}

impl EventSink {
    /// A sink writing through `client`.
    pub fn new(client: Client, metrics: Metrics) -> Self {
        Self {
            client,
            metrics,
            recorders: Mutex::default(),
            limiter: Mutex::default(),
        }
    }

    /// Writes `record` as reported by `wasmop/<plugin>`, unless the rate limit drops it.
    /// Returns whether it was written.
    pub async fn publish(&self, plugin: &str, record: Record) -> Result<bool, kube::Error> {
        let reporter = format!("wasmop/{plugin}");
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
            .admit(&reporter, &object, Instant::now());
        if !admitted {
            self.metrics.event_dropped(plugin);
            tracing::debug!(plugin, object, reason = %record.reason, "event dropped by the rate limit");
            return Ok(false);
        }
        let recorder = {
            let mut recorders = self.recorders.lock().unwrap_or_else(|p| p.into_inner());
            recorders
                .entry(reporter.clone())
                .or_insert_with(|| {
                    Recorder::new(
                        self.client.clone(),
                        Reporter {
                            controller: reporter.clone(),
                            instance: std::env::var("POD_NAME").ok(),
                        },
                    )
                })
                .clone()
        };
        let event = KubeEvent {
            type_: match record.event_type {
                EventType::Normal => KubeEventType::Normal,
                EventType::Warning => KubeEventType::Warning,
            },
            reason: cut(&record.reason, MAX_SHORT),
            note: Some(cut(&record.note, MAX_NOTE)),
            action: cut(&record.action, MAX_SHORT),
            secondary: None,
        };
        recorder.publish(&event, &record.regarding).await?;
        Ok(true)
    }
}

/// Cuts `text` to at most `max` bytes at a character boundary.
pub fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
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

    #[test]
    fn long_text_is_cut_at_a_character_boundary() {
        assert_eq!(cut("héllo", 2), "h");
        assert_eq!(cut("abc", 10), "abc");
    }
}
