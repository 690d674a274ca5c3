//! Leader election over a `coordination.k8s.io/v1` Lease, with client-go's algorithm: try to
//! acquire every retry period; once held, renew every retry period; give up when no renewal
//! succeeded within the renew deadline. Every write is a `create` or a `replace` carrying the
//! `resourceVersion` that was read, so two hosts racing for the Lease cannot both win (the
//! loser gets a conflict) — never a blind patch.
//!
//! A holder's lease counts as expired when its record has not changed for `leaseDuration`
//! by *this* process's clock (client-go's "observed time"), so clock skew between nodes does
//! not matter.
//!
//! # Guarantees
//! - [`run`] reports leadership on a `watch` channel: `true` from the moment the Lease is
//!   ours, `false` the moment renewal fails past the deadline (and [`run`] returns
//!   [`LeaderError::Lost`]; the host then exits non-zero, as controller-runtime does, so
//!   nothing reconciles without the lease).
//! - After the release signal, a held Lease is released (holder cleared) so a standby takes
//!   over at its next retry instead of waiting for the lease to expire.
//!
//! # Cancellation
//! Dropping [`run`]'s future stops renewing without releasing; the lease then expires.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::metrics::Metrics;

/// The Lease that leader election holds unless the config names another.
pub const DEFAULT_LEASE_NAME: &str = "wasmop-leader";
/// controller-runtime's defaults: a standby takes over at most 15 s after the leader
/// disappears; the leader gives up after 10 s without a successful renewal (before its lease
/// can have expired for the others); each try is 2 s apart.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// See [`DEFAULT_LEASE_DURATION`].
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// See [`DEFAULT_LEASE_DURATION`].
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

/// Leader election settings, validated: `lease_duration > renew_deadline > retry_period > 0`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElection {
    /// The Lease's name.
    pub lease_name: String,
    /// The Lease's namespace.
    pub lease_namespace: String,
    /// How long a lease is valid after its last renewal.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up leadership.
    pub renew_deadline: Duration,
    /// How often acquiring or renewing is tried.
    pub retry_period: Duration,
}

/// Why leader election failed.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// Reading the Lease failed.
    #[error("cannot read the Lease {namespace}/{name}")]
    Get {
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Creating or replacing the Lease failed (other than losing a race for it).
    #[error("cannot write the Lease {namespace}/{name}")]
    Write {
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// No renewal succeeded within the renew deadline: another host may take over now.
    #[error(
        "leader election lost: the Lease {namespace}/{name} was not renewed within {} ms",
        .deadline.as_millis()
    )]
    Lost {
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        name: String,
        /// The renew deadline.
        deadline: Duration,
    },
}

/// This host's identity in the Lease: `$POD_NAME` when set (unique in a Deployment), else
/// the hostname and a random suffix (two hosts on one machine must differ).
pub async fn identity() -> String {
    if let Some(pod) = std::env::var("POD_NAME").ok().filter(|p| !p.is_empty()) {
        return pod;
    }
    let host = match tokio::fs::read_to_string("/proc/sys/kernel/hostname").await {
        Ok(h) if !h.trim().is_empty() => h.trim().to_owned(),
        _ => std::env::var("HOSTNAME").unwrap_or_else(|_| "wasmop".to_owned()),
    };
    let suffix: String = std::iter::repeat_with(fastrand::alphanumeric)
        .take(8)
        .collect();
    format!("{host}_{}", suffix.to_lowercase())
}

/// Whether `identity` may claim a Lease whose record is `spec`, given that the record was
/// first seen unchanged at `observed_at`: it may when the Lease has no holder, is its own,
/// or the holder has not renewed for the Lease's duration by this process's clock.
pub(crate) fn may_claim(
    spec: &LeaseSpec,
    identity: &str,
    observed_at: Instant,
    now: Instant,
    fallback_duration: Duration,
) -> bool {
    let holder = spec.holder_identity.as_deref().unwrap_or("");
    if holder.is_empty() || holder == identity {
        return true;
    }
    let duration = spec
        .lease_duration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .map_or(fallback_duration, Duration::from_secs);
    observed_at + duration <= now
}

