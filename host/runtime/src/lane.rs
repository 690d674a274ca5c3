//! The low-priority lane: a separate tokio runtime whose threads run at the lowest CPU
//! priority (nice 19 and `SCHED_IDLE` on Linux), where a call whose guest code keeps computing is moved
//! ([demoted](Demotion)) so that it no longer competes with the host's own tasks and with
//! healthy plugins for the host's tokio workers. The kernel then gives the host, the healthy
//! plugins (and a control plane on the same machine) the CPU first, while a legitimately heavy
//! plugin still runs whenever there is CPU to spare.
//!
//! # Guarantees
//! - The lane's runtime is built on the first demotion only: a process whose calls all end
//!   quickly (or a one-shot tool) starts no thread for it.
//! - A demoted call keeps every limit: it is the same future, moved whole (store, slot permit,
//!   epoch hold, deadline timer), so its epoch deadline, outer timeout, fuel, memory and output
//!   caps apply as before, and its usage and output are reported by the caller as before.
//! - The Kubernetes I/O of a demoted call's host calls runs on the host's runtime
//!   ([`host_io`]): a pooled API connection is never driven by a nice-19 thread.
//!
//! # Cancellation
//! Dropping the caller's future aborts the call's task on the lane ([`Abort`]); the guest stops
//! at its next epoch yield (within a tick) and its instance slot is freed when the task's
//! future is dropped there, not before.

pub(crate) mod host_io;

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// The nice value of the lane's threads: the lowest priority Linux gives a normal thread.
/// Under CFS a nice-19 thread gets about 1.5 % of the CPU against one nice-0 thread that
/// wants it all, and all of it when nobody else does.
pub(crate) const LANE_NICE: i32 = 19;

/// The lane: its runtime, built on first use.
pub(crate) struct Lane {
    runtime: OnceLock<Option<tokio::runtime::Runtime>>,
    /// Demoted calls whose task is alive on the lane now.
    running: Arc<AtomicUsize>,
}

impl Default for Lane {
    fn default() -> Self {
        Self::new()
    }
}

