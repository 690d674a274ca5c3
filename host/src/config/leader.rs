//! `leaderElection`: which Lease, and client-go's three timings, validated so that a
//! configuration that would allow two leaders at once is refused at start.

use super::fields::duration_or;
use super::raw::RawLeaderElection;
use super::{ConfigError, value_error};
use wasmop_controller::leader::{
    DEFAULT_LEASE_DURATION, DEFAULT_LEASE_NAME, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD,
    LeaderElection,
};
use wasmop_core::plugin::PluginName;

/// Validates the leader election settings, as client-go does: the leader must give up
/// (renew deadline) before its lease can expire for the others (lease duration), and must be
/// able to try more than once within the deadline.
pub(super) fn validate(
    raw: &RawLeaderElection,
    namespace: &str,
) -> Result<LeaderElection, ConfigError> {
    let lease_name = raw
        .lease_name
        .clone()
        .unwrap_or_else(|| DEFAULT_LEASE_NAME.to_owned());
    if PluginName::new(lease_name.clone()).is_err() {
        return Err(value_error(
            "leaderElection.leaseName",
            format!("`{lease_name}` is not a Lease name (lowercase letters, digits and `-`)"),
        ));
    }
    let lease_namespace = raw
        .lease_namespace
        .clone()
        .unwrap_or_else(|| namespace.to_owned());
    if PluginName::new(lease_namespace.clone()).is_err() {
        return Err(value_error(
            "leaderElection.leaseNamespace",
            format!("`{lease_namespace}` is not a namespace name"),
        ));
    }
    let lease_duration = duration_or(
        "leaderElection.leaseDuration",
        raw.lease_duration.as_deref(),
        DEFAULT_LEASE_DURATION,
    )?;
    let renew_deadline = duration_or(
        "leaderElection.renewDeadline",
        raw.renew_deadline.as_deref(),
        DEFAULT_RENEW_DEADLINE,
    )?;
    let retry_period = duration_or(
        "leaderElection.retryPeriod",
        raw.retry_period.as_deref(),
        DEFAULT_RETRY_PERIOD,
    )?;
    if lease_duration.as_secs() < 1 || lease_duration.subsec_millis() != 0 {
        return Err(value_error(
            "leaderElection.leaseDuration",
            "must be a whole number of seconds, at least 1s (a Lease counts in seconds)",
        ));
    }
    if retry_period.is_zero() {
        return Err(value_error(
            "leaderElection.retryPeriod",
            "must be more than 0s",
        ));
    }
    if renew_deadline >= lease_duration {
        return Err(value_error(
            "leaderElection.renewDeadline",
            format!(
                "{} ms is not shorter than leaseDuration ({} ms): a leader could still act after                  its lease expired",
                renew_deadline.as_millis(),
                lease_duration.as_millis()
            ),
        ));
    }
    // client-go's rule: the deadline must leave room for more than one jittered retry.
    if renew_deadline.as_millis() * 10 <= retry_period.as_millis() * 12 {
        return Err(value_error(
            "leaderElection.retryPeriod",
            format!(
                "{} ms leaves no room for a second try within renewDeadline ({} ms); make it                  shorter than renewDeadline / 1.2",
                retry_period.as_millis(),
                renew_deadline.as_millis()
            ),
        ));
    }
    Ok(LeaderElection {
        lease_name,
        lease_namespace,
        lease_duration,
        renew_deadline,
        retry_period,
    })
}
