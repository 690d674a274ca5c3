//! The fairness settings of one plugin (`minRequeueAfter`, `objectRateLimit`), validated
//! field by field falling back to `defaults:`, into what the controller uses.

use std::time::Duration;

use super::raw::RawPluginSettings;
use super::units::parse_duration;
use super::{ConfigError, value_error};
use wasmop_controller::controller::throttle::ObjectRate;

/// A requeue-after below 1 s is raised to 1 s. controller-runtime and kube-runtime honour any
/// delay, even 0, because they trust the reconciler; a sandbox host does not: a plugin that
/// requeues after 0 ms ran 8,516 reconciles a second over 10 objects. A requeue is polling
/// for something no watch reports (an external system, a clock), which changes on the scale
/// of seconds; at one poll a second per object the host spends a few hundredths of a core on
/// ten spinning objects, and no plugin needs to poll faster.
pub(crate) const DEFAULT_MIN_REQUEUE_AFTER: Duration = Duration::from_secs(1);

/// Each object may start 10 reconciles at once, then one a second. 10 covers an object's
/// ordinary convergence at once: its first reconcile, the finalizer the host adds, the
/// children it creates or updates echoing back through their watches, a user's follow-up
/// edits. One a second sustained is the same bound as the requeue floor, so a plugin that
/// re-triggers itself through the watch (it writes its own object every time) is held to
/// what a requeuing one gets; triggers meanwhile are merged, and the reconcile that runs
/// sees the latest state, so a busy object lags at most a second and loses nothing.
pub(crate) const DEFAULT_OBJECT_RATE: ObjectRate = ObjectRate {
    burst: 10,
    interval: Duration::from_secs(1),
};

/// The longest floor and refill interval accepted: a longer one would make a plugin's
/// requeues or a busy object's reconciles slower than the default resync (10 minutes).
const MAX_FAIRNESS_INTERVAL: Duration = Duration::from_secs(600);

/// `minRequeueAfter` and `objectRateLimit` (`None`: no rate limit) of the plugin at `at`.
pub(crate) fn fairness(
    at: &str,
    raw: &RawPluginSettings,
    defaults: &RawPluginSettings,
) -> Result<(Duration, Option<ObjectRate>), ConfigError> {
    let floor = match raw
        .min_requeue_after
        .as_ref()
        .or(defaults.min_requeue_after.as_ref())
    {
        None => DEFAULT_MIN_REQUEUE_AFTER,
        Some(t) => bounded(&format!("{at}.minRequeueAfter"), t)?,
    };
    let own = raw.object_rate_limit.as_ref();
    let default = defaults.object_rate_limit.as_ref();
    let burst = own
        .and_then(|r| r.burst)
        .or_else(|| default.and_then(|r| r.burst));
    let interval = own
        .and_then(|r| r.interval.as_ref())
        .or_else(|| default.and_then(|r| r.interval.as_ref()));
    let interval = match interval {
        None => DEFAULT_OBJECT_RATE.interval,
        Some(t) => bounded(&format!("{at}.objectRateLimit.interval"), t)?,
    };
    let burst = burst.unwrap_or(DEFAULT_OBJECT_RATE.burst);
    if burst == 0 {
        return Err(value_error(
            format!("{at}.objectRateLimit.burst"),
            "must be at least 1",
        ));
    }
    // `interval: 0s` turns the limit off.
    let rate = (!interval.is_zero()).then_some(ObjectRate { burst, interval });
    Ok((floor, rate))
}

fn bounded(field: &str, text: &str) -> Result<Duration, ConfigError> {
    let d = parse_duration(text).map_err(|source| ConfigError::Unit {
        field: field.to_owned(),
        source,
    })?;
    if d > MAX_FAIRNESS_INTERVAL {
        return Err(value_error(field, format!("`{text}` is longer than 10m")));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::Config;
    use wasmop_core::plugin::PluginName;

    use super::*;

    fn parse(yaml: &str) -> Result<Config, ConfigError> {
        let raw = Config::parse_raw(yaml, Path::new("wasmop.yaml"))?;
        Config::from_raw(raw, None)
    }

    fn name(n: &str) -> PluginName {
        PluginName::new(n).expect("name")
    }

    #[test]
    fn defaults_are_a_one_second_floor_and_ten_then_one_a_second() {
        let c = parse("").expect("valid");
        let s = c.plugin(&name("any"));
        assert_eq!(s.min_requeue_after, DEFAULT_MIN_REQUEUE_AFTER);
        assert_eq!(s.object_rate, Some(DEFAULT_OBJECT_RATE));
    }

    #[test]
    fn plugin_entries_override_defaults_field_by_field_and_zero_turns_the_limit_off() {
        let c = parse(
            "defaults: {minRequeueAfter: 200ms, objectRateLimit: {burst: 3}}\n\
             plugins:\n  db: {objectRateLimit: {interval: 5s}}\n  off: {minRequeueAfter: 0s, objectRateLimit: {interval: 0s}}\n",
        )
        .expect("valid");
        let db = c.plugin(&name("db"));
        assert_eq!(db.min_requeue_after, Duration::from_millis(200));
        assert_eq!(
            db.object_rate,
            Some(ObjectRate {
                burst: 3,
                interval: Duration::from_secs(5)
            })
        );
        let off = c.plugin(&name("off"));
        assert_eq!(
            (off.min_requeue_after, off.object_rate),
            (Duration::ZERO, None)
        );
    }

    #[test]
    fn bad_values_name_their_field() {
        for (yaml, field) in [
            (
                "defaults: {minRequeueAfter: soon}\n",
                "defaults.minRequeueAfter",
            ),
            (
                "plugins:\n  db: {minRequeueAfter: 1h}\n",
                "plugins.db.minRequeueAfter",
            ),
            (
                "plugins:\n  db: {objectRateLimit: {burst: 0}}\n",
                "plugins.db.objectRateLimit.burst",
            ),
            (
                "plugins:\n  db: {objectRateLimit: {interval: 2}}\n",
                "plugins.db.objectRateLimit.interval",
            ),
        ] {
            let error = parse(yaml).expect_err(yaml).to_string();
            assert!(error.contains(&format!("`{field}`")), "{yaml}: {error}");
        }
        let unknown = parse("defaults: {objectRateLimit: {rate: 1}}\n").expect_err("unknown key");
        assert!(format!("{:#}", anyhow::Error::from(unknown)).contains("rate"));
    }
}
