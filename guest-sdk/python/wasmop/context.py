"""`Context`: the host calls one reconcile makes (Kubernetes reads and writes, Events,
configuration, logs), with Kubernetes errors raised as exceptions (`wasmop.errors`).

Every call is checked by the host against what the plugin declared in `describe`; a call
outside it raises `Denied`. Writes return a `Stored`: the object as the API server stored it,
kept as the JSON text the host sent and parsed only if the plugin asks (`.object()`), so a
reconcile that ignores it pays nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

from . import _wit
from .errors import (
    AlreadyExists,
    Conflict,
    Denied,
    Forbidden,
    Invalid,
    KubeError,
    NotFound,
    Other,
    Unavailable,
    UsageError,
)
from .log import Logger, logger
from .objects import Kind, Object, decode, describe_ref

T = TypeVar("T")
#: What the list calls return (`Context.list` shadows the builtin inside the class).
Objects = list[Object]

_ERRORS: dict[type, type[KubeError]] = {
    _wit.types.KubeError_NotFound: NotFound,
    _wit.types.KubeError_Conflict: Conflict,
    _wit.types.KubeError_AlreadyExists: AlreadyExists,
    _wit.types.KubeError_Forbidden: Forbidden,
    _wit.types.KubeError_Denied: Denied,
    _wit.types.KubeError_Invalid: Invalid,
    _wit.types.KubeError_Unavailable: Unavailable,
    _wit.types.KubeError_Other: Other,
}


def _host(call: str, target: str, f: Callable[[], T]) -> T:
    """Runs one host call, raising its `kube-error` as the matching `KubeError`."""
    try:
        return f()
    except _wit.Err as e:
        error = e.value
        raise _ERRORS.get(type(error), Other)(call, target, str(error.value)) from None


class Patch:
    """A patch body, by patch type; build one with the class methods."""

    def __init__(self, kind: str, body: Any) -> None:
        self.kind = kind
        self.body = body

    @classmethod
    def merge(cls, body: Mapping[str, Any]) -> Patch:
        """A JSON merge patch (RFC 7386): objects merge, `None` deletes, lists are
        replaced."""
        return cls("merge", body)

    @classmethod
    def json(cls, operations: list[dict[str, Any]]) -> Patch:
        """A JSON patch (RFC 6902): a list of operations."""
        return cls("json", operations)

    @classmethod
    def strategic(cls, body: Mapping[str, Any]) -> Patch:
        """A strategic merge patch (built-in kinds only): lists merge by their keys."""
        return cls("strategic", body)

    @classmethod
    def apply(cls, body: Mapping[str, Any]) -> Patch:
        """A server-side apply patch with the plugin's field manager; must carry
        `apiVersion` and `kind`."""
        return cls("apply", body)

    def wit(self) -> _wit.kube.PatchBody:
        """The WIT variant, the body written as JSON text."""
        text = _dumps(self.body)
        k = _wit.kube
        if self.kind == "json":
            return k.PatchBody_Json(text)
        if self.kind == "strategic":
            return k.PatchBody_Strategic(text)
        if self.kind == "apply":
            return k.PatchBody_Apply(text)
        return k.PatchBody_Merge(text)


class Propagation(Enum):
    """What happens to the objects a deleted object owns (its dependents)."""

    BACKGROUND = "background"
    FOREGROUND = "foreground"
    ORPHAN = "orphan"


@dataclass(frozen=True)
class DeleteOptions:
    """How to delete: background propagation and no preconditions by default. `uid` and
    `resource_version` are preconditions (a failed one raises `Conflict` and deletes
    nothing); `grace_period_seconds` `None` is the kind's default."""

    propagation: Propagation = Propagation.BACKGROUND
    uid: str | None = None
    resource_version: str | None = None
    grace_period_seconds: int | None = None

    @classmethod
    def if_unchanged(cls, obj: Mapping[str, Any], **kwargs: Any) -> DeleteOptions:
        """Delete only this incarnation of `obj`, as it was read (its uid and
        resourceVersion)."""
        o = Object(obj)
        if o.uid is None or o.resource_version is None:
            raise UsageError(
                f"{describe_ref(o.ref())} has no metadata.uid and resourceVersion; "
                "use the object as read from the cluster"
            )
        return cls(uid=o.uid, resource_version=o.resource_version, **kwargs)

    def wit(self) -> _wit.kube.DeleteOptions:
        """The WIT record."""
        k = _wit.kube
        return k.DeleteOptions(
            propagation=k.Propagation[self.propagation.name],
            preconditions=k.Preconditions(uid=self.uid, resource_version=self.resource_version),
            grace_period_seconds=self.grace_period_seconds,
        )


