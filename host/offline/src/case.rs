//! The offline clock's text form (RFC 3339, as Kubernetes writes times) and the settings file
//! of a golden case, `case.yaml`.
//!
//! # `case.yaml`
//! Optional, beside a case's `object.yaml`; a mapping of per-case settings. Today one:
//! ```yaml
//! now: 2025-01-01T00:01:00Z   # the guest's wall clock (RFC 3339); default OFFLINE_CLOCK
//! ```
//! An unknown key is an error naming the file and the key, so a misspelt setting is never
//! silently ignored; new settings join as new keys.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Deserialize;

/// A time that is not RFC 3339.
#[derive(Debug, thiserror::Error)]
#[error("`{value}` is not an RFC 3339 time such as 2025-01-01T00:00:00Z")]
pub struct TimeError {
    /// The text given.
    pub value: String,
    /// Why it does not parse.
    #[source]
    pub source: jiff::Error,
}

/// Parses an RFC 3339 time (`2025-01-01T00:00:00Z`, `2025-01-01T01:00:00+01:00`, with or
/// without fractions of a second).
pub fn parse_time(text: &str) -> Result<SystemTime, TimeError> {
    let at: jiff::Timestamp = text.trim().parse().map_err(|source| TimeError {
        value: text.to_owned(),
        source,
    })?;
    Ok(SystemTime::from(at))
}

/// `at` as Kubernetes writes a `metav1.Time`: RFC 3339 in UTC, whole seconds
/// (`2025-01-01T00:00:00Z`).
pub fn format_time(at: SystemTime) -> String {
    match jiff::Timestamp::try_from(at) {
        Ok(t) => t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        // Only an instant beyond jiff's range (years -9999..=9999) lands here.
        Err(_) => "1970-01-01T00:00:00Z".to_owned(),
    }
}

/// A `case.yaml` that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    /// It cannot be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It is not a mapping of known settings (serde names an unknown key and the known ones).
    #[error("invalid case settings in {path}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the key.
        #[source]
        source: serde_yaml::Error,
    },
    /// Its `now` is not a time.
    #[error("{path}: bad `now`")]
    Now {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: TimeError,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase {
    now: Option<String>,
}

/// The settings of one golden case (`case.yaml`, documented on this module).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaseSettings {
    /// The guest's wall clock; `None` for the default, [`crate::OFFLINE_CLOCK`].
    pub now: Option<SystemTime>,
}

impl CaseSettings {
    /// Parses the text of `path` (named in errors).
    pub fn from_yaml(text: &str, path: &Path) -> Result<Self, CaseError> {
        // An empty file is a case without settings.
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let raw: RawCase = serde_yaml::from_str(text).map_err(|source| CaseError::Invalid {
            path: path.to_owned(),
            source,
        })?;
        let now = raw
            .now
            .map(|t| parse_time(&t))
            .transpose()
            .map_err(|source| CaseError::Now {
                path: path.to_owned(),
                source,
            })?;
        Ok(Self { now })
    }

    /// Reads `<case>/case.yaml`; the defaults when the case has none.
    pub fn read(case_dir: &Path) -> Result<Self, CaseError> {
        let path = case_dir.join("case.yaml");
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::from_yaml(&text, &path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(source) => Err(CaseError::Read { path, source }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn times_parse_from_rfc3339_and_format_as_kubernetes_does() {
        let at = parse_time("2025-01-01T00:01:00Z").expect("valid");
        assert_eq!(at, UNIX_EPOCH + Duration::from_secs(1_735_689_660));
        assert_eq!(parse_time("2025-01-01T01:01:00+01:00").expect("valid"), at);
        assert_eq!(format_time(at), "2025-01-01T00:01:00Z");
        assert_eq!(
            format_time(at + Duration::from_millis(500)),
            "2025-01-01T00:01:00Z"
        );
    }

    #[test]
    fn a_bad_time_is_refused_naming_the_value() {
        let err = parse_time("yesterday").expect_err("not a time");
        assert!(
            err.to_string()
                .contains("`yesterday` is not an RFC 3339 time"),
            "{err}"
        );
    }

    #[test]
    fn case_yaml_sets_now_and_refuses_unknown_keys_naming_file_and_key() {
        let path = Path::new("cases/a/case.yaml");
        let case = CaseSettings::from_yaml("now: 2025-01-01T00:01:00Z\n", path).expect("valid");
        assert_eq!(
            case.now,
            Some(UNIX_EPOCH + Duration::from_secs(1_735_689_660))
        );
        assert_eq!(
            CaseSettings::from_yaml("", path).expect("empty"),
            CaseSettings::default()
        );
        let err = CaseSettings::from_yaml("now: 2025-01-01T00:00:00Z\nclok: 1\n", path)
            .expect_err("unknown key");
        let text = wasmop_core::chain(&err);
        assert!(
            text.contains("cases/a/case.yaml") && text.contains("unknown field `clok`"),
            "{text}"
        );
        let err = CaseSettings::from_yaml("now: soon\n", path).expect_err("bad time");
        assert!(
            wasmop_core::chain(&err).contains("`soon` is not an RFC 3339 time"),
            "{}",
            wasmop_core::chain(&err)
        );
    }
}
