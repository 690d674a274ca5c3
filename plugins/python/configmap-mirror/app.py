"""`configmap-mirror` in Python: a ConfigMap labelled `demo.wasmop.dev/mirror=true` is copied
into every namespace matching the configured selector (default: namespaces labelled
`demo.wasmop.dev/mirror-target=true`), and the copies follow it. The same logic as the Rust
plugin, passing the same golden cases (`plugins/rust/configmap-mirror/tests/cases`).

Copies live in other namespaces, where an ownerReference to the source would be ignored, so
they are tracked by a label (`demo.wasmop.dev/mirror-copy`) and an annotation naming the
source (`demo.wasmop.dev/mirror-source: <namespace>/<name>`), and the plugin's finalizer on
the source removes them when the source is deleted.
"""

from dataclasses import dataclass
from typing import Any

import wasmop
from wasmop import CONFIG_MAP, NAMESPACE, Action, Context, Event, Info, Mapping, Object, Verb

#: The label that marks a ConfigMap as a source to mirror.
SOURCE_LABEL = "demo.wasmop.dev/mirror"
#: The label every copy carries, so copies can be listed.
COPY_LABEL = "demo.wasmop.dev/mirror-copy"
#: The annotation on a copy naming its source, `<namespace>/<name>`.
SOURCE_ANNOTATION = "demo.wasmop.dev/mirror-source"
#: The finalizer that lets the plugin delete the copies before the source goes.
FINALIZER = "demo.wasmop.dev/mirror-cleanup"
#: How soon to look again at a namespace whose ConfigMap of the same name blocks a copy:
#: someone has to rename or delete it, which the plugin does not watch for.
CONFLICT_RETRY_SECONDS = 300


@dataclass
class Config:
    """The plugin's configuration."""

    #: A label selector for the namespaces that receive copies (opt-in by default).
    namespace_selector: str = "demo.wasmop.dev/mirror-target=true"


class ConfigMapMirror(wasmop.Reconciler):
    kind = CONFIG_MAP

    def describe(self) -> Info:
        return (
            Info("configmap-mirror", "0.1.0")
            .selector(f"{SOURCE_LABEL}=true")
            .watches(NAMESPACE, Mapping.all())
            .watches(CONFIG_MAP, Mapping.annotation(SOURCE_ANNOTATION), f"{COPY_LABEL}=true")
            .finalizer(FINALIZER)
            # The primary kind brings get, list and apply; removing copies needs delete.
            .permission(CONFIG_MAP, [Verb.DELETE])
        )

    def reconcile(self, source: Object, ctx: Context) -> Action:
        config: Config = ctx.config(Config)
        key = source_key(source)
        targets = [
            ns.name
            for ns in ctx.list(NAMESPACE, None, config.namespace_selector)
            if ns.name != source.namespace and not is_terminating(ns)
        ]

        blocked = []
        for namespace in targets:
            existing = ctx.get(CONFIG_MAP, source.name, namespace)
            if existing is not None and existing.annotations.get(SOURCE_ANNOTATION) != key:
                blocked.append(namespace)
                continue
            ctx.apply(copy_of(source, namespace, key), CONFIG_MAP)

        removed = []
        for stale in copies_of(ctx, key):
            if stale.namespace not in targets:
                ctx.delete(CONFIG_MAP, stale.name, stale.namespace)
                removed.append(stale.namespace or "")
        if removed:
            note = "removed the copies from namespaces that no longer match: " + ", ".join(removed)
            ctx.event(source, Event.normal("CopiesRemoved", "Delete", note))

        if not blocked:
            return Action.done()
        note = (
            f"not copied into {', '.join(blocked)}: a ConfigMap named {source.name} "
            f"that is not a copy of {key} is in the way"
        )
        ctx.event(source, Event.warning("CopyBlocked", "Apply", note))
        return Action.requeue_after(CONFLICT_RETRY_SECONDS)

    def cleanup(self, source: Object, ctx: Context) -> Action:
        for copy in copies_of(ctx, source_key(source)):
            ctx.delete(CONFIG_MAP, copy.name, copy.namespace)
        return Action.done()


def source_key(source: Object) -> str:
    """`<namespace>/<name>` of the source, as the copies' annotation records it."""
    return f"{source.namespace or ''}/{source.name}"


def is_terminating(ns: Object) -> bool:
    status: dict[str, Any] = ns.get("status") or {}
    return ns.is_being_deleted or status.get("phase") == "Terminating"


def copies_of(ctx: Context, key: str) -> list[Object]:
    """Every copy of the source named by `key`, in any namespace."""
    labelled = ctx.list(CONFIG_MAP, None, f"{COPY_LABEL}=true")
    return [c for c in labelled if c.annotations.get(SOURCE_ANNOTATION) == key]


def copy_of(source: Object, namespace: str, key: str) -> dict[str, Any]:
    """The copy of `source` for `namespace`: its data, its labels except the source label (a
    copy must not be mirrored itself), the copy label and the annotation naming the source."""
    labels = {k: v for k, v in source.labels.items() if k != SOURCE_LABEL}
    labels[COPY_LABEL] = "true"
    copy: dict[str, Any] = {
        "metadata": {
            "name": source.name,
            "namespace": namespace,
            "labels": labels,
            "annotations": {SOURCE_ANNOTATION: key},
        }
    }
    for field in ("data", "binaryData"):
        if source.get(field) is not None:
            copy[field] = source[field]
    return copy


Reconciler = wasmop.export(ConfigMapMirror)