class Stored:
    """An object as the API server stored it after a write, parsed on demand."""

    def __init__(self, text: str) -> None:
        #: The JSON text the host returned.
        self.text = text

    def object(self) -> Object:
        """The stored object."""
        return Object.from_json(self.text)


@dataclass(frozen=True)
class Event:
    """A Kubernetes Event: `type` `Normal` or `Warning`, a CamelCase `reason` and an
    `action` (at most 128 characters each), a `note` (at most 1024; longer is cut)."""

    type: str
    reason: str
    action: str
    note: str

    @classmethod
    def normal(cls, reason: str, action: str, note: str) -> Event:
        """Routine progress."""
        return cls("Normal", reason, action, note)

    @classmethod
    def warning(cls, reason: str, action: str, note: str) -> Event:
        """Something an operator should look at."""
        return cls("Warning", reason, action, note)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _with_kind(obj: Mapping[str, Any], kind: Kind | None) -> dict[str, Any]:
    body = dict(obj)
    if kind is not None:
        body.setdefault("apiVersion", kind.api_version)
        body.setdefault("kind", kind.kind)
    return body


def _guard(obj: Mapping[str, Any]) -> str:
    o = Object(obj)
    if o.resource_version is None:
        raise UsageError(
            f"{describe_ref(o.ref())} has no metadata.resourceVersion, so a write cannot be "
            "guarded by it; use the object as read from the cluster"
        )
    return o.resource_version


