//! `configmap-mirror`: a ConfigMap labelled `demo.wasmop.dev/mirror=true` is copied into every
//! namespace matching the configured selector (default: namespaces labelled
//! `demo.wasmop.dev/mirror-target=true`), and the copies follow it.
//!
//! Copies live in other namespaces, where an ownerReference to the source would be ignored,
//! so they are tracked instead by a label (`demo.wasmop.dev/mirror-copy`) and an annotation
//! naming the source (`demo.wasmop.dev/mirror-source: <namespace>/<name>`), and the plugin's
//! finalizer on the source removes them when the source is deleted. A copy that is edited or
//! deleted is restored (the annotation maps it back to its source); a namespace that starts
//! or stops matching gains or loses its copy.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use wasmop_guest::k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use wasmop_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use wasmop_guest::{
    Action, Context, Event, Info, Mapping, Object, Permission, ReconcileError, Reconciler, Verb,
};

/// The label that marks a ConfigMap as a source to mirror.
const SOURCE_LABEL: &str = "demo.wasmop.dev/mirror";
/// The label every copy carries, so copies can be listed.
const COPY_LABEL: &str = "demo.wasmop.dev/mirror-copy";
/// The annotation on a copy naming its source, `<namespace>/<name>`.
const SOURCE_ANNOTATION: &str = "demo.wasmop.dev/mirror-source";
/// The finalizer that lets the plugin delete the copies before the source goes.
const FINALIZER: &str = "demo.wasmop.dev/mirror-cleanup";
/// How soon to look again at a namespace whose ConfigMap of the same name blocks a copy:
/// someone has to rename or delete it, which the plugin does not watch for.
const CONFLICT_RETRY: Duration = Duration::from_secs(300);

/// The plugin's configuration.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
struct Config {
    /// A label selector (Kubernetes syntax) for the namespaces that receive copies.
    namespace_selector: String,
}

impl Default for Config {
    /// Opt-in: only namespaces that ask for copies get them.
    fn default() -> Self {
        Self {
            namespace_selector: "demo.wasmop.dev/mirror-target=true".to_owned(),
        }
    }
}

struct ConfigMapMirror;

impl Reconciler for ConfigMapMirror {
    type Object = ConfigMap;

    fn describe() -> Info {
        Info::new("configmap-mirror", env!("CARGO_PKG_VERSION"))
            .selector(format!("{SOURCE_LABEL}=true"))
            .watches::<Namespace>(Mapping::All)
            .watches_selected::<ConfigMap>(
                format!("{COPY_LABEL}=true"),
                Mapping::Annotation(SOURCE_ANNOTATION.to_owned()),
            )
            .finalizer(FINALIZER)
            // The primary kind brings get, list and apply; removing copies needs delete.
            .permission(Permission::new::<ConfigMap>([Verb::Delete]))
    }

    fn reconcile(source: ConfigMap, ctx: &Context) -> Result<Action, ReconcileError> {
        let config: Config = ctx.config()?;
        let key = source_key(&source);
        let targets: Vec<String> = ctx
            .list::<Namespace>(None, Some(&config.namespace_selector))?
            .iter()
            .filter(|ns| Some(ns.name()) != source.namespace() && !is_terminating(ns))
            .map(|ns| ns.name().to_owned())
            .collect();

        let mut blocked = Vec::new();
        for namespace in &targets {
            let existing = ctx.get::<ConfigMap>(Some(namespace), source.name())?;
            if existing.is_some_and(|cm| cm.annotation(SOURCE_ANNOTATION) != Some(key.as_str())) {
                blocked.push(namespace.as_str());
                continue;
            }
            ctx.apply(&copy_of(&source, namespace, &key))?;
        }

        let mut removed = Vec::new();
        for stale in copies_of(ctx, &key)?
            .iter()
            .filter(|c| !targets.iter().any(|t| Some(t.as_str()) == c.namespace()))
        {
            ctx.delete::<ConfigMap>(stale.namespace(), stale.name())?;
            removed.push(stale.namespace().unwrap_or_default().to_owned());
        }
        if !removed.is_empty() {
            let note = format!(
                "removed the copies from namespaces that no longer match: {}",
                removed.join(", ")
            );
            ctx.event(&source, Event::normal("CopiesRemoved", "Delete", note))?;
        }

        if blocked.is_empty() {
            return Ok(Action::Done);
        }
        let note = format!(
            "not copied into {}: a ConfigMap named {} that is not a copy of {key} is in the way",
            blocked.join(", "),
            source.name()
        );
        ctx.event(&source, Event::warning("CopyBlocked", "Apply", note))?;
        Ok(Action::RequeueAfter(CONFLICT_RETRY))
    }

    fn cleanup(source: ConfigMap, ctx: &Context) -> Result<Action, ReconcileError> {
        let key = source_key(&source);
        for copy in copies_of(ctx, &key)? {
            ctx.delete::<ConfigMap>(copy.namespace(), copy.name())?;
        }
        Ok(Action::Done)
    }
}

/// `<namespace>/<name>` of the source, as the copies' annotation records it.
fn source_key(source: &ConfigMap) -> String {
    format!(
        "{}/{}",
        source.namespace().unwrap_or_default(),
        source.name()
    )
}

fn is_terminating(ns: &Namespace) -> bool {
    ns.is_being_deleted()
        || ns.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating")
}

/// Every copy of the source named by `key`, in any namespace.
fn copies_of(ctx: &Context, key: &str) -> Result<Vec<ConfigMap>, ReconcileError> {
    let labelled = ctx.list::<ConfigMap>(None, Some(&format!("{COPY_LABEL}=true")))?;
    Ok(labelled
        .into_iter()
        .filter(|c| c.annotation(SOURCE_ANNOTATION) == Some(key))
        .collect())
}

/// The copy of `source` for `namespace`: its data, its labels except the source label (a copy
/// must not be mirrored itself), the copy label and the annotation naming the source.
fn copy_of(source: &ConfigMap, namespace: &str, key: &str) -> ConfigMap {
    let mut labels = source.metadata.labels.clone().unwrap_or_default();
    labels.remove(SOURCE_LABEL);
    labels.insert(COPY_LABEL.to_owned(), "true".to_owned());
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(source.name().to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([(
                SOURCE_ANNOTATION.to_owned(),
                key.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        data: source.data.clone(),
        binary_data: source.binary_data.clone(),
        ..ConfigMap::default()
    }
}

wasmop_guest::export!(ConfigMapMirror);