impl Lane {
    /// A lane with no runtime yet.
    pub(crate) fn new() -> Self {
        Self {
            runtime: OnceLock::new(),
            running: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The lane's runtime, built now if this is the first demotion; `None` if its threads
    /// cannot be started (logged once), and then demoted calls stay where they are.
    fn handle(&self) -> Option<&Handle> {
        self.runtime
            .get_or_init(|| {
                let threads = std::thread::available_parallelism().map_or(1, usize::from);
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(threads)
                    .thread_name("wasmop-lane")
                    .on_thread_start(lower_priority)
                    .enable_time()
                    .build()
                    .inspect_err(|error| {
                        tracing::warn!(
                            %error,
                            "cannot start the low-priority lane: long-running calls stay on the host's threads"
                        );
                    })
                    .ok()
            })
            .as_ref()
            .map(tokio::runtime::Runtime::handle)
    }

    /// Demoted calls whose task is alive on the lane now (for tests).
    #[cfg(any(test, feature = "test-hooks"))]
    pub(crate) fn running(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }

    /// Polls `call` here until `demotion` is signalled, then moves it to the lane and waits
    /// for it there. Returns the call's output and whether it was moved.
    ///
    /// # Cancellation
    /// Dropping the returned future drops `call` where it is: here, or (by aborting its task)
    /// on the lane.
    pub(crate) async fn run<F>(&self, call: F, demotion: &Notify) -> (F::Output, bool)
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let mut call = Box::pin(call);
        tokio::select! {
            biased;
            out = &mut call => return (out, false),
            () = demotion.notified() => {}
        }
        self.on_lane(call).await
    }

    /// Runs `call` on the lane from its start (a call of a plugin whose last call computed
    /// long); here if the lane cannot start. Returns the call's output and whether it ran on
    /// the lane.
    ///
    /// # Cancellation
    /// Dropping the returned future aborts the call's task on the lane.
    pub(crate) async fn on_lane<F>(&self, call: F) -> (F::Output, bool)
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let Some(lane) = self.handle() else {
            return (call.await, false);
        };
        let alive = Alive::new(Arc::clone(&self.running));
        let task = Abort(lane.spawn(async move {
            let _alive = alive;
            call.await
        }));
        let out = task
            .join()
            .await
            .expect("the lane is only shut down when dropped, and it outlives this borrow");
        (out, true)
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        // The last plugin may be dropped inside the host's runtime, where dropping a runtime
        // (which waits for its threads) would panic; its aborted tasks end on their own.
        if let Some(Some(runtime)) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// One call's demotion state, kept in its store and updated by the epoch callback.
pub(crate) struct Demotion {
    /// Epoch callbacks (slices of guest code, each at most a tick) after which the call is
    /// demoted.
    after: u32,
    seen: u32,
    /// Set once the call was signalled to move.
    pub demoted: bool,
    signal: Arc<Notify>,
    /// The host's runtime, where a demoted call's host calls do their I/O.
    pub host: Handle,
}

impl Demotion {
    /// A call demoted after `after` of guest code (counted in ticks of `tick`, at least one),
    /// whose host calls go back to `host`.
    pub(crate) fn new(after: Duration, tick: Duration, host: Handle) -> Self {
        let ticks = after.as_nanos().div_ceil(tick.as_nanos().max(1)).max(1);
        Self {
            after: u32::try_from(ticks).unwrap_or(u32::MAX),
            seen: 0,
            demoted: false,
            signal: Arc::new(Notify::new()),
            host,
        }
    }

    /// The signal, for the caller that polls the call ([`Lane::run`]).
    pub(crate) fn signal(&self) -> Arc<Notify> {
        Arc::clone(&self.signal)
    }

    /// Counts one epoch callback; true exactly once, when the call has just been demoted (the
    /// caller is signalled; the callback must then yield so that it can move the call).
    pub(crate) fn tick(&mut self) -> bool {
        if self.demoted {
            // Still counted: a call that started demoted tells whether it computed long.
            self.seen = self.seen.saturating_add(1);
            return false;
        }
        self.seen += 1;
        if self.seen < self.after {
            return false;
        }
        self.demoted = true;
        self.signal.notify_one();
        true
    }

    /// Marks the call demoted before it starts (no signal: the caller runs it on the lane
    /// from the start, [`Lane::on_lane`]).
    pub(crate) fn mark_demoted(&mut self) {
        self.demoted = true;
    }

    /// Whether the call's guest code computed for the whole demotion threshold.
    pub(crate) fn ran_long(&self) -> bool {
        self.seen >= self.after
    }
}

/// Counts a task alive on the lane while it exists.
struct Alive(Arc<AtomicUsize>);

impl Alive {
    fn new(count: Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Self(count)
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A spawned task that is aborted when its handle is dropped: nothing a caller gave up on
/// keeps running.
pub(crate) struct Abort<T>(JoinHandle<T>);

impl<T> Abort<T> {
    /// Spawns `future` on `runtime`, to be aborted if the returned value is dropped first.
    pub(crate) fn spawn<F>(runtime: &Handle, future: F) -> Self
    where
        F: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        Self(runtime.spawn(future))
    }

    /// Waits for the task's output; `None` if its runtime shut down before it ended. A panic
    /// in the task resumes here, as if the future had been polled in place.
    pub(crate) async fn join(mut self) -> Option<T> {
        match (&mut self.0).await {
            Ok(out) => Some(out),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_cancelled) => None,
        }
    }
}

impl<T> Drop for Abort<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Gives the calling thread the lane's priority; logs once if it cannot.
fn lower_priority() {
    static WARNED: AtomicBool = AtomicBool::new(false);
    static WARNED_IDLE: AtomicBool = AtomicBool::new(false);
    if let Err(error) = set_thread_nice(LANE_NICE)
        && !WARNED.swap(true, Ordering::Relaxed)
    {
        tracing::warn!(
            %error,
            "cannot lower the priority of the low-priority lane's threads: demoted calls compete with the host at normal priority"
        );
    }
    if let Err(error) = set_thread_idle_policy()
        && !WARNED_IDLE.swap(true, Ordering::Relaxed)
    {
        tracing::info!(
            %error,
            "the low-priority lane's threads keep the normal scheduling policy at nice {LANE_NICE}: the host's wake-ups may wait for a demoted call's time slice"
        );
    }
}

/// Moves the calling thread to `SCHED_IDLE`: its weight drops below nice 19's (3 against
/// 15), and, what matters most here, a normal thread that wakes up preempts it at once
/// instead of waiting for its slice to end. It still runs (slowly) on a busy machine, so a
/// demoted call still reaches its deadline. Needs no privilege.
#[cfg(target_os = "linux")]
fn set_thread_idle_policy() -> std::io::Result<()> {
    // SAFETY: `sched_param` is plain integers (glibc's has one, musl's more), for which all
    // zeroes is a valid value, and SCHED_IDLE needs priority 0. `sched_setscheduler` reads
    // the `sched_param` it is given (a valid local) and changes only the calling thread's
    // policy (pid 0); it touches no Rust memory.
    #[allow(unsafe_code)]
    let rc = unsafe {
        let param: libc::sched_param = std::mem::zeroed();
        libc::sched_setscheduler(0, libc::SCHED_IDLE, &param)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// `SCHED_IDLE` is Linux's.
#[cfg(not(target_os = "linux"))]
fn set_thread_idle_policy() -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "SCHED_IDLE is only set on Linux",
    ))
}

/// Sets the calling thread's nice value. On Linux the nice value belongs to the thread, and
/// `setpriority(PRIO_PROCESS, 0, ..)` changes the caller's only.
#[cfg(target_os = "linux")]
fn set_thread_nice(nice: i32) -> std::io::Result<()> {
    rustix::process::setpriority_process(None, nice).map_err(std::io::Error::from)
}

/// Elsewhere the nice value belongs to the process: lowering it would slow the whole host.
#[cfg(not(target_os = "linux"))]
fn set_thread_nice(_nice: i32) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "per-thread priorities are only set on Linux",
    ))
}

