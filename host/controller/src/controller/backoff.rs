//! Per-object error backoff: exponential with jitter and a cap, reset on success.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

/// The first retry waits up to 500 ms: a plugin error caused by a write race or a cache that
/// is a moment behind usually clears by then.
pub(crate) const BASE: Duration = Duration::from_millis(500);
/// Retries are never further apart than 5 minutes, so a fixed problem is noticed within that
/// time even without a change to the object.
pub(crate) const CAP: Duration = Duration::from_secs(300);

/// Failure counts per object.
#[derive(Debug)]
pub(crate) struct Backoffs<K> {
    failures: Mutex<HashMap<K, u32>>,
}

impl<K> Default for Backoffs<K> {
    fn default() -> Self {
        Self {
            failures: Mutex::default(),
        }
    }
}

/// The un-jittered delay after `failures` consecutive failures (1 = first failure).
pub(crate) fn ceiling(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(20);
    BASE.saturating_mul(1 << doublings).min(CAP)
}

impl<K: Hash + Eq + Clone> Backoffs<K> {
    /// Records a failure of `key` and returns how long to wait before retrying it, with the
    /// count of consecutive failures: a random delay in the upper half of [`ceiling`], so that
    /// objects failing together do not retry in step.
    pub(crate) fn failed(&self, key: &K) -> (Duration, u32) {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let n = failures.entry(key.clone()).or_insert(0);
        *n = n.saturating_add(1);
        let ceiling = ceiling(*n);
        (ceiling.mul_f64(0.5 + fastrand::f64() * 0.5), *n)
    }

    /// Forgets `key`'s failures after a success.
    pub(crate) fn succeeded(&self, key: &K) {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap() {
        assert_eq!(ceiling(1), BASE);
        assert_eq!(ceiling(2), BASE * 2);
        assert_eq!(ceiling(4), BASE * 8);
        assert_eq!(ceiling(30), CAP);
        assert_eq!(ceiling(u32::MAX), CAP);
    }

    #[test]
    fn backoff_grows_per_object_and_resets_on_success() {
        let b = Backoffs::default();
        let (d1, n1) = b.failed(&"a");
        let (d2, n2) = b.failed(&"a");
        let (d3, n3) = b.failed(&"a");
        assert_eq!((n1, n2, n3), (1, 2, 3));
        assert!(d1 <= BASE && d1 >= BASE / 2);
        assert!(d2 >= BASE && d2 <= BASE * 2);
        assert!(d3 >= BASE * 2 && d3 <= BASE * 4);
        assert_eq!(b.failed(&"b").1, 1, "other objects keep their own count");
        b.succeeded(&"a");
        assert_eq!(b.failed(&"a").1, 1);
    }
}
