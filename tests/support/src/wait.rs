//! Waiting for an object to reach a condition, with a failure message that shows what was
//! last seen, so a test that times out says why.

use std::fmt::Debug;
use std::time::Duration;

use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// How often the object is read again: fast enough that tests do not idle, slow enough that a
/// few waiting tests do not load the apiserver of a 2-core machine.
const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// Errors of waiting.
///
/// `Debug` shows the message as `Display` does, since a test that returns this error prints it
/// with `Debug`, and the last observed object is only readable with its line breaks.
#[derive(thiserror::Error)]
pub enum WaitError {
    /// The condition did not hold before the timeout.
    #[error(
        "timed out after {timeout:?} waiting for {kind} {name} {what}; last observed:\n{last_observed}"
    )]
    TimedOut {
        /// What was awaited, as the caller described it.
        what: String,
        /// The object's kind.
        kind: String,
        /// The object's name.
        name: String,
        /// How long it waited.
        timeout: Duration,
        /// The object as last read (YAML), `absent`, or the last read error.
        last_observed: String,
    },
}

/// Reads `name` through `api` until `condition` holds for it, and returns it (`None` when the
/// condition held for an absent object, e.g. one awaited to be deleted).
///
/// `what` describes the awaited state for the failure message, e.g. `"to be deleted"`.
///
/// # Errors
/// [`WaitError::TimedOut`] after `timeout`, with the last observed state.
pub async fn wait_for<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    timeout: Duration,
    condition: impl Fn(Option<&K>) -> bool,
) -> Result<Option<K>, WaitError>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Serialize,
{
    wait_for_dyn(api, name, what, timeout, condition).await
}

/// [`wait_for`] for resources with a runtime type, such as `DynamicObject`.
///
/// # Errors
/// [`WaitError::TimedOut`] after `timeout`, with the last observed state.
pub async fn wait_for_dyn<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    timeout: Duration,
    condition: impl Fn(Option<&K>) -> bool,
) -> Result<Option<K>, WaitError>
where
    K: Resource + Clone + Debug + DeserializeOwned + Serialize,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut kind = String::from("object");
    let last_observed = loop {
        let observed = match api.get_opt(name).await {
            Ok(object) => {
                if condition(object.as_ref()) {
                    return Ok(object);
                }
                match object {
                    Some(object) => {
                        if let Some(types) = object_kind(&object) {
                            kind = types;
                        }
                        serde_yaml::to_string(&object)
                            .unwrap_or_else(|e| format!("{object:?} (not serializable: {e})"))
                    }
                    None => "absent".to_owned(),
                }
            }
            Err(e) => format!("read failed: {e}"),
        };
        if tokio::time::Instant::now() >= deadline {
            break observed;
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    };
    Err(WaitError::TimedOut {
        what: what.to_owned(),
        kind,
        name: name.to_owned(),
        timeout,
        last_observed,
    })
}

impl Debug for WaitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

fn object_kind<K: Serialize>(object: &K) -> Option<String> {
    let value = serde_json::to_value(object).ok()?;
    value.get("kind")?.as_str().map(str::to_owned)
}
