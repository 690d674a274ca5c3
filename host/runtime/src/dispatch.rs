//! One call into a plugin: a fresh store and instance from the plugin's `InstancePre`, under
//! its limits (memory, epoch deadline plus an outer timeout that also covers time spent in
//! host calls, optional fuel), ending in exactly one [`Outcome`].

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use tokio::runtime::Handle;
use tokio::sync::{Notify, OwnedSemaphorePermit};
use tracing::Instrument;
use wasmtime::{Engine, Store, Trap, UpdateDeadline, WasmBacktrace};

use super::call::{CallState, DeadlineExceeded, HostCallDuringDescribe};
use super::contract::{self as reconciler, ReviewEntry, Reviewed, wit_admission};
use super::engine::Ticking;
use super::hostcalls::{json_text, to_wit_ref};
use super::lane::Demotion;
use super::outcome::{Action, Budget, Outcome, PluginErrorKind, Usage};
use super::request::{Call, CallReport, Entry, LogLine, RequestObject};
use super::tiered::Code;
use super::wasi::{self, Printed};
use super::{Compiler, Limits, PluginInner};
use wasmop_core::cluster::trim::trim_value;
use wasmop_core::cluster::{Cluster, ObjectRef};
use wasmop_core::plugin::text::PluginText;

/// A store for one call, with the limiter, fuel and epoch deadline installed. The epoch
/// callback yields to tokio every tick (so a busy guest never starves other tasks on its
/// worker thread), counts the slices of guest code towards the call's demotion to the
/// low-priority lane (see [`super::lane`]) and traps once the deadline has passed. The
/// callback runs only while guest code runs (an epoch check in the code finds the deadline
/// passed), so the count is of computing, not of waiting for host calls.
///
/// `metered` says whether the engine consumes fuel: a store of such an engine starts with
/// none, so a call without a budget (`fuel` is `None`) gets all there is, which no call can
/// use up before its deadline.
pub(crate) fn new_store(
    engine: &Engine,
    state: CallState,
    metered: bool,
    fuel: Option<u64>,
) -> wasmtime::Result<Store<CallState>> {
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limiter);
    if metered {
        store.set_fuel(fuel.unwrap_or(u64::MAX))?;
    }
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut ctx| {
        let state = ctx.data_mut();
        if Instant::now() >= state.deadline {
            state.timed_out = true;
            return Err(DeadlineExceeded.into());
        }
        // On demotion too the fiber must suspend, so that the caller can move the call.
        state.count_slice();
        Ok(UpdateDeadline::Yield(1))
    });
    Ok(store)
}

/// Runs one call of `plugin`, in the `reconcile` span.
pub(crate) async fn call(
    plugin: &PluginInner,
    cluster: Arc<dyn Cluster>,
    call: Call,
) -> CallReport {
    // One span per reconcile: the controller opens it (with these fields) around the whole
    // reconcile, finalizer handling included; only a caller that did not (the offline
    // harness) gets it here.
    if tracing::Span::current()
        .metadata()
        .is_some_and(|m| m.name() == "reconcile")
    {
        return run(plugin, cluster, call).await;
    }
    let span = tracing::info_span!(
        "reconcile",
        plugin = %plugin.name,
        "object.ref" = %call.request.target,
        plugin.digest = %plugin.digest.short(),
        entry = ?call.entry,
    );
    run(plugin, cluster, call).instrument(span).await
}

/// What a call holds until it really ends, moved with it if it is demoted. Fields drop in
/// order: the store (and with it the instance) before the slot permit that let it exist, and
/// the epoch hold last, so that a guest is never left running without ticks.
pub(crate) struct Held {
    store: Store<CallState>,
    _slot: OwnedSemaphorePermit,
    _ticking: Ticking,
}

/// Which export a call runs, with its argument in the guest's types.
pub(crate) enum Invocation {
    /// `reconcile` or `cleanup`.
    Reconciler(Entry, reconciler::Request),
    /// `validate` or `mutate` (boxed: a review is several times a request's size, and
    /// reconciles, the common call, should not carry its room).
    Admission(ReviewEntry, Box<wit_admission::Review>),
}

/// What the export returned.
pub(crate) enum Answer {
    /// `reconcile`'s or `cleanup`'s result.
    Reconciler(Result<reconciler::Action, reconciler::Error>),
    /// `validate`'s or `mutate`'s result.
    Admission(Reviewed),
}

/// What the guest's export returned, or why it did not: the outer timeout elapsed, or the
/// call trapped or was stopped by the host.
type Returned = Result<wasmtime::Result<Answer>, tokio::time::error::Elapsed>;

