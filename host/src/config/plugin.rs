//! `defaults` and `plugins.<name>`: each plugin's entry, field by field falling back to
//! `defaults`, validated into the controller's own [`PluginSettings`].

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::fields::deadline;
use super::policy::grant;
use super::raw::RawPluginSettings;
use super::{
    ConfigError, DEFAULT_FAILURE_THRESHOLD, DEFAULT_PLUGIN_CONCURRENCY, MAX_PLUGIN_MEMORY,
    fairness, value_error,
};
use wasmop_controller::{AdmissionSettings, PluginSettings};
use wasmop_core::plugin::{Permission, PluginName};
use wasmop_runtime::Limits;
use wasmop_runtime::admission::FailurePolicy;

/// The settings of a plugin without an entry (`defaults`), and of each plugin with one.
pub(super) type AllSettings = (PluginSettings, BTreeMap<PluginName, PluginSettings>);

/// Validates `defaults` and every `plugins` entry (merged over `defaults`).
pub(super) fn all(
    raw_defaults: &RawPluginSettings,
    raw_plugins: &BTreeMap<String, RawPluginSettings>,
) -> Result<AllSettings, ConfigError> {
    let defaults = settings("defaults", raw_defaults, &RawPluginSettings::default())?;
    let mut plugins = BTreeMap::new();
    for (name, entry) in raw_plugins {
        let parsed = PluginName::new(name.clone()).map_err(|source| ConfigError::PluginName {
            field: format!("plugins.{name}"),
            source,
        })?;
        plugins.insert(
            parsed,
            settings(&format!("plugins.{name}"), entry, raw_defaults)?,
        );
    }
    Ok((defaults, plugins))
}

/// Validates one plugin's settings (at the field path `at`), field by field falling back to
/// `defaults`.
pub(super) fn settings(
    at: &str,
    raw: &RawPluginSettings,
    defaults: &RawPluginSettings,
) -> Result<PluginSettings, ConfigError> {
    // In the order the fields are checked since the first release: of several bad fields,
    // the first of these is the one reported.
    let limits = limits(at, raw, defaults)?;
    let concurrency = concurrency(at, raw, defaults)?;
    let namespaces = namespaces(at, raw, defaults)?;
    let grants = grants(at, raw, defaults)?;
    let config = plugin_config(at, raw, defaults)?;
    let (min_requeue_after, object_rate) = fairness::fairness(at, raw, defaults)?;
    Ok(PluginSettings {
        namespaces,
        grants,
        limits,
        concurrency,
        config,
        failure_threshold: raw
            .failure_threshold
            .or(defaults.failure_threshold)
            .unwrap_or(DEFAULT_FAILURE_THRESHOLD),
        // On by default: a version that only traps serves nobody, and the one it replaced
        // was serving.
        rollback: raw.rollback.or(defaults.rollback).unwrap_or(true),
        min_requeue_after,
        object_rate,
        admission: admission(at, raw, defaults)?,
    })
}

/// `admission`: whether the plugin's webhooks are served, and a failure policy replacing
/// its own.
fn admission(
    at: &str,
    raw: &RawPluginSettings,
    defaults: &RawPluginSettings,
) -> Result<AdmissionSettings, ConfigError> {
    let (own, default) = (raw.admission.as_ref(), defaults.admission.as_ref());
    let flag = |get: fn(&super::raw::RawPluginAdmission) -> Option<bool>| {
        own.and_then(get).or(default.and_then(get)).unwrap_or(true)
    };
    let enabled = flag(|a| a.enabled);
    let validating = flag(|a| a.validating);
    let mutating = flag(|a| a.mutating);
    let failure_policy = match own
        .and_then(|a| a.failure_policy.as_deref())
        .or(default.and_then(|a| a.failure_policy.as_deref()))
    {
        None => None,
        Some("Fail") => Some(FailurePolicy::Fail),
        Some("Ignore") => Some(FailurePolicy::Ignore),
        Some(other) => {
            return Err(value_error(
                format!("{at}.admission.failurePolicy"),
                format!("`{other}` is neither `Fail` nor `Ignore`"),
            ));
        }
    };
    Ok(AdmissionSettings {
        enabled,
        validating,
        mutating,
        failure_policy,
    })
}

