//! How API server failures become [`ClusterError`]s, and which of them the host retries.
//!
//! 429 and 5xx answers and transport errors are retried with exponential backoff and jitter
//! ([`retrying`]); when the retries run out the plugin sees `unavailable`. 404 is `not-found`,
//! 409 `already-exists` when the API server's reason says so (a create of an existing name)
//! and `conflict` otherwise (a stale resourceVersion, a failed precondition), 403 `forbidden`
//! (RBAC, the outer bound), 400/422 `invalid`.

use std::future::Future;
use std::time::Duration;

use wasmop_core::cluster::ClusterError;

/// Attempts per call, the first included. 5 attempts with delays of 100, 200, 400 and 800 ms
/// (±jitter) ride out an apiserver restart's first seconds or a burst of throttling, while
/// keeping a reconcile's worst case well inside the default 10 s deadline.
pub(crate) const ATTEMPTS: u32 = 5;
/// The first retry delay.
pub(crate) const FIRST_DELAY: Duration = Duration::from_millis(100);

/// Whether an error is worth another attempt.
pub(crate) fn is_transient(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code == 429 || status.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => true,
        _ => false,
    }
}

/// Maps a final error onto the plugin-visible cases.
pub(crate) fn classify(error: kube::Error) -> ClusterError {
    match error {
        kube::Error::Api(status) => {
            let message = if status.message.is_empty() {
                status.reason.clone()
            } else {
                status.message.clone()
            };
            match status.code {
                404 => ClusterError::NotFound(message),
                409 if status.reason == "AlreadyExists" => ClusterError::AlreadyExists(message),
                409 => ClusterError::Conflict(message),
                403 => ClusterError::Forbidden(message),
                400 | 422 => ClusterError::Invalid(message),
                429 => ClusterError::Unavailable(message),
                code if code >= 500 => ClusterError::Unavailable(message),
                code => ClusterError::Other(format!("HTTP {code}: {message}")),
            }
        }
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => {
            ClusterError::Unavailable(error.to_string())
        }
        kube::Error::SerdeError(e) => ClusterError::Invalid(e.to_string()),
        other => ClusterError::Other(other.to_string()),
    }
}

/// The delay before retry `attempt` (1-based): doubling from [`FIRST_DELAY`], with up to 50%
/// jitter taken off so that many clients do not retry in step.
pub(crate) fn retry_delay(attempt: u32) -> Duration {
    let base = FIRST_DELAY.saturating_mul(1 << attempt.saturating_sub(1).min(16));
    base.mul_f64(1.0 - fastrand::f64() * 0.5)
}

/// Runs `call` until it succeeds, fails permanently, or [`ATTEMPTS`] run out.
pub(crate) async fn retrying<T, F, Fut>(what: &str, mut call: F) -> Result<T, ClusterError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut attempt = 1;
    loop {
        match call().await {
            Ok(value) => return Ok(value),
            Err(error) if attempt < ATTEMPTS && is_transient(&error) => {
                let delay = retry_delay(attempt);
                tracing::debug!(%error, attempt, ?delay, "{what} failed; retrying");
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
            Err(error) => return Err(classify(error)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(Status::failure("boom", "Reason").with_code(code)))
    }

    #[test]
    fn status_codes_map_onto_the_wit_cases() {
        assert!(matches!(classify(api(404)), ClusterError::NotFound(m) if m == "boom"));
        assert!(matches!(classify(api(409)), ClusterError::Conflict(_)));
        let exists = Status::failure("configmaps \"x\" already exists", "AlreadyExists");
        let exists = kube::Error::Api(Box::new(exists.with_code(409)));
        assert!(
            matches!(classify(exists), ClusterError::AlreadyExists(m) if m.contains("already exists"))
        );
        assert!(matches!(classify(api(403)), ClusterError::Forbidden(_)));
        assert!(matches!(classify(api(422)), ClusterError::Invalid(_)));
        assert!(matches!(classify(api(400)), ClusterError::Invalid(_)));
        assert!(matches!(classify(api(503)), ClusterError::Unavailable(_)));
        assert!(matches!(classify(api(429)), ClusterError::Unavailable(_)));
    }

    #[test]
    fn only_throttling_and_server_errors_are_retried() {
        assert!(is_transient(&api(429)));
        assert!(is_transient(&api(500)));
        assert!(!is_transient(&api(409)));
        assert!(!is_transient(&api(404)));
    }

    #[tokio::test(start_paused = true)]
    async fn transient_errors_are_retried_then_reported_unavailable() {
        let mut calls = 0;
        let result: Result<(), _> = retrying("get", || {
            calls += 1;
            async { Err(api(503)) }
        })
        .await;
        assert_eq!(calls, ATTEMPTS);
        assert!(matches!(result, Err(ClusterError::Unavailable(_))));
    }

    #[tokio::test(start_paused = true)]
    async fn a_conflict_is_not_retried() {
        let mut calls = 0;
        let result: Result<(), _> = retrying("apply", || {
            calls += 1;
            async { Err(api(409)) }
        })
        .await;
        assert_eq!(calls, 1);
        assert!(matches!(result, Err(ClusterError::Conflict(_))));
    }

    #[test]
    fn retry_delays_double_with_jitter_below_the_base() {
        for attempt in 1..5 {
            let d = retry_delay(attempt);
            let base = FIRST_DELAY * (1 << (attempt - 1));
            assert!(d <= base && d >= base / 2, "{attempt}: {d:?}");
        }
    }
}
