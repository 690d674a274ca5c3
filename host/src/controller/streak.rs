//! Consecutive failed reconciles of one plugin version: when a version traps or times out
//! `threshold` times in a row (over all objects, with no success between), it is reported
//! once to the registry, which decides whether to roll it back.
//!
//! Only failures of the version itself count: traps, timeouts and running out of memory.
//! A plugin's own error, a denied host call or a breached cap are its answer to the cluster's
//! state, not a broken build, and never trigger a rollback.

use std::sync::Mutex;

use tokio::sync::mpsc;

use crate::plugin::{Digest, PluginName};
use crate::runtime::Outcome;

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
            state.1 = if failed { state.1 + 1 } else { 0 };
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
    use crate::runtime::{Action, PluginErrorKind};

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
