//! The graceful shutdown sequence of `wasmop run`, in controller-runtime's order: stop taking
//! work, let running reconciles finish within the timeout (then cancel the rest), and only
//! then release the leader Lease, so a standby never starts while this host still writes.
//!
//! # Guarantees
//! - [`drain`] returns within `timeout` (plus the time to abort what is left): a reconcile
//!   stuck past it is cancelled at its next await point.
//! - The release signal is sent after the drain, never before.
//! - A second SIGINT/SIGTERM during the sequence exits the process at once
//!   ([`exit_on_second_signal`]).

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use wasmop_controller::leader::LeaderError;

/// Exit code of a process ended by a second signal during shutdown (128 + SIGINT, the
/// shell's convention for "interrupted").
pub(crate) const SECOND_SIGNAL_EXIT: i32 = 130;

/// How the drain went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Drained {
    /// Every task finished in time.
    Finished,
    /// The timeout passed; this many tasks were cancelled.
    TimedOut(usize),
}

/// Waits up to `timeout` for every task of `tasks` to finish, then aborts the rest.
pub(crate) async fn drain(tasks: &mut JoinSet<()>, timeout: Duration) -> Drained {
    let finished = tokio::time::timeout(timeout, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if finished.is_ok() {
        return Drained::Finished;
    }
    let left = tasks.len();
    tasks.shutdown().await;
    Drained::TimedOut(left)
}

/// The whole sequence after a shutdown signal: `stop` (controllers stop taking work), drain
/// `tasks` within `timeout`, then `release` the Lease and wait for the elector to finish.
pub(crate) async fn sequence(
    stop: &watch::Sender<bool>,
    tasks: &mut JoinSet<()>,
    timeout: Duration,
    release: &watch::Sender<bool>,
    election: Option<JoinHandle<Result<(), LeaderError>>>,
) -> Drained {
    tracing::info!(
        timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        "shutting down: no new reconciles, waiting for running ones"
    );
    let _ = stop.send(true);
    let drained = drain(tasks, timeout).await;
    match drained {
        Drained::Finished => tracing::info!("every running reconcile finished"),
        Drained::TimedOut(left) => tracing::warn!(
            controllers = left,
            "reconciles still running after the shutdown timeout were cancelled"
        ),
    }
    let _ = release.send(true);
    if let Some(election) = election {
        match election.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                tracing::warn!(error = %wasmop_core::chain(&error), "leader election ended with an error")
            }
            Err(error) => tracing::warn!(%error, "the leader election task failed"),
        }
    }
    tracing::info!("shutdown complete");
    drained
}

/// Waits for SIGINT or SIGTERM.
pub(crate) async fn signal() -> std::io::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r,
        _ = term.recv() => Ok(()),
    }
}

/// After the first signal: a second one ends the process at once, with
/// [`SECOND_SIGNAL_EXIT`], without waiting for reconciles or releasing the Lease. The
/// listeners are registered before this returns, so a signal sent after it is never missed.
pub(crate) fn exit_on_second_signal() -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        tracing::warn!("second shutdown signal: exiting at once");
        std::process::exit(SECOND_SIGNAL_EXIT);
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn running_work_finishes_before_the_lease_is_released() {
        let (stop, stopped) = watch::channel(false);
        let (release, mut released) = watch::channel(false);
        let finished = Arc::new(AtomicBool::new(false));
        let mut tasks = JoinSet::new();
        let (f, mut s) = (finished.clone(), stopped.clone());
        tasks.spawn(async move {
            let _ = s.wait_for(|x| *x).await;
            // An in-flight reconcile that needs 5 s more after the signal.
            tokio::time::sleep(Duration::from_secs(5)).await;
            f.store(true, Ordering::SeqCst);
        });
        let f = finished.clone();
        let election = tokio::spawn(async move {
            let _ = released.wait_for(|r| *r).await;
            assert!(
                f.load(Ordering::SeqCst),
                "released before the drain finished"
            );
            Ok(())
        });
        let drained = sequence(
            &stop,
            &mut tasks,
            Duration::from_secs(30),
            &release,
            Some(election),
        )
        .await;
        assert_eq!(drained, Drained::Finished);
        assert!(finished.load(Ordering::SeqCst));
    }

    #[tokio::test(start_paused = true)]
    async fn work_past_the_timeout_is_cancelled_and_the_lease_still_released() {
        let (stop, _) = watch::channel(false);
        let (release, released) = watch::channel(false);
        let mut tasks = JoinSet::new();
        tasks.spawn(std::future::pending::<()>());
        tasks.spawn(async {});
        let started = tokio::time::Instant::now();
        let drained = sequence(&stop, &mut tasks, Duration::from_secs(30), &release, None).await;
        assert_eq!(drained, Drained::TimedOut(1));
        assert!(started.elapsed() >= Duration::from_secs(30));
        assert!(started.elapsed() < Duration::from_secs(31));
        assert!(*released.borrow());
        assert!(tasks.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn work_that_stops_on_the_signal_ends_the_drain_early() {
        let (stop, stopped) = watch::channel(false);
        let (release, _) = watch::channel(false);
        let mut tasks = JoinSet::new();
        let mut s = stopped.clone();
        tasks.spawn(async move {
            let _ = s.wait_for(|x| *x).await;
        });
        let started = tokio::time::Instant::now();
        let drained = sequence(&stop, &mut tasks, Duration::from_secs(30), &release, None).await;
        assert_eq!(drained, Drained::Finished);
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}