/// `memory` (1Mi..=1Gi), `deadline` (1ms..=5m) and `fuel` (at least 1 when set).
fn limits(
    at: &str,
    raw: &RawPluginSettings,
    defaults: &RawPluginSettings,
) -> Result<Limits, ConfigError> {
    let mut limits = Limits::default();
    if let Some(q) = raw.memory.as_ref().or(defaults.memory.as_ref()) {
        let field = format!("{at}.memory");
        limits.memory = super::fields::quantity(&field, q)?;
        if limits.memory < (1 << 20) || limits.memory > MAX_PLUGIN_MEMORY {
            return Err(value_error(
                field,
                format!("{} bytes is outside 1Mi..=1Gi", limits.memory),
            ));
        }
    }
    if let Some(t) = raw.deadline.as_ref().or(defaults.deadline.as_ref()) {
        limits.deadline = deadline(&format!("{at}.deadline"), t)?;
    }
    limits.fuel = raw.fuel.or(defaults.fuel);
    if limits.fuel == Some(0) {
        return Err(value_error(format!("{at}.fuel"), "must be at least 1"));
    }
    Ok(limits)
}

/// `concurrency`: calls of this plugin at once, at least 1.
fn concurrency(
    at: &str,
    raw: &RawPluginSettings,
    defaults: &RawPluginSettings,
) -> Result<u16, ConfigError> {
    let concurrency = raw
        .concurrency
        .or(defaults.concurrency)
        .unwrap_or(DEFAULT_PLUGIN_CONCURRENCY);
    if concurrency == 0 {
        return Err(value_error(
            format!("{at}.concurrency"),
            "must be at least 1",
        ));
    }
    Ok(concurrency)
}

/// `namespaces`: absent allows every namespace; present, a non-empty list of valid names.
fn namespaces(
    at: &str,
    raw: &RawPluginSettings,
    defaults: &RawPluginSettings,
) -> Result<Option<BTreeSet<String>>, ConfigError> {
    let Some(list) = raw.namespaces.as_ref().or(defaults.namespaces.as_ref()) else {
        return Ok(None);
    };
    if list.is_empty() {
        return Err(value_error(
            format!("{at}.namespaces"),
            "is empty; leave it out to allow every namespace",
        ));
    }
    for (i, ns) in list.iter().enumerate() {
        if PluginName::new(ns.clone()).is_err() {
            return Err(value_error(
                format!("{at}.namespaces[{i}]"),
                format!("`{ns}` is not a namespace name"),
            ));
        }
    }
    Ok(Some(list.iter().cloned().collect()))
}

/// `grants`: the operator's extra permissions for this plugin.
fn grants(
    at: &str,
    raw: &RawPluginSettings,
    defaults: &RawPluginSettings,
) -> Result<Vec<Permission>, ConfigError> {
    let Some(list) = raw.grants.as_ref().or(defaults.grants.as_ref()) else {
        return Ok(Vec::new());
    };
    list.iter()
        .enumerate()
        .map(|(i, g)| grant(&format!("{at}.grants[{i}]"), g))
        .collect()
}

/// `config`: the plugin's own configuration, a mapping (empty when absent).
fn plugin_config(
    at: &str,
    raw: &RawPluginSettings,
    defaults: &RawPluginSettings,
) -> Result<Value, ConfigError> {
    let config = raw
        .config
        .clone()
        .or_else(|| defaults.config.clone())
        .unwrap_or_else(|| Value::Object(Default::default()));
    if !config.is_object() {
        return Err(value_error(format!("{at}.config"), "must be a mapping"));
    }
    Ok(config)
}
