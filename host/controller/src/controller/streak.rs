//! Consecutive failed reconciles of one plugin version: when a version traps or times out
//! `threshold` times with no success between (over all objects), it is reported once to the
//! registry, which decides whether to roll it back.
//!
//! Only failures of the version itself count: traps, timeouts and running out of memory.
//! Only a success resets the count. A plugin's own error, a denied host call or a breached
//! cap are its answer to the cluster's state, not a broken build: they neither count nor
//! reset. Were they to reset it, a version that traps on every other call and returns an
//! error in between would never be reported.

use std::sync::Mutex;

use tokio::sync::mpsc;

use wasmop_core::plugin::{Digest, PluginName};
use wasmop_runtime::Outcome;

/// A version that failed `threshold` reconciles in a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failing {
    /// The plugin.
    pub plugin: PluginName,
    /// The failing version.
    pub digest: Digest,
    /// How many failures in a row.
    pub failures: u32,
    /// The last failure, for the report.
    pub last: String,
}

/// Counts one plugin's failures in a row; shared by its reconciles.
#[derive(Debug)]
pub struct Streak {
    plugin: PluginName,
    /// `0` never reports.
    threshold: u32,
    /// The version counted and its failures in a row (a std mutex: never held across an
    /// await, and held for a few instructions).
    state: Mutex<(Option<Digest>, u32)>,
    report: mpsc::UnboundedSender<Failing>,
}

impl Streak {
    /// Counts failures of `plugin`, reporting on `report` at `threshold` (`0`: never).
    pub fn new(plugin: PluginName, threshold: u32, report: mpsc::UnboundedSender<Failing>) -> Self {
        Self {
            plugin,
            threshold,
            state: Mutex::new((None, 0)),
            report,
        }
    }

    /// Records the outcome of one reconcile by version `digest`.
    pub fn record(&self, digest: Digest, outcome: &Outcome) {
        let failed = matches!(
            outcome,
            Outcome::Trap { .. } | Outcome::Timeout(_) | Outcome::OutOfMemory { .. }
        );
        let counted = {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if state.0 != Some(digest) {
                *state = (Some(digest), 0);
            }
            if failed {
                state.1 = state.1.saturating_add(1);
            } else if outcome.is_success() {
                state.1 = 0;
            }
            state.1
        };
        if failed && self.threshold > 0 && counted == self.threshold {
            let _ = self.report.send(Failing {
                plugin: self.plugin.clone(),
                digest,
                failures: counted,
                last: outcome.to_string(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmop_runtime::{Action, PluginErrorKind};

    fn trap() -> Outcome {
        Outcome::Trap {
            message: "unreachable".into(),
            backtrace: Vec::new(),
        }
    }

    fn streak(threshold: u32) -> (Streak, mpsc::UnboundedReceiver<Failing>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Streak::new(PluginName::new("db").expect("name"), threshold, tx),
            rx,
        )
    }

    #[test]
    fn version_is_reported_once_at_the_threshold() {
        let (s, mut rx) = streak(3);
        let d = Digest::of(b"v2");
        s.record(d, &trap());
        s.record(d, &trap());
        assert!(rx.try_recv().is_err());
        s.record(d, &trap());
        let failing = rx.try_recv().expect("reported");
        assert_eq!((failing.digest, failing.failures), (d, 3));
        s.record(d, &trap());
        assert!(rx.try_recv().is_err(), "reported once");
    }

    #[test]
    fn success_or_another_version_starts_the_count_again() {
        let (s, mut rx) = streak(2);
        let (v1, v2) = (Digest::of(b"v1"), Digest::of(b"v2"));
        s.record(v2, &trap());
        s.record(v2, &Outcome::Action(Action::Done));
        s.record(v2, &trap());
        s.record(v1, &trap());
        assert!(rx.try_recv().is_err());
        s.record(v1, &trap());
        assert_eq!(rx.try_recv().expect("reported").digest, v1);
    }

    #[test]
    fn errors_denials_and_breaches_between_traps_do_not_reset_the_count() {
        let (s, mut rx) = streak(3);
        let d = Digest::of(b"v");
        let between = [
            Outcome::PluginError {
                kind: PluginErrorKind::Retryable,
                message: "not ready".into(),
            },
            Outcome::PluginError {
                kind: PluginErrorKind::Permanent,
                message: "bad spec".into(),
            },
            Outcome::Denied(wasmop_core::policy::Denial {
                verb: "get".into(),
                kind: "core/Secret".into(),
                namespace: None,
                reason: "not granted".into(),
            }),
            Outcome::LimitExceeded(wasmop_runtime::LimitKind::HostCalls(1000)),
        ];
        for other in &between {
            s.record(d, &trap());
            s.record(d, other);
        }
        let failing = rx
            .try_recv()
            .expect("three traps among the errors are a streak");
        assert_eq!(failing.failures, 3);
        // A success alone starts the count again.
        s.record(d, &Outcome::Action(Action::Done));
        s.record(d, &trap());
        s.record(d, &between[0]);
        s.record(d, &trap());
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn plugin_errors_do_not_count_and_zero_never_reports() {
        let (s, mut rx) = streak(1);
        let error = Outcome::PluginError {
            kind: PluginErrorKind::Retryable,
            message: "not ready".into(),
        };
        s.record(Digest::of(b"v"), &error);
        assert!(rx.try_recv().is_err());
        let (s, mut rx) = streak(0);
        s.record(Digest::of(b"v"), &trap());
        assert!(rx.try_recv().is_err());
    }
}