/// A call ready to run: its store, and where it runs.
pub(crate) struct Prepared {
    held: Held,
    /// Set when the runtime demotes long calls: the call's demotion signal.
    signal: Option<Arc<Notify>>,
    /// Whether it starts on the low-priority lane (the version's last call computed long).
    start_demoted: bool,
}

async fn run(plugin: &PluginInner, cluster: Arc<dyn Cluster>, call: Call) -> CallReport {
    // The code current now runs this whole call, even if tiered loading replaces it meanwhile.
    let code = plugin.code.current();
    let Call {
        entry,
        request,
        clock,
        capture_logs,
    } = call;
    let target = request.target.clone();
    let io = PerCall {
        clock,
        capture_logs,
        deadline: plugin.shared.limits.deadline,
        review: false,
    };
    let prepared = match prepare(plugin, &code.engine, cluster, Some(target.clone()), &io).await {
        Ok(prepared) => prepared,
        Err(e) => {
            let outcome = Outcome::Trap {
                message: format!("cannot prepare the call: {e:#}"),
                backtrace: Vec::new(),
            };
            return report(outcome, Usage::default(), Vec::new(), code.compiler);
        }
    };
    let request = reconciler::Request {
        target: to_wit_ref(&request.target),
        object: match request.object {
            RequestObject::Value(mut value) => {
                trim_value(&mut value);
                json_text(&value)
            }
            RequestObject::Text(text) => text,
        },
    };
    let started = Instant::now();
    let invocation = Invocation::Reconciler(entry, request);
    let (held, returned) =
        execute(plugin, Arc::clone(&code), invocation, io.deadline, prepared).await;
    let (answered, usage, logs) = finish(plugin, held, returned, io.deadline);
    let outcome = match answered {
        Ok(Answer::Reconciler(returned)) => returned_outcome(returned, &plugin.shared.limits),
        Ok(Answer::Admission(_)) => Outcome::Trap {
            message: "a reconcile returned an admission answer (a host bug)".into(),
            backtrace: Vec::new(),
        },
        Err(outcome) => outcome,
    };
    let elapsed_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    log_outcome(&outcome, plugin, &target, elapsed_us);
    report(outcome, usage, logs, code.compiler)
}

/// The per-call settings of a call that shape its store.
pub(crate) struct PerCall {
    /// The wall clock the guest sees, instead of the runtime's.
    pub clock: Option<std::time::SystemTime>,
    /// Whether its log lines are kept for the report.
    pub capture_logs: bool,
    /// How long it may take: the plugin's deadline, or less for a review.
    pub deadline: std::time::Duration,
    /// Whether it is an admission review, which may read but not write.
    pub review: bool,
}

#[cfg_attr(not(feature = "test-hooks"), allow(unused_variables))]
fn report(outcome: Outcome, usage: Usage, logs: Vec<LogLine>, compiler: Compiler) -> CallReport {
    CallReport {
        outcome,
        usage,
        logs,
        #[cfg(feature = "test-hooks")]
        compiler,
    }
}

/// Takes an instance slot (waiting for one when `concurrency` calls run), starts the epoch
/// ticks, and builds the call's store on `engine`, with its demotion to the lane set up when
/// the runtime demotes long calls.
pub(crate) async fn prepare(
    plugin: &PluginInner,
    engine: &Engine,
    cluster: Arc<dyn Cluster>,
    target: Option<ObjectRef>,
    io: &PerCall,
) -> wasmtime::Result<Prepared> {
    // Never fails: the semaphore lives as long as the runtime and is never closed.
    let Ok(slot) = Arc::clone(&plugin.runtime.slots).acquire_owned().await else {
        unreachable!("the instance-slot semaphore is never closed");
    };
    // Epochs advance (deadline, yields) while this call may run guest code.
    let ticking = plugin.runtime.ticker.ticking();
    let mut state = match io.clock {
        // A context of its own: the pooled ones carry the runtime's clock.
        Some(at) => {
            CallState::from_parts(Some(at), Arc::clone(&plugin.shared), Some(cluster), target)
        }
        None => CallState::new(plugin, Some(cluster), target),
    };
    if io.capture_logs {
        state.host.captured_logs = Some(Vec::new());
    }
    state.host.reviewing = io.review;
    state.deadline = Instant::now() + io.deadline;
    let config = &plugin.runtime.config;
    state.demotion = config
        .demote_after
        .map(|after| Demotion::new(after, config.epoch_tick, Handle::current()));
    let signal = state.demotion.as_ref().map(Demotion::signal);
    // A plugin whose last call computed long starts this one on the lane: otherwise each
    // call of a spinning plugin would first take `demoteAfter` of the host's own threads.
    let start_demoted = signal.is_some() && plugin.computes_long.load(Ordering::Relaxed);
    if start_demoted {
        state.start_demoted();
    }
    let limits = &plugin.shared.limits;
    let store = new_store(engine, state, config.fuel_enabled(), limits.fuel)?;
    Ok(Prepared {
        held: Held {
            store,
            _slot: slot,
            _ticking: ticking,
        },
        signal,
        start_demoted,
    })
}

