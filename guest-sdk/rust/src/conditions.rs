//! Status conditions (`metav1.Condition`) the way Kubernetes API conventions want them: one
//! per type, `lastTransitionTime` changed only when the status changes, `observedGeneration`
//! recording which spec the condition describes.

use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

/// The status of a condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConditionStatus {
    /// `"True"`.
    True,
    /// `"False"`.
    False,
    /// `"Unknown"`.
    Unknown,
}

impl ConditionStatus {
    /// The string Kubernetes uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(value: bool) -> Self {
        if value { Self::True } else { Self::False }
    }
}

/// A condition of `type_` with `status`, `reason` (CamelCase) and `message`, describing
/// `observed_generation` of the object (pass its `metadata.generation`), transitioning now.
pub fn condition(
    type_: &str,
    status: impl Into<ConditionStatus>,
    reason: &str,
    message: impl Into<String>,
    observed_generation: Option<i64>,
) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: status.into().as_str().to_owned(),
        reason: reason.to_owned(),
        message: message.into(),
        observed_generation,
        last_transition_time: now(),
    }
}

/// Puts `new` into `conditions`, replacing the condition of the same type. When the status
/// is unchanged, the old `lastTransitionTime` is kept. Returns whether anything but the time
/// changed, so a plugin can skip a status write that would change nothing.
///
/// ```
/// use wasmop_guest::{condition, set_condition};
///
/// let mut conditions = Vec::new();
/// assert!(set_condition(&mut conditions, condition("Ready", true, "Applied", "ok", Some(1))));
/// let first = conditions[0].last_transition_time.clone();
/// // Same status for a newer generation: recorded, but the transition time stays.
/// assert!(set_condition(&mut conditions, condition("Ready", true, "Applied", "ok", Some(2))));
/// assert_eq!(conditions[0].last_transition_time, first);
/// assert_eq!(conditions[0].observed_generation, Some(2));
/// assert!(!set_condition(&mut conditions, condition("Ready", true, "Applied", "ok", Some(2))));
/// ```
pub fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(old) => {
            if old.status == new.status {
                new.last_transition_time = old.last_transition_time.clone();
            }
            let changed = *old != new;
            *old = new;
            changed
        }
        None => {
            conditions.push(new);
            true
        }
    }
}

/// The condition of `type_`, if present.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Now, in whole seconds as Kubernetes stores times. A clock before 1970 (which WASI hosts do
/// not give) reads as the epoch rather than failing a reconcile.
fn now() -> Time {
    let seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    Time(Timestamp::from_second(seconds).unwrap_or(Timestamp::UNIX_EPOCH))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).expect("valid"))
    }

    #[test]
    fn status_change_moves_the_transition_time() {
        let mut conditions = vec![Condition {
            last_transition_time: at(100),
            ..condition("Ready", false, "Pending", "", Some(1))
        }];
        let changed = set_condition(
            &mut conditions,
            condition("Ready", true, "Applied", "", Some(1)),
        );
        assert!(changed);
        assert_ne!(conditions[0].last_transition_time, at(100));
        assert_eq!(conditions[0].status, "True");
    }

    #[test]
    fn conditions_of_other_types_are_kept() {
        let mut conditions = vec![condition("Degraded", false, "AsExpected", "", None)];
        set_condition(
            &mut conditions,
            condition("Ready", ConditionStatus::Unknown, "Starting", "", None),
        );
        assert_eq!(conditions.len(), 2);
        assert_eq!(
            find_condition(&conditions, "Ready").map(|c| c.status.as_str()),
            Some("Unknown")
        );
        assert_eq!(
            find_condition(&conditions, "Degraded").map(|c| c.status.as_str()),
            Some("False")
        );
    }
}
