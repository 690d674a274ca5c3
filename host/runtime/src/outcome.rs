//! How one call ended: [`Outcome`], a single typed enum the controller maps onto requeue,
//! backoff, Events and metrics.

use std::fmt;
use std::time::Duration;

use wasmop_core::plugin::text::PluginText;
use wasmop_core::policy::Denial;

/// What one call used of its budgets, for the operator's metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// The largest linear memory the call reached, in bytes.
    pub memory_peak: u64,
    /// The fuel the call consumed, when the plugin runs with a fuel budget.
    pub fuel: Option<u64>,
    /// Whether the call ran so long that it was moved to the low-priority lane.
    pub demoted: bool,
    /// Every host call of the call that was denied, by verb. The outcome names only the
    /// first; `wasmop_host_calls_denied_total` counts them all.
    pub denied: Denials,
}

/// Denied host calls of one call, counted by the verb the denial names: the seven
/// [`Verb`](wasmop_core::plugin::Verb)s and `emit-event`, a fixed set, so the counts are a small array and the metric's
/// `verb` label stays bounded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Denials {
    counts: [u32; DENIED_VERBS.len()],
}

/// The verbs a denial can name, in the order [`Denials`] counts them.
const DENIED_VERBS: [&str; 8] = [
    "get",
    "list",
    "create",
    "patch",
    "apply",
    "delete",
    "patch-status",
    "emit-event",
];

impl Denials {
    /// Counts one denial of `verb` (a verb's name or `emit-event`; any other name is counted
    /// as `get`, the check `emit-event` is made with, so that no denial goes uncounted).
    pub fn add(&mut self, verb: &str) {
        let at = DENIED_VERBS.iter().position(|v| *v == verb).unwrap_or(0);
        self.counts[at] = self.counts[at].saturating_add(1);
    }

    /// How many calls were denied.
    pub fn total(&self) -> u32 {
        self.counts.iter().fold(0, |a, n| a.saturating_add(*n))
    }

    /// The verbs with at least one denial, and how many.
    pub fn by_verb(&self) -> impl Iterator<Item = (&'static str, u32)> + '_ {
        DENIED_VERBS
            .iter()
            .zip(self.counts)
            .filter(|(_, n)| *n > 0)
            .map(|(v, n)| (*v, n))
    }
}

/// What to do after a successful call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing more until something changes.
    Done,
    /// Call again for this object after this long.
    RequeueAfter(Duration),
}

/// Whether a plugin's error is worth retrying.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginErrorKind {
    /// A passing problem: retry with backoff.
    Retryable,
    /// The object cannot be reconciled as it is: report, do not retry until it changes.
    Permanent,
}

/// Which budget a timed-out call exhausted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// The wall-clock deadline.
    WallClock(Duration),
    /// The fuel budget.
    Fuel(u64),
}

/// Which per-call limit a guest breached (other than memory and time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitKind {
    /// Bytes passed to the host.
    HostBytes(u64),
    /// `kube` and `events` calls made.
    HostCalls(u32),
}

/// How one call ended. Every call ends in exactly one of these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The plugin succeeded.
    Action(Action),
    /// The plugin returned an error.
    PluginError {
        /// Retryable or permanent.
        kind: PluginErrorKind,
        /// The plugin's message, escaped.
        message: PluginText,
    },
    /// The guest trapped (a panic, `unreachable`, a stack overflow, a host-call misuse).
    Trap {
        /// What happened, including the guest's last stderr line when there is one (a Rust
        /// panic message lands there), escaped where the plugin wrote it.
        message: String,
        /// The innermost wasm frames, innermost first (their names come from the plugin's
        /// name section, escaped).
        backtrace: Vec<String>,
    },
    /// The call ran out of time or fuel.
    Timeout(Budget),
    /// The guest tried to grow its memory past the limit.
    OutOfMemory {
        /// The limit in bytes.
        limit: u64,
    },
    /// The guest made a host call its grants do not cover. Any denied call makes this the
    /// outcome, even if the guest carried on: a denied call is never a silent success.
    Denied(Denial),
    /// The guest breached a per-call limit.
    LimitExceeded(LimitKind),
}

impl Outcome {
    /// Whether the call succeeded.
    pub fn is_success(&self) -> bool {
        matches!(self, Outcome::Action(_))
    }

    /// A short, bounded label for metrics and reports.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Action(Action::Done) => "done",
            Outcome::Action(Action::RequeueAfter(_)) => "requeue",
            Outcome::PluginError {
                kind: PluginErrorKind::Retryable,
                ..
            } => "retryable-error",
            Outcome::PluginError {
                kind: PluginErrorKind::Permanent,
                ..
            } => "permanent-error",
            Outcome::Trap { .. } => "trap",
            Outcome::Timeout(_) => "timeout",
            Outcome::OutOfMemory { .. } => "out-of-memory",
            Outcome::Denied(_) => "denied",
            Outcome::LimitExceeded(_) => "limit-exceeded",
        }
    }
}

/// A limit as configured: `64 MiB` when it is whole MiB, else `N bytes`.
pub(crate) fn mib(bytes: u64) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

impl Outcome {
    /// What happened, without the backtrace (whose frames depend on the compiler), so it is
    /// stable enough for golden files. [`Display`](fmt::Display) adds the innermost frame.
    pub fn message(&self) -> String {
        match self {
            Outcome::Trap { message, .. } => format!("the plugin trapped: {message}"),
            other => other.to_string(),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Action(Action::Done) => f.write_str("done"),
            Outcome::Action(Action::RequeueAfter(d)) => {
                write!(f, "requeue after {} ms", d.as_millis())
            }
            Outcome::PluginError { kind, message } => {
                let kind = match kind {
                    PluginErrorKind::Retryable => "retryable",
                    PluginErrorKind::Permanent => "permanent",
                };
                write!(f, "the plugin returned a {kind} error: {message}")
            }
            Outcome::Trap { message, backtrace } => {
                write!(f, "the plugin trapped: {message}")?;
                if let Some(frame) = backtrace.first() {
                    write!(f, " (in {frame})")?;
                }
                Ok(())
            }
            Outcome::Timeout(Budget::WallClock(d)) => write!(
                f,
                "the plugin did not finish within its deadline of {} ms",
                d.as_millis()
            ),
            Outcome::Timeout(Budget::Fuel(fuel)) => {
                write!(f, "the plugin used up its fuel budget of {fuel}")
            }
            Outcome::OutOfMemory { limit } => write!(
                f,
                "the plugin ran out of memory: it tried to grow past its limit of {}",
                mib(*limit)
            ),
            Outcome::Denied(denial) => write!(f, "the plugin made a denied host call: {denial}"),
            Outcome::LimitExceeded(LimitKind::HostBytes(n)) => write!(
                f,
                "the plugin passed more than {} to the host in one invocation",
                mib(*n)
            ),
            Outcome::LimitExceeded(LimitKind::HostCalls(n)) => {
                write!(
                    f,
                    "the plugin made more than {n} host calls in one invocation"
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_requeue_reads_as_a_requeue_not_as_done() {
        let requeue = Outcome::Action(Action::RequeueAfter(Duration::from_millis(60_000)));
        assert_eq!(requeue.to_string(), "requeue after 60000 ms");
        assert_eq!(Outcome::Action(Action::Done).to_string(), "done");
    }
}