/// The record `identity` writes to take or renew a Lease whose record is `old`: a renewal
/// keeps the acquire time and transition count; a takeover starts them afresh.
pub(crate) fn claimed(
    old: Option<&LeaseSpec>,
    identity: &str,
    duration: Duration,
    now: Timestamp,
) -> LeaseSpec {
    let seconds = i32::try_from(duration.as_secs()).unwrap_or(i32::MAX);
    match old {
        Some(old) if old.holder_identity.as_deref() == Some(identity) => LeaseSpec {
            renew_time: Some(MicroTime(now)),
            lease_duration_seconds: Some(seconds),
            ..old.clone()
        },
        _ => {
            let had_holder =
                old.is_some_and(|o| o.holder_identity.as_deref().is_some_and(|h| !h.is_empty()));
            let transitions = old.and_then(|o| o.lease_transitions).unwrap_or(0);
            LeaseSpec {
                holder_identity: Some(identity.to_owned()),
                acquire_time: Some(MicroTime(now)),
                renew_time: Some(MicroTime(now)),
                lease_duration_seconds: Some(seconds),
                lease_transitions: Some(if had_holder {
                    transitions + 1
                } else {
                    transitions
                }),
                ..LeaseSpec::default()
            }
        }
    }
}

/// The record that releases a Lease (client-go's): no holder, and a one-second duration so
/// that even an elector that ignores the empty holder waits no longer than that.
pub(crate) fn released(old: &LeaseSpec, now: Timestamp) -> LeaseSpec {
    LeaseSpec {
        holder_identity: None,
        acquire_time: Some(MicroTime(now)),
        renew_time: Some(MicroTime(now)),
        lease_duration_seconds: Some(1),
        lease_transitions: old.lease_transitions,
        ..LeaseSpec::default()
    }
}

/// One host's side of the election.
pub struct Elector {
    api: Api<Lease>,
    settings: LeaderElection,
    identity: String,
    /// The last record read and when it was first seen (this process's clock).
    observed: Option<(LeaseSpec, Instant)>,
}

impl Elector {
    /// An elector for the configured Lease under `identity`.
    pub fn new(client: Client, settings: LeaderElection, identity: String) -> Self {
        Self {
            api: Api::namespaced(client, &settings.lease_namespace),
            settings,
            identity,
            observed: None,
        }
    }

    /// This host's identity.
    pub(crate) fn identity(&self) -> &str {
        &self.identity
    }

    fn get_error(&self, source: kube::Error) -> LeaderError {
        LeaderError::Get {
            namespace: self.settings.lease_namespace.clone(),
            name: self.settings.lease_name.clone(),
            source,
        }
    }

    fn write_error(&self, source: kube::Error) -> LeaderError {
        LeaderError::Write {
            namespace: self.settings.lease_namespace.clone(),
            name: self.settings.lease_name.clone(),
            source,
        }
    }

    fn observe(&mut self, spec: &LeaseSpec, now: Instant) -> Instant {
        match &self.observed {
            Some((seen, at)) if seen == spec => *at,
            _ => {
                self.observed = Some((spec.clone(), now));
                now
            }
        }
    }

