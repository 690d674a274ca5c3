//! The per-object rate limit of the work loop ([`super::runner`]): a token bucket per object,
//! kept as the generic cell rate algorithm's one "theoretical arrival time" per object.
//!
//! Why a bucket per object, and not controller-runtime's rate limiter: controller-runtime
//! (and kube-runtime) limit only retries after errors; a watch event, or a requeue after a
//! delay, is never limited. So a plugin that writes its own primary object on every
//! reconcile (with `reconcile-on-metadata-change`) re-triggers itself through the watch as
//! fast as the API server answers, and one that requeues after 0 ms spins; the sandbox
//! host must bound both. A bucket per object bounds each object on its own, whatever
//! triggers it, and lets a burst through at once, so the first reconcile of an object and
//! the short chain of events of its convergence (its finalizer, the children it creates
//! echoing back) never wait.
//!
//! # Guarantees
//! - With `burst` b and `interval` t, an object starts at most b reconciles at once and on
//!   average one per t after that: over any window of length w, at most b + w / t.
//! - An object whose bucket is empty is told when its next token comes; it is never dropped
//!   (the work loop makes it wait until then, merging the triggers meanwhile: reconciles are
//!   level-triggered, so the one that runs sees the latest state).
//! - Memory: one entry per object reconciled within the last b × t; full buckets are swept.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

/// The per-object rate limit: `burst` reconciles at once, then one per `interval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectRate {
    /// Reconciles an object may start at once (at least 1).
    pub burst: u32,
    /// The time that refills one token (more than zero).
    pub interval: Duration,
}

/// The token buckets of one plugin's objects.
#[derive(Debug)]
pub(crate) struct Throttle<K> {
    rate: ObjectRate,
    /// When each object's bucket is full again (its theoretical arrival time); an object
    /// without an entry has a full bucket.
    full_at: HashMap<K, Instant>,
    /// Takes since the last sweep of full buckets.
    since_sweep: usize,
    /// Takes after which the next sweep runs: as many as there were entries after the last
    /// one, so each sweep's pass is paid for by as many takes.
    sweep_after: usize,
}

/// Sweep full buckets at least this rarely, so a plugin with few objects does not sweep on
/// every take.
const SWEEP_MIN: usize = 64;

impl<K: Hash + Eq + Clone> Throttle<K> {
    /// Buckets for `rate`, all full.
    pub(crate) fn new(rate: ObjectRate) -> Self {
        Self {
            rate,
            full_at: HashMap::new(),
            since_sweep: 0,
            sweep_after: SWEEP_MIN,
        }
    }

    /// Takes a token of `key`'s bucket at `now`: `Ok` when it had one, else `Err` with when
    /// its next token comes.
    pub(crate) fn take(&mut self, key: &K, now: Instant) -> Result<(), Instant> {
        if let Some(next) = self.next_token(key, now) {
            return Err(next);
        }
        let full_at = self.full_at.get(key).copied().unwrap_or(now).max(now);
        self.full_at
            .insert(key.clone(), full_at + self.rate.interval);
        self.since_sweep += 1;
        if self.since_sweep >= self.sweep_after {
            self.full_at.retain(|_, at| *at > now);
            self.since_sweep = 0;
            self.sweep_after = self.full_at.len().max(SWEEP_MIN);
        }
        Ok(())
    }

    /// When `key`'s next token comes, if its bucket is empty at `now` (`None`: it has one).
    pub(crate) fn next_token(&self, key: &K, now: Instant) -> Option<Instant> {
        let tolerance = self.rate.interval * self.rate.burst.saturating_sub(1);
        let full_at = self.full_at.get(key).copied()?.max(now);
        // `full_at - now` is the time the tokens already taken need to come back.
        (full_at - now > tolerance).then(|| full_at - tolerance)
    }

    /// Objects with a bucket that is not full (for tests).
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.full_at.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATE: ObjectRate = ObjectRate {
        burst: 3,
        interval: Duration::from_secs(1),
    };

    #[tokio::test(start_paused = true)]
    async fn a_burst_passes_at_once_then_one_token_per_interval() {
        let mut t = Throttle::new(RATE);
        let start = Instant::now();
        for _ in 0..3 {
            assert_eq!(t.take(&"a", start), Ok(()));
        }
        // The fourth waits for the first token to come back.
        assert_eq!(t.take(&"a", start), Err(start + Duration::from_secs(1)));
        assert_eq!(
            t.take(&"b", start),
            Ok(()),
            "other objects have their own bucket"
        );
        let later = start + Duration::from_secs(1);
        assert_eq!(t.take(&"a", later), Ok(()));
        assert_eq!(t.take(&"a", later), Err(later + Duration::from_secs(1)));
    }

    #[tokio::test(start_paused = true)]
    async fn over_any_window_an_object_gets_at_most_burst_plus_window_over_interval() {
        let mut t = Throttle::new(RATE);
        let start = Instant::now();
        // Ask every 10 ms for 20 s.
        let granted = (0..2_000)
            .filter(|i| {
                t.take(&"spin", start + Duration::from_millis(10 * i))
                    .is_ok()
            })
            .count();
        // 3 at once, then one per second for the remaining 20 s.
        assert!((20..=3 + 20).contains(&granted), "{granted}");
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_object_gets_its_whole_burst_back_and_is_forgotten() {
        let mut t = Throttle::new(RATE);
        let start = Instant::now();
        for i in 0..100u32 {
            assert_eq!(t.take(&i, start), Ok(()));
        }
        let idle = start + Duration::from_secs(10);
        for _ in 0..3 {
            assert_eq!(t.take(&0, idle), Ok(()));
        }
        for i in 1..SWEEP_MIN as u32 {
            assert_eq!(t.take(&(1000 + i), idle), Ok(()));
        }
        assert!(
            t.tracked() < 100,
            "full buckets were swept: {}",
            t.tracked()
        );
    }
}
