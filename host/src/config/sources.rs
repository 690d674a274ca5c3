//! `sources`: where plugin components come from, validated into the controller's
//! [`Source`]s.

use std::path::PathBuf;

use super::raw::RawSource;
use super::{ConfigError, value_error};
use wasmop_controller::source::Source;
use wasmop_core::plugin::PluginName;

/// Validates every source, in order (the order is their precedence).
pub(super) fn sources(raw: &[RawSource], namespace: &str) -> Result<Vec<Source>, ConfigError> {
    raw.iter()
        .enumerate()
        .map(|(i, s)| source(&format!("sources[{i}]"), s, namespace))
        .collect()
}

/// Validates one source: exactly one of `directory` and `configMap`.
fn source(at: &str, raw: &RawSource, namespace: &str) -> Result<Source, ConfigError> {
    match (&raw.directory, &raw.config_map) {
        (Some(dir), None) if dir.is_empty() => {
            Err(value_error(format!("{at}.directory"), "is empty"))
        }
        (Some(dir), None) => Ok(Source::Directory(PathBuf::from(dir))),
        (None, Some(cm)) => {
            let namespace = cm.namespace.clone().unwrap_or_else(|| namespace.to_owned());
            for (field, value) in [("name", &cm.name), ("namespace", &namespace)] {
                if PluginName::new(value.clone()).is_err() {
                    return Err(value_error(
                        format!("{at}.configMap.{field}"),
                        format!("`{value}` is not a Kubernetes name"),
                    ));
                }
            }
            Ok(Source::ConfigMap {
                namespace,
                name: cm.name.clone(),
            })
        }
        _ => Err(value_error(
            at,
            "must have exactly one of `directory` and `configMap`",
        )),
    }
}
