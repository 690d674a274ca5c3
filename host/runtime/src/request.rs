//! What a call into a plugin is given and what it gives back: the [`Call`] (which export, for
//! which [`Request`]) that [`Plugin::call`](crate::Plugin::call) takes, and the
//! [`CallReport`] it returns.

use std::time::SystemTime;

use serde_json::Value;
use wasmop_core::cluster::ObjectRef;

use super::outcome::{Outcome, Usage};
#[cfg(feature = "test-hooks")]
use super::settings::Compiler;

/// One unit of work for a plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Which object.
    pub target: ObjectRef,
    /// The object as the host last saw it.
    pub object: RequestObject,
}

/// The object of a [`Request`], as a value or as the JSON text the plugin will get.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestObject {
    /// A value: trimmed (no `managedFields`, no last-applied annotation) and written as JSON
    /// text for the call.
    Value(Value),
    /// JSON text of an object already trimmed, passed to the plugin as it is: the controller
    /// writes its cached objects (trimmed when cached) straight to text, which spares
    /// building a `Value` that the call would only write out and drop.
    Text(String),
}

impl From<Value> for RequestObject {
    fn from(value: Value) -> Self {
        RequestObject::Value(value)
    }
}

impl Request {
    /// A request for `object`, identified by its own `apiVersion`, `kind` and metadata.
    pub fn for_object(object: Value) -> Result<Self, wasmop_core::cluster::IdentityError> {
        Ok(Self {
            target: ObjectRef::of(&object)?,
            object: RequestObject::Value(object),
        })
    }
}

/// Which export of the plugin a [`Call`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// `reconcile`: bring the object's world to what it asks for.
    Reconcile,
    /// `cleanup`: for an object with the plugin's finalizer that is being deleted.
    Cleanup,
}

/// One call to make: which export, for which object. Built with [`Call::reconcile`] or
/// [`Call::cleanup`]; its fields are private so that per-call settings can be added without
/// changing the callers that do not use them.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub(crate) entry: Entry,
    pub(crate) request: Request,
    /// The wall-clock time this call's guest sees, instead of the runtime's.
    pub(crate) clock: Option<SystemTime>,
    /// Whether the plugin's log lines are kept in the [`CallReport`].
    pub(crate) capture_logs: bool,
}

impl Call {
    /// A call of `entry` for `request`.
    pub fn new(entry: Entry, request: Request) -> Self {
        Self {
            entry,
            request,
            clock: None,
            capture_logs: false,
        }
    }

    /// Shows this call's guest a wall clock stopped at `at`, whatever the runtime's clock
    /// ([`RuntimeConfig::fixed_clock`](crate::RuntimeConfig::fixed_clock) or the real one).
    /// For offline runs, where each scenario may be at its own time; the call gets a WASI
    /// context of its own instead of one from the plugin's pool.
    #[must_use]
    pub fn at(mut self, at: SystemTime) -> Self {
        self.clock = Some(at);
        self
    }

    /// Keeps the plugin's log lines in [`CallReport::logs`] (as the host logs them: cut and
    /// escaped, at most the per-call line cap), besides logging them as usual. For offline
    /// runs, whose report shows them; the host does not capture.
    #[must_use]
    pub fn capturing_logs(mut self) -> Self {
        self.capture_logs = true;
        self
    }

    /// A call of `reconcile` for `request`.
    pub fn reconcile(request: Request) -> Self {
        Self::new(Entry::Reconcile, request)
    }

    /// A call of `cleanup` for `request`.
    pub fn cleanup(request: Request) -> Self {
        Self::new(Entry::Cleanup, request)
    }

    /// Which export it runs.
    pub fn entry(&self) -> Entry {
        self.entry
    }

    /// For which object.
    pub fn request(&self) -> &Request {
        &self.request
    }
}

/// How one call went: its [`Outcome`] and what it used of its budgets.
#[derive(Debug, Clone, PartialEq)]
#[must_use = "a call's outcome says whether it succeeded"]
#[non_exhaustive]
pub struct CallReport {
    /// How the call ended.
    pub outcome: Outcome,
    /// What it used of its budgets.
    pub usage: Usage,
    /// The plugin's log lines, in the order it wrote them, when the call was made
    /// [`capturing_logs`](Call::capturing_logs); empty otherwise.
    pub logs: Vec<LogLine>,
    /// Which compiler made the code it ran on (tiered loading switches mid-life).
    #[cfg(feature = "test-hooks")]
    pub(crate) compiler: Compiler,
}

impl CallReport {
    /// Which compiler made the code the call ran on: Winch's until tiered loading replaced
    /// it with Cranelift's. For tests of tiering, hence behind the `test-hooks` feature.
    #[cfg(feature = "test-hooks")]
    pub fn compiler(&self) -> Compiler {
        self.compiler
    }
}

/// The severity of a plugin's log line (the WIT `log.level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    /// Very detailed.
    Trace,
    /// Detailed.
    Debug,
    /// Normal.
    Info,
    /// Suspicious.
    Warn,
    /// Failed.
    Error,
}

impl LogLevel {
    /// The level's name, lowercase, as in the WIT (`trace` ... `error`).
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }
}

/// One log line a plugin wrote, as the host logged it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Its level.
    pub level: LogLevel,
    /// The line, cut at the per-line cap and escaped (control characters and the like shown
    /// as escapes), exactly as the host's log shows it.
    pub message: String,
}