    /// One try: creates the Lease, takes it over, or renews it. `Ok(false)` when another
    /// host holds it or won a race for it.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, LeaderError> {
        let name = self.settings.lease_name.clone();
        let now = Instant::now();
        let current = self
            .api
            .get_opt(&name)
            .await
            .map_err(|e| self.get_error(e))?;
        let Some(mut lease) = current else {
            let spec = claimed(
                None,
                &self.identity,
                self.settings.lease_duration,
                Timestamp::now(),
            );
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name),
                    namespace: Some(self.settings.lease_namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec.clone()),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => {
                    self.observed = Some((spec, now));
                    Ok(true)
                }
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(self.write_error(e)),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let observed_at = self.observe(&spec, now);
        if !may_claim(
            &spec,
            &self.identity,
            observed_at,
            now,
            self.settings.lease_duration,
        ) {
            return Ok(false);
        }
        let new = claimed(
            Some(&spec),
            &self.identity,
            self.settings.lease_duration,
            Timestamp::now(),
        );
        lease.spec = Some(new.clone());
        // `replace` sends the resourceVersion read above: a concurrent writer makes this fail
        // with 409 instead of being overwritten.
        match self
            .api
            .replace(&name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => {
                self.observed = Some((new, now));
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(self.write_error(e)),
        }
    }