/// Instantiates `code` and runs `invocation` under the wall-clock `deadline`: on the
/// caller's task until the call is demoted, then on the low-priority lane.
pub(crate) async fn execute(
    plugin: &PluginInner,
    code: Arc<Code>,
    invocation: Invocation,
    deadline: std::time::Duration,
    prepared: Prepared,
) -> (Held, Returned) {
    let Prepared {
        mut held,
        signal,
        start_demoted,
    } = prepared;
    // Owns all it uses, so that it can move to the low-priority lane whole.
    let call = async move {
        let store = &mut held.store;
        let call = async {
            match invocation {
                Invocation::Reconciler(entry, request) => code
                    .pre
                    .call(&mut *store, entry, request)
                    .await
                    .map(Answer::Reconciler),
                Invocation::Admission(entry, review) => code
                    .pre
                    .review(&mut *store, entry, *review)
                    .await
                    .map(Answer::Admission),
            }
        };
        // The epoch deadline stops a guest that computes; this also stops one waiting in a
        // host call (a slow API server), which epochs cannot interrupt.
        let result = tokio::time::timeout(deadline, call).await;
        (held, result)
    };
    match signal {
        None => call.await,
        Some(_) if start_demoted => plugin.runtime.lane.on_lane(call).await.0,
        Some(signal) => plugin.runtime.lane.run(call, &signal).await.0,
    }
}

/// Reads what the finished call used and recorded, forwards what it printed, and sorts what
/// it returned: the export's answer, or the [`Outcome`] of a call that failed (a denied host
/// call fails it too); then releases the instance and its slot. Returns that, the usage,
/// and the log lines the call captured (if it did).
pub(crate) fn finish(
    plugin: &PluginInner,
    held: Held,
    returned: Returned,
    deadline: std::time::Duration,
) -> (Result<Answer, Outcome>, Usage, Vec<LogLine>) {
    let limits = &plugin.shared.limits;
    let Held {
        store,
        _slot,
        _ticking,
    } = held;
    let fuel = limits
        .fuel
        .map(|budget| budget.saturating_sub(store.get_fuel().unwrap_or(0)));
    let state = store.data();
    if let Some(demotion) = &state.demotion {
        plugin
            .computes_long
            .store(demotion.ran_long(), Ordering::Relaxed);
    }
    let usage = Usage {
        memory_peak: u64::try_from(state.limiter.peak).unwrap_or(u64::MAX),
        fuel,
        demoted: state.demotion.as_ref().is_some_and(|d| d.demoted),
        denied: state.host.denials,
    };
    state.host.log_denials();
    let printed = state.output.take();
    wasi::forward(
        &printed,
        state.host.plugin().as_str(),
        limits.log_line_bytes,
    );
    let limits = &Limits {
        deadline,
        ..limits.clone()
    };
    let answered = match returned {
        Err(_elapsed) => Err(Outcome::Timeout(Budget::WallClock(deadline))),
        Ok(Err(error)) => Err(failure(&error, state, &printed, limits)),
        Ok(Ok(returned)) => match &state.host.denial {
            Some(denial) => Err(Outcome::Denied(denial.clone())),
            None => Ok(returned),
        },
    };
    if state.host.log_lines_dropped > 0 {
        tracing::warn!(
            dropped = state.host.log_lines_dropped,
            "plugin log lines over the cap were dropped"
        );
    }
    // Dropping the instance (then the slot permit, then the epoch hold) returns its slot to
    // the pool; the WASI context goes back to the plugin for its next call.
    let mut state = store.into_data();
    let logs = state.host.captured_logs.take().unwrap_or_default();
    state.recycle(plugin);
    (answered, usage, logs)
}

