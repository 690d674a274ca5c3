//! Calling `describe` once at load, under the same limits as any call, and turning the WIT
//! `info` record into a validated [`PluginInfo`].

use super::bindings::{PluginPre, wasmop::plugin as wit};
use super::call::{CallState, PluginShared};
use super::dispatch::{failure, new_store};
use super::loader::LoadError;
use super::outcome::Outcome;
use super::{Limits, Runtime};
use crate::cluster::GroupVersionKind;
use crate::cluster::selector::{LabelSelector, SelectorError};
use crate::plugin::{Mapping, Permission, PluginInfo, PluginName, PluginNameError, Verb, Watch};
use crate::policy::Grants;

/// What a plugin's declaration gets wrong.
#[derive(Debug, thiserror::Error)]
pub enum DeclarationError {
    /// The name is not a DNS-1123 label.
    #[error("its name is unusable")]
    Name(#[source] PluginNameError),
    /// A kind has an empty version or kind.
    #[error("its {field} kind `{kind}` needs a version and a kind")]
    EmptyKind {
        /// Which declaration (primary, owns, watches).
        field: &'static str,
        /// The kind as declared.
        kind: String,
    },
    /// A selector does not parse.
    #[error("its {field} selector does not parse")]
    Selector {
        /// Which declaration.
        field: &'static str,
        /// The parse error.
        #[source]
        source: SelectorError,
    },
    /// The finalizer is not a qualified name.
    #[error("its finalizer `{0}` is not a qualified name like `example.com/cleanup`")]
    Finalizer(String),
}

/// Calls `describe` in a fresh instance of `pre` (compiled by `engine`: the main one, or the
/// Winch engine of a tiered load) and validates what it returns.
pub async fn describe(
    runtime: &Runtime,
    engine: &wasmtime::Engine,
    pre: &PluginPre<CallState>,
    limits: &Limits,
) -> Result<PluginInfo, LoadError> {
    let Ok(_slot) = runtime.inner.slots.acquire().await else {
        unreachable!("the instance-slot semaphore is never closed");
    };
    // A placeholder name for log tags until the plugin has said its own.
    let placeholder = PluginName::new("loading").map_err(DeclarationError::Name)?;
    let shared = PluginShared {
        plugin: placeholder,
        grants: Grants::none(),
        config_json: "{}".into(),
        limits: limits.clone(),
    };
    let state = CallState::from_parts(
        runtime.inner.config.fixed_clock,
        std::sync::Arc::new(shared),
        None,
        None,
    );
    let metered = runtime.inner.config.fuel_enabled();
    // Epochs advance (deadline, yields) while `describe` may run guest code.
    let _ticking = runtime.inner.ticker.ticking();
    let mut store = new_store(engine, state, metered, limits.fuel).map_err(|e| {
        LoadError::Describe(Outcome::Trap {
            message: format!("{e:#}"),
            backtrace: vec![],
        })
    })?;
    let call = async {
        let instance = pre.instantiate_async(&mut store).await?;
        instance
            .wasmop_plugin_reconciler()
            .call_describe(&mut store)
            .await
    };
    let result = tokio::time::timeout(limits.deadline, call).await;
    let state = store.data();
    let printed = state.output.take();
    let info = match result {
        Err(_) => {
            return Err(LoadError::Describe(Outcome::Timeout(
                super::outcome::Budget::WallClock(limits.deadline),
            )));
        }
        Ok(Err(e)) => return Err(LoadError::Describe(failure(&e, state, &printed, limits))),
        Ok(Ok(info)) => info,
    };
    Ok(convert_info(info)?)
}

fn gvk(field: &'static str, g: wit::types::Gvk) -> Result<GroupVersionKind, DeclarationError> {
    if g.version.is_empty() || g.kind.is_empty() {
        return Err(DeclarationError::EmptyKind {
            field,
            kind: format!("{}/{}/{}", g.group, g.version, g.kind),
        });
    }
    Ok(GroupVersionKind::gvk(&g.group, &g.version, &g.kind))
}

fn selector(field: &'static str, s: Option<String>) -> Result<Option<String>, DeclarationError> {
    if let Some(s) = &s {
        LabelSelector::parse(s).map_err(|source| DeclarationError::Selector { field, source })?;
    }
    Ok(s)
}

fn convert_info(info: wit::plugin_info::Info) -> Result<PluginInfo, DeclarationError> {
    use wit::plugin_info::{Mapping as M, Verb as V};
    let name = PluginName::new(info.name).map_err(DeclarationError::Name)?;
    let finalizer = match info.finalizer {
        Some(f)
            if f.split_once('/')
                .is_some_and(|(d, n)| !d.is_empty() && !n.is_empty()) =>
        {
            Some(f)
        }
        Some(f) => return Err(DeclarationError::Finalizer(f)),
        None => None,
    };
    let watches = info
        .watches
        .into_iter()
        .map(|w| {
            Ok(Watch {
                kind: gvk("watched", w.kind)?,
                selector: selector("watch", w.selector)?,
                mapping: match w.mapping {
                    M::SameName => Mapping::SameName,
                    M::Label(l) => Mapping::Label(l),
                    M::Annotation(a) => Mapping::Annotation(a),
                    M::AllInNamespace => Mapping::AllInNamespace,
                    M::All => Mapping::All,
                },
            })
        })
        .collect::<Result<_, DeclarationError>>()?;
    let permissions = info
        .permissions
        .into_iter()
        .map(|p| Permission {
            group: p.group,
            kind: p.kind,
            verbs: p
                .verbs
                .into_iter()
                .map(|v| match v {
                    V::Get => Verb::Get,
                    V::List => Verb::List,
                    V::Create => Verb::Create,
                    V::Patch => Verb::Patch,
                    V::Apply => Verb::Apply,
                    V::Delete => Verb::Delete,
                    V::PatchStatus => Verb::PatchStatus,
                })
                .collect(),
            namespaces: p.namespaces,
        })
        .collect();
    Ok(PluginInfo {
        name,
        version: info.version,
        primary: gvk("primary", info.primary)?,
        primary_selector: selector("primary", info.primary_selector)?,
        owns: info
            .owns
            .into_iter()
            .map(|g| gvk("owned", g))
            .collect::<Result<_, _>>()?,
        watches,
        finalizer,
        reconcile_on_metadata_change: info.reconcile_on_metadata_change,
        permissions,
    })
}