    /// Clears the holder if the Lease is still ours.
    pub async fn release(&mut self) -> Result<(), LeaderError> {
        let name = self.settings.lease_name.clone();
        let Some(mut lease) = self
            .api
            .get_opt(&name)
            .await
            .map_err(|e| self.get_error(e))?
        else {
            return Ok(());
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        lease.spec = Some(released(&spec, Timestamp::now()));
        self.api
            .replace(&name, &PostParams::default(), &lease)
            .await
            .map_err(|e| self.write_error(e))?;
        Ok(())
    }
}

/// `period` with up to 20 % added at random (client-go's jitter factor 1.2), so that standbys
/// do not all try at the same instant.
fn jittered(period: Duration) -> Duration {
    period + period.mul_f64(fastrand::f64() * 0.2)
}

/// Takes part in the election until `release` becomes `true`: acquires, then renews, sending
/// the leadership state on `leading`. Returns `Ok` after releasing (or when released before
/// ever leading), [`LeaderError::Lost`] when renewal failed past the deadline.
pub async fn run(
    mut elector: Elector,
    leading: watch::Sender<bool>,
    mut release: watch::Receiver<bool>,
    metrics: Metrics,
) -> Result<(), LeaderError> {
    let settings = elector.settings.clone();
    let lease = format!("{}/{}", settings.lease_namespace, settings.lease_name);
    metrics.leader(&settings.lease_name, false);
    tracing::info!(lease = %lease, identity = %elector.identity(), "waiting to acquire the leader lease");
    loop {
        match tokio::time::timeout(settings.renew_deadline, elector.try_acquire_or_renew()).await {
            Ok(Ok(true)) => break,
            Ok(Ok(false)) => {}
            Ok(Err(error)) => {
                tracing::warn!(lease = %lease, error = %wasmop_core::chain(&error), "cannot acquire the leader lease; retrying")
            }
            Err(_) => {
                tracing::warn!(lease = %lease, "acquiring the leader lease timed out; retrying")
            }
        }
        tokio::select! {
            () = tokio::time::sleep(jittered(settings.retry_period)) => {}
            _ = release.wait_for(|r| *r) => return Ok(()),
        }
    }
    let _ = leading.send(true);
    metrics.leader(&settings.lease_name, true);
    tracing::info!(lease = %lease, identity = %elector.identity(), "became the leader");
    let mut deadline = Instant::now() + settings.renew_deadline;
    loop {
        tokio::select! {
            () = tokio::time::sleep(settings.retry_period) => {}
            _ = release.wait_for(|r| *r) => break,
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(remaining, elector.try_acquire_or_renew()).await {
            Ok(Ok(true)) => deadline = Instant::now() + settings.renew_deadline,
            Ok(Ok(false)) => {
                tracing::warn!(lease = %lease, "the leader lease is held by another host")
            }
            Ok(Err(error)) => {
                tracing::warn!(lease = %lease, error = %wasmop_core::chain(&error), "cannot renew the leader lease")
            }
            Err(_) => {}
        }
        if Instant::now() >= deadline {
            let _ = leading.send(false);
            metrics.leader(&settings.lease_name, false);
            return Err(LeaderError::Lost {
                namespace: settings.lease_namespace,
                name: settings.lease_name,
                deadline: settings.renew_deadline,
            });
        }
    }
    let _ = leading.send(false);
    metrics.leader(&settings.lease_name, false);
    match tokio::time::timeout(settings.renew_deadline, elector.release()).await {
        Ok(Ok(())) => tracing::info!(lease = %lease, "released the leader lease"),
        Ok(Err(error)) => {
            tracing::warn!(lease = %lease, error = %wasmop_core::chain(&error), "cannot release the leader lease; it expires instead")
        }
        Err(_) => {
            tracing::warn!(lease = %lease, "releasing the leader lease timed out; it expires instead")
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_by(holder: &str, seconds: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(seconds),
            lease_transitions: Some(3),
            acquire_time: Some(MicroTime(Timestamp::UNIX_EPOCH)),
            renew_time: Some(MicroTime(Timestamp::UNIX_EPOCH)),
            ..LeaseSpec::default()
        }
    }

    const D: Duration = Duration::from_secs(15);

    #[test]
    fn another_holders_lease_is_respected_until_it_has_not_changed_for_its_duration() {
        let t0 = Instant::now();
        let spec = held_by("a", 15);
        assert!(!may_claim(&spec, "b", t0, t0, D));
        assert!(!may_claim(&spec, "b", t0, t0 + Duration::from_secs(14), D));
        assert!(may_claim(&spec, "b", t0, t0 + Duration::from_secs(15), D));
    }

    #[test]
    fn the_records_own_duration_decides_expiry_not_ours() {
        let t0 = Instant::now();
        let spec = held_by("a", 60);
        assert!(!may_claim(&spec, "b", t0, t0 + Duration::from_secs(30), D));
    }

    #[test]
    fn a_free_or_own_lease_may_be_claimed_at_once() {
        let t0 = Instant::now();
        assert!(may_claim(&LeaseSpec::default(), "b", t0, t0, D));
        assert!(may_claim(
            &released(&held_by("a", 15), Timestamp::now()),
            "b",
            t0,
            t0,
            D
        ));
        assert!(may_claim(&held_by("b", 15), "b", t0, t0, D));
    }

    #[test]
    fn renewing_keeps_acquire_time_and_transitions() {
        let old = held_by("a", 15);
        let now = Timestamp::now();
        let new = claimed(Some(&old), "a", D, now);
        assert_eq!(new.acquire_time, old.acquire_time);
        assert_eq!(new.lease_transitions, Some(3));
        assert_eq!(new.renew_time, Some(MicroTime(now)));
    }

    #[test]
    fn taking_over_counts_a_transition_and_restarts_acquire_time() {
        let now = Timestamp::now();
        let new = claimed(Some(&held_by("a", 15)), "b", D, now);
        assert_eq!(new.holder_identity.as_deref(), Some("b"));
        assert_eq!(new.lease_transitions, Some(4));
        assert_eq!(new.acquire_time, Some(MicroTime(now)));
        assert_eq!(new.lease_duration_seconds, Some(15));
        let first = claimed(None, "b", D, now);
        assert_eq!(first.lease_transitions, Some(0));
    }

    #[test]
    fn releasing_clears_the_holder_and_keeps_the_transition_count() {
        let r = released(&held_by("a", 15), Timestamp::now());
        assert_eq!(r.holder_identity, None);
        assert_eq!(r.lease_transitions, Some(3));
        assert_eq!(r.lease_duration_seconds, Some(1));
    }

    #[test]
    fn jitter_stays_within_a_fifth_of_the_period() {
        for _ in 0..100 {
            let j = jittered(Duration::from_secs(2));
            assert!(j >= Duration::from_secs(2) && j <= Duration::from_millis(2400));
        }
    }

    #[tokio::test]
    async fn identity_is_unique_per_process_without_pod_name() {
        if std::env::var("POD_NAME").is_ok() {
            return;
        }
        assert_ne!(identity().await, identity().await);
    }
}