/// Logs how a call ended. The span carries the plugin and object too, but it is at INFO and
/// may be filtered out: a failure must name its plugin and object on its own. The object's
/// name is formatted only if the event is enabled.
fn log_outcome(outcome: &Outcome, plugin: &PluginInner, target: &ObjectRef, elapsed_us: u64) {
    let plugin_name = plugin.shared.plugin.as_str();
    match outcome {
        Outcome::Action(_) => {
            tracing::debug!(
                plugin = plugin_name,
                object = %target,
                outcome = outcome.label(),
                elapsed_us,
                "{outcome}"
            );
        }
        Outcome::Trap { backtrace, .. } => {
            let backtrace = backtrace.join(" <- ");
            tracing::warn!(
                plugin = plugin_name,
                object = %target,
                outcome = outcome.label(),
                elapsed_us,
                backtrace,
                "{}",
                outcome.message()
            );
        }
        _ => {
            tracing::warn!(
                plugin = plugin_name,
                object = %target,
                outcome = outcome.label(),
                elapsed_us,
                "{outcome}"
            );
        }
    }
}

fn returned_outcome(
    returned: Result<reconciler::Action, reconciler::Error>,
    limits: &Limits,
) -> Outcome {
    // The guest controls the message's size and content: keep what a log line can hold, and
    // escape it once, here, for every place it is shown (logs, Events, status).
    let cap = |m: String| PluginText::cut(&m, limits.log_line_bytes);
    match returned {
        Ok(reconciler::Action::Done) => Outcome::Action(Action::Done),
        Ok(reconciler::Action::RequeueAfter(ms)) => {
            Outcome::Action(Action::RequeueAfter(std::time::Duration::from_millis(ms)))
        }
        Err(reconciler::Error::Retryable(m)) => Outcome::PluginError {
            kind: PluginErrorKind::Retryable,
            message: cap(m),
        },
        Err(reconciler::Error::Permanent(m)) => Outcome::PluginError {
            kind: PluginErrorKind::Permanent,
            message: cap(m),
        },
    }
}

/// The outcome of a call that ended in an error, using the flags the call recorded: they
/// say reliably what happened, whatever wrapping the error went through.
pub(crate) fn failure(
    error: &wasmtime::Error,
    state: &CallState,
    printed: &Printed,
    limits: &Limits,
) -> Outcome {
    if state.timed_out {
        return Outcome::Timeout(Budget::WallClock(limits.deadline));
    }
    if matches!(error.downcast_ref::<Trap>(), Some(Trap::OutOfFuel)) {
        return Outcome::Timeout(Budget::Fuel(limits.fuel.unwrap_or_default()));
    }
    if state.limiter.refused_growth.is_some() {
        return Outcome::OutOfMemory {
            limit: limits.memory,
        };
    }
    if let Some(kind) = state.host.breach {
        return Outcome::LimitExceeded(kind);
    }
    if let Some(denial) = &state.host.denial {
        return Outcome::Denied(denial.clone());
    }
    trap(error, printed)
}

fn trap(error: &wasmtime::Error, printed: &Printed) -> Outcome {
    let mut message = if let Some(e) = error.downcast_ref::<HostCallDuringDescribe>() {
        e.to_string()
    } else {
        match error.downcast_ref::<Trap>() {
            Some(Trap::StackOverflow) => "wasm stack overflow (unbounded recursion?)".to_owned(),
            Some(Trap::MemoryOutOfBounds) => {
                "out-of-bounds memory access (in a Rust guest also the \
                 end of unbounded recursion that exhausted its shadow stack)"
                    .to_owned()
            }
            Some(Trap::UnreachableCodeReached) => {
                "unreachable code reached (a Rust panic or abort ends this way)".to_owned()
            }
            Some(trap) => trap.to_string(),
            // wasmtime's own text, which can quote what the component declared.
            None => PluginText::new(&format!("{:#}", error.root_cause())).into_string(),
        }
    };
    if let Some(line) = printed.last_stderr_line() {
        message.push_str("; last stderr line: ");
        message.push_str(PluginText::cut(line, 512).as_str());
    }
    let backtrace = error
        .downcast_ref::<WasmBacktrace>()
        .map(|bt| {
            bt.frames()
                .iter()
                .map(|f| {
                    // `{:#}` drops the hash suffix; non-Rust names pass through unchanged.
                    let func = f
                        .func_name()
                        .map(|n| format!("{:#}", rustc_demangle::demangle(n)))
                        .unwrap_or_else(|| format!("func[{}]", f.func_index()));
                    // Both names come from the plugin's own name section.
                    let frame = match f.module().name() {
                        Some(module) => format!("{module}!{func}"),
                        None => func,
                    };
                    PluginText::new(&frame).into_string()
                })
                .collect()
        })
        .unwrap_or_default();
    Outcome::Trap { message, backtrace }
}