class Context:
    """The host calls available to one reconcile. Namespaces are `str` for namespaced kinds
    and `None` for cluster-scoped ones; the SDK checks this before calling the host."""

    def __init__(self, target: _wit.types.ObjectRef) -> None:
        #: The object being reconciled.
        self.target = target
        #: The plugin's logger (`ctx.log.info(...)`), the same as `wasmop.log`.
        self.log: Logger = logger

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> Object | None:
        """Reads one object; `None` when it does not exist."""
        ref = kind.ref(name, namespace)
        try:
            text = _host("get", describe_ref(ref), lambda: _wit.kube.get(ref))
        except NotFound:
            return None
        return Object.from_json(text)

    def list(
        self, kind: Kind, namespace: str | None = None, selector: str | None = None
    ) -> Objects:
        """The objects of `kind` in `namespace` (`None`: every namespace the plugin may read)
        matching the label `selector`, if given."""
        if namespace is not None and not kind.namespaced:
            kind.ref("", namespace)
        what = kind.kind + (f" in {namespace}" if namespace else "")
        what += f" matching {selector!r}" if selector else ""
        items = _host("list", what, lambda: _wit.kube.list(kind.wit(), namespace, selector))
        return [Object.from_json(item) for item in items]

    def list_owned(self, kind: Kind, owner: Mapping[str, Any]) -> Objects:
        """The objects of `kind` with an owner reference to `owner` (controller or not): in
        `owner`'s namespace when both kinds are namespaced, everywhere the plugin may read
        otherwise. Answered from the host's owner index for owned and watched kinds."""
        o = Object(owner)
        ref = o.ref()
        if o.uid is None:
            raise UsageError(
                f"{describe_ref(ref)} has no metadata.uid, so it cannot own objects; "
                "use the object the host passed"
            )
        uid = o.uid
        namespace = o.namespace if kind.namespaced else None
        items = _host(
            "list-owned",
            f"{kind.kind} of {describe_ref(ref)}",
            lambda: _wit.kube.list_owned(kind.wit(), namespace, uid),
        )
        return [Object.from_json(item) for item in items]

    def create(self, obj: Mapping[str, Any], kind: Kind | None = None) -> Stored:
        """Creates `obj` (`kind` fills in `apiVersion` and `kind` if it lacks them); raises
        `AlreadyExists` if one of that name exists."""
        body = _with_kind(obj, kind)
        ref = Object(body).ref()
        return Stored(_host("create", describe_ref(ref), lambda: _wit.kube.create(_dumps(body))))

    def apply(self, obj: Mapping[str, Any], kind: Kind | None = None) -> Stored:
        """Server-side applies `obj` with the field manager `wasmop/<plugin>` (forced, as
        controllers do). Set only the fields the plugin manages."""
        body = _with_kind(obj, kind)
        ref = Object(body).ref()
        return Stored(_host("apply", describe_ref(ref), lambda: _wit.kube.apply(_dumps(body))))

    def patch(
        self,
        kind: Kind,
        name: str,
        patch: Patch,
        namespace: str | None = None,
        if_resource_version: str | None = None,
    ) -> Stored:
        """Patches the object of `kind` named `name`; with `if_resource_version`, only if it
        is still at that version (`Conflict` otherwise)."""
        ref = kind.ref(name, namespace)
        body = patch.wit()
        return Stored(
            _host(
                "patch",
                describe_ref(ref),
                lambda: _wit.kube.patch(ref, body, if_resource_version),
            )
        )

    def patch_if_unchanged(self, obj: Mapping[str, Any], patch: Patch) -> Stored:
        """Patches `obj` only if nothing changed it since it was read (`Conflict`
        otherwise)."""
        o = Object(obj)
        return self.patch(o.kind, o.name, patch, o.namespace, _guard(obj))

    def patch_status(
        self,
        kind: Kind,
        name: str,
        patch: Patch,
        namespace: str | None = None,
        if_resource_version: str | None = None,
    ) -> Stored:
        """Patches the status subresource of the object of `kind` named `name`."""
        ref = kind.ref(name, namespace)
        body = patch.wit()
        return Stored(
            _host(
                "patch-status",
                describe_ref(ref),
                lambda: _wit.kube.patch_status(ref, body, if_resource_version),
            )
        )

    def update_status(
        self, obj: Mapping[str, Any], status: Mapping[str, Any], if_unchanged: bool = False
    ) -> Stored:
        """Sets `obj`'s status with the merge patch `{"status": status}` (keys whose value is
        `None` are removed). With `if_unchanged`, only if `obj` is still as it was read: a
        status computed from a stale read raises `Conflict` instead of overwriting a newer
        one."""
        o = Object(obj)
        guard = _guard(obj) if if_unchanged else None
        return self.patch_status(
            o.kind, o.name, Patch.merge({"status": status}), o.namespace, guard
        )

    def delete(
        self,
        kind: Kind,
        name: str,
        namespace: str | None = None,
        options: DeleteOptions | None = None,
    ) -> None:
        """Deletes the object of `kind` named `name` (background propagation and no
        preconditions unless `options` say otherwise). Deleting an object that does not
        exist succeeds."""
        ref = kind.ref(name, namespace)
        opts = (options or DeleteOptions()).wit()
        _host("delete", describe_ref(ref), lambda: _wit.kube.delete(ref, opts))

    def event(self, regarding: Mapping[str, Any], event: Event) -> None:
        """Records a Kubernetes Event about `regarding`. The host writes it in the
        background: returning means it was queued (or dropped by the host's rate limit)."""
        ref = Object(regarding).ref()
        ev = _wit.events
        record = ev.Event(
            regarding=ref,
            event_type=ev.EventType.WARNING if event.type == "Warning" else ev.EventType.NORMAL,
            reason=event.reason,
            action=event.action,
            note=event.note,
        )
        _host("event on", describe_ref(ref), lambda: ev.emit(record))

    def config(self, cls: type[T] | None = None, deny_unknown: bool = True) -> Any:
        """The plugin's configuration as the operator wrote it: a dict (`{}` when there is
        none), or decoded into the dataclass `cls` (give its fields defaults), raising a
        permanent `DecodeError` `invalid plugin configuration: ...` when it does not fit. A
        key `cls` does not have is refused (a typo in the operator's file) unless
        `deny_unknown` is false."""
        from .errors import DecodeError

        value = json.loads(_wit.config.get())
        if cls is None:
            return value
        try:
            return decode(cls, value, deny_unknown)
        except DecodeError as e:
            raise DecodeError(f"invalid plugin configuration: {e}") from None
