//! Readers of one raw host-wide value that put the field's path into the error: addresses,
//! durations (absent, zero-disables, bounded deadlines), byte quantities, the log format and
//! the host's namespace.

use std::net::SocketAddr;
use std::time::Duration;

use super::raw::RawQuantity;
use super::units::{parse_duration, parse_quantity};
use super::{ConfigError, DEFAULT_NAMESPACE, LogFormat, MAX_DEADLINE, value_error};
use wasmop_core::plugin::PluginName;

/// A `host:port` address, the default when absent, `None` when `""`.
pub(super) fn address(
    field: &str,
    raw: Option<&str>,
    default: &str,
) -> Result<Option<SocketAddr>, ConfigError> {
    match raw {
        Some("") => Ok(None),
        other => other
            .unwrap_or(default)
            .parse::<SocketAddr>()
            .map(Some)
            .map_err(|e| value_error(field, format!("not `host:port`: {e}"))),
    }
}

/// A duration, with the field's path on a malformed one.
pub(super) fn duration(field: &str, text: &str) -> Result<Duration, ConfigError> {
    parse_duration(text).map_err(|source| ConfigError::Unit {
        field: field.into(),
        source,
    })
}

/// A byte quantity (`8Mi`, or a number of bytes), with the field's path on a malformed one.
pub(super) fn quantity(field: &str, raw: &RawQuantity) -> Result<u64, ConfigError> {
    match raw {
        RawQuantity::Bytes(n) => Ok(*n),
        RawQuantity::Text(t) => parse_quantity(t).map_err(|source| ConfigError::Unit {
            field: field.into(),
            source,
        }),
    }
}

/// A duration, or the default when absent.
pub(super) fn duration_or(
    field: &str,
    raw: Option<&str>,
    default: Duration,
) -> Result<Duration, ConfigError> {
    raw.map_or(Ok(default), |text| duration(field, text))
}

/// A period that `0s` turns off: the default when absent, `None` when zero.
pub(super) fn zero_disables(
    field: &str,
    raw: Option<&str>,
    default: Duration,
) -> Result<Option<Duration>, ConfigError> {
    let d = duration_or(field, raw, default)?;
    Ok((!d.is_zero()).then_some(d))
}

/// A call deadline: within 1ms..=[`MAX_DEADLINE`], so that no call can hold a slot for long.
pub(super) fn deadline(field: &str, text: &str) -> Result<Duration, ConfigError> {
    let d = duration(field, text)?;
    if d.is_zero() || d > MAX_DEADLINE {
        return Err(value_error(field, format!("`{text}` is outside 1ms..=5m")));
    }
    Ok(d)
}

/// `logFormat`: `text` (the default) or `json`.
pub(super) fn log_format(raw: Option<&str>) -> Result<LogFormat, ConfigError> {
    match raw {
        None | Some("text") => Ok(LogFormat::Text),
        Some("json") => Ok(LogFormat::Json),
        Some(other) => Err(value_error(
            "logFormat",
            format!("`{other}` is neither `text` nor `json`"),
        )),
    }
}

/// The host's own namespace: `namespace`, else `$POD_NAMESPACE` (the Downward API), else
/// [`DEFAULT_NAMESPACE`].
pub(super) fn host_namespace(raw: Option<&str>) -> Result<String, ConfigError> {
    let namespace = raw
        .map(str::to_owned)
        .or_else(|| {
            std::env::var("POD_NAMESPACE")
                .ok()
                .filter(|n| !n.is_empty())
        })
        .unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned());
    if PluginName::new(namespace.clone()).is_err() {
        return Err(value_error(
            "namespace",
            format!("`{namespace}` is not a namespace name"),
        ));
    }
    Ok(namespace)
}
