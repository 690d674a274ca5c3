//! The policy parts of the file: a plugin's `grants` into [`Permission`]s and the operator's
//! `sensitiveKinds`, each refused with its field's path when it names no single kind.

use std::collections::BTreeSet;

use super::raw::{RawGrant, RawKind};
use super::{ConfigError, value_error};
use wasmop_core::plugin::{Permission, Verb};

/// Validates `sensitiveKinds`: each a valid group and kind.
pub(super) fn sensitive_kinds(raw: &[RawKind]) -> Result<Vec<(String, String)>, ConfigError> {
    raw.iter()
        .enumerate()
        .map(|(i, k)| sensitive_kind(&format!("sensitiveKinds[{i}]"), k))
        .collect()
}

fn sensitive_kind(at: &str, raw: &RawKind) -> Result<(String, String), ConfigError> {
    if let Err(e) = wasmop_core::cluster::names::check_group(&format!("{at}.group"), &raw.group)
        .and_then(|()| wasmop_core::cluster::names::check_kind(&format!("{at}.kind"), &raw.kind))
    {
        return Err(value_error(
            e.field.clone(),
            format!("{} {}", e.value, e.problem),
        ));
    }
    Ok((raw.group.clone(), raw.kind.clone()))
}

/// Validates one grant: one kind (no wildcards) and at least one known verb.
pub(super) fn grant(at: &str, raw: &RawGrant) -> Result<Permission, ConfigError> {
    if raw.kind.is_empty() || raw.kind.contains('*') || raw.group.contains('*') {
        return Err(value_error(
            format!("{at}.kind"),
            "must name one kind (wildcards are not accepted)",
        ));
    }
    if raw.verbs.is_empty() {
        return Err(value_error(format!("{at}.verbs"), "is empty"));
    }
    let verbs = raw
        .verbs
        .iter()
        .enumerate()
        .map(|(i, v)| {
            verb(v).ok_or_else(|| {
                value_error(
                    format!("{at}.verbs[{i}]"),
                    format!(
                        "`{v}` is not one of get, list, create, patch, apply, delete, patch-status"
                    ),
                )
            })
        })
        .collect::<Result<BTreeSet<_>, _>>()?;
    Ok(Permission {
        group: raw.group.clone(),
        kind: raw.kind.clone(),
        verbs,
        namespaces: raw.namespaces.clone(),
    })
}

fn verb(text: &str) -> Option<Verb> {
    Some(match text {
        "get" => Verb::Get,
        "list" => Verb::List,
        "create" => Verb::Create,
        "patch" => Verb::Patch,
        "apply" => Verb::Apply,
        "delete" => Verb::Delete,
        "patch-status" => Verb::PatchStatus,
        _ => return None,
    })
}