/// The calling thread's nice value.
#[cfg(all(test, target_os = "linux"))]
fn thread_nice() -> std::io::Result<i32> {
    rustix::process::getpriority_process(None).map_err(std::io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demotion_comes_once_after_the_configured_slices() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let mut d = Demotion::new(
            Duration::from_millis(5),
            Duration::from_millis(1),
            rt.handle().clone(),
        );
        assert!((0..4).all(|_| !d.tick()), "not before 5 slices");
        assert!(d.tick(), "at the fifth");
        assert!(d.demoted);
        assert!(!d.tick(), "only once");
        let at_least_one = Demotion::new(
            Duration::ZERO,
            Duration::from_millis(1),
            rt.handle().clone(),
        );
        assert_eq!(at_least_one.after, 1);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn lane_threads_run_at_the_lowest_priority() {
        let host = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        let nice_here = thread_nice().expect("own nice value");
        let lane = Lane::new();
        let demotion = Demotion::new(
            Duration::from_millis(1),
            Duration::from_millis(1),
            host.handle().clone(),
        );
        let signal = demotion.signal();
        let (nice, moved) = host.block_on(async {
            let mut demotion = demotion;
            lane.run(
                async move {
                    // Demoted while "running": the caller moves the rest to the lane.
                    assert!(demotion.tick());
                    tokio::task::yield_now().await;
                    // SAFETY: reads the calling thread's policy; no memory is involved.
                    #[allow(unsafe_code)]
                    let policy = unsafe { libc::sched_getscheduler(0) };
                    (thread_nice().expect("lane thread's nice value"), policy)
                },
                &signal,
            )
            .await
        });
        assert!(moved, "the call moved to the lane");
        let (nice, policy) = nice;
        assert_eq!(nice, LANE_NICE);
        assert_eq!(
            policy,
            libc::SCHED_IDLE,
            "the lane's threads are SCHED_IDLE"
        );
        assert_eq!(
            thread_nice().expect("own nice value"),
            nice_here,
            "the caller's is unchanged"
        );
        assert_eq!(lane.running(), 0);
    }

    #[test]
    fn a_call_that_is_never_demoted_stays_on_the_callers_runtime() {
        let host = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let lane = Lane::new();
        let demotion = Demotion::new(
            Duration::from_millis(50),
            Duration::from_millis(1),
            host.handle().clone(),
        );
        let here = std::thread::current().id();
        let (ran_on, moved) =
            host.block_on(lane.run(async { std::thread::current().id() }, &demotion.signal()));
        assert!(!moved);
        assert_eq!(ran_on, here);
        assert!(lane.runtime.get().is_none(), "no lane was started");
    }
}
