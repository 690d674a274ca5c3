"""Kubernetes objects as dicts: `Kind` (a group/version/kind and its scope), `Object` (a dict
with light helpers for metadata), owner references, and `decode`, which turns a part of an
object (its spec, the plugin's configuration) into a dataclass and says what does not fit.

Objects cross the boundary as JSON text; the SDK hands a plugin `Object`s, which are plain
dicts (`obj["spec"]["port"]` works) with read-only helpers on top (`obj.name`,
`obj.namespace`, `obj.generation`, `obj.labels`, ...).
"""

from __future__ import annotations

import dataclasses
import json
import types as pytypes
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, Union

from . import _wit
from .errors import DecodeError, UsageError

T = TypeVar("T")


@dataclass(frozen=True)
class Kind:
    """A Kubernetes kind: `group` (`""` for the core group), `version`, `kind`, and whether
    its objects live in a namespace."""

    group: str
    version: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """`apiVersion` as objects carry it: `v1`, `apps/v1`."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        return f"{self.api_version}/{self.kind}"

    def wit(self) -> _wit.types.Gvk:
        """The WIT record."""
        return _wit.types.Gvk(group=self.group, version=self.version, kind=self.kind)

    def ref(self, name: str, namespace: str | None = None) -> _wit.types.ObjectRef:
        """The identity of the object of this kind named `name`, checking the scope: a
        namespaced kind needs `namespace`, a cluster-scoped one must not have one."""
        if self.namespaced and namespace is None:
            raise UsageError(f"{self.kind} {name} is namespaced: a namespace is required")
        if not self.namespaced and namespace is not None:
            raise UsageError(f"{self.kind} is cluster-scoped: namespace `{namespace}` cannot apply")
        return _wit.types.ObjectRef(kind=self.wit(), namespace=namespace, name=name)


def describe_ref(ref: _wit.types.ObjectRef) -> str:
    """`Kind namespace/name` (or `Kind name`), as messages name objects."""
    where = f"{ref.namespace}/" if ref.namespace is not None else ""
    return f"{ref.kind.kind} {where}{ref.name}"


class Object(dict[str, Any]):
    """A Kubernetes object: the dict of its JSON, with helpers for its metadata."""

    @classmethod
    def from_json(cls, text: str) -> Object:
        """Parses one object's JSON (as the host hands it over)."""
        value = json.loads(text)
        if not isinstance(value, dict):
            raise DecodeError(f"an object must be a JSON object, not {_type_name(value)}")
        return cls(value)

    @property
    def metadata(self) -> dict[str, Any]:
        """`metadata` (empty if absent)."""
        meta = self.get("metadata")
        return meta if isinstance(meta, dict) else {}

    @property
    def name(self) -> str:
        """`metadata.name`, or `""` for an object built locally without one."""
        return str(self.metadata.get("name") or "")

    @property
    def namespace(self) -> str | None:
        """`metadata.namespace`; `None` for cluster-scoped objects."""
        ns = self.metadata.get("namespace")
        return str(ns) if ns else None

    @property
    def uid(self) -> str | None:
        """`metadata.uid`; set on every object read from the cluster."""
        uid = self.metadata.get("uid")
        return str(uid) if uid else None

    @property
    def resource_version(self) -> str | None:
        """`metadata.resourceVersion`; set on every object read from the cluster."""
        rv = self.metadata.get("resourceVersion")
        return str(rv) if rv else None

    @property
    def generation(self) -> int | None:
        """`metadata.generation`, which the API server bumps on every spec change."""
        generation = self.metadata.get("generation")
        return generation if isinstance(generation, int) else None

    @property
    def labels(self) -> dict[str, str]:
        """`metadata.labels` (empty if none)."""
        return dict(self.metadata.get("labels") or {})

    @property
    def annotations(self) -> dict[str, str]:
        """`metadata.annotations` (empty if none)."""
        return dict(self.metadata.get("annotations") or {})

    @property
    def is_being_deleted(self) -> bool:
        """True once deletion was requested (`metadata.deletionTimestamp` is set)."""
        return bool(self.metadata.get("deletionTimestamp"))

    @property
    def kind(self) -> Kind:
        """The object's kind, from its `apiVersion` and `kind` (its scope from whether it
        has a namespace)."""
        api_version = str(self.get("apiVersion") or "")
        group, _, version = api_version.rpartition("/")
        return Kind(group, version, str(self.get("kind") or ""), self.namespace is not None)

    def ref(self) -> _wit.types.ObjectRef:
        """The object's identity, for host calls."""
        if not self.name:
            raise UsageError(f"the {self.get('kind') or 'object'} has no metadata.name")
        return _wit.types.ObjectRef(kind=self.kind.wit(), namespace=self.namespace, name=self.name)

    def spec_as(self, cls: type[T]) -> T:
        """The object's `spec` decoded into the dataclass `cls` (see `decode`); a
        `DecodeError` naming the object and what does not fit otherwise."""
        return self.decode(cls, "spec")

    def decode(self, cls: type[T], field: str) -> T:
        """The object's top-level `field` decoded into `cls`; a permanent `DecodeError`
        `cannot decode <Kind> <ns>/<name> from the host as <gvk>: <what>` otherwise."""
        try:
            if field not in self:
                raise DecodeError(f"missing field `{field}`")
            return decode(cls, self[field])
        except DecodeError as e:
            ref = describe_ref(self.ref())
            raise DecodeError(f"cannot decode {ref} from the host as {self.kind}: {e}") from None


def owner_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    """A controller reference to `owner` (`controller: true`, `blockOwnerDeletion: true`),
    for `metadata.ownerReferences` of an object the plugin creates. `owner` must have been
    read from the cluster (it needs its uid). A namespaced owner only owns objects in its own
    namespace; a cluster-scoped one (a Namespace) owns objects anywhere."""
    obj = Object(owner)
    ref = obj.ref()
    if obj.uid is None:
        raise UsageError(
            f"{describe_ref(ref)} has no metadata.uid, so it cannot own objects; "
            "use the object the host passed"
        )
    return {
        "apiVersion": obj.kind.api_version,
        "kind": obj.kind.kind,
        "name": obj.name,
        "uid": obj.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def owned_meta(owner: Mapping[str, Any], name: str) -> dict[str, Any]:
    """Metadata for an object named `name` owned by `owner`: in the owner's namespace (none
    for a cluster-scoped owner), with a controller reference to it."""
    meta: dict[str, Any] = {"name": name}
    namespace = Object(owner).namespace
    if namespace is not None:
        meta["namespace"] = namespace
    meta["ownerReferences"] = [owner_reference(owner)]
    return meta


def object_reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A reference to `obj` as status fields and Events carry one (a core/v1
    ObjectReference: apiVersion, kind, namespace, name, uid, resourceVersion), as client-go's
    `reference.GetReference`."""
    o = Object(obj)
    o.ref()
    out: dict[str, Any] = {"apiVersion": o.kind.api_version, "kind": o.kind.kind}
    if o.namespace is not None:
        out["namespace"] = o.namespace
    out["name"] = o.name
    if o.uid is not None:
        out["uid"] = o.uid
    if o.resource_version is not None:
        out["resourceVersion"] = o.resource_version
    return out


def camel(name: str) -> str:
    """`observed_generation` -> `observedGeneration`: a dataclass field's JSON key."""
    first, *rest = name.split("_")
    return first + "".join(part[:1].upper() + part[1:] for part in rest)


def decode(cls: type[T], value: Any, deny_unknown: bool = False) -> T:
    """Decodes JSON data into `cls`: a dataclass (fields by their camelCase JSON keys; a
    field without a default is required), `str`, `int`, `float`, `bool`, `Any`, a `Literal`
    of strings, `list[X]`, `dict[str, X]`, `X | None`, or an `Object`. Unknown keys of a
    dataclass are ignored, or refused with `deny_unknown` (serde's `deny_unknown_fields`, for
    configurations, where a key is a typo). What does not fit raises `DecodeError` in serde's
    words (`missing field `port``, `invalid type: string "x", expected an integer`, `unknown
    field `quotas`, expected one of ...`), with the path below the decoded value
    (`at `tls.port``)."""
    return typing.cast(T, _decode(cls, value, "", deny_unknown))


def _expected(names: list[str]) -> str:
    """serde's list of what was expected: `a`, `a` or `b`, one of `a`, `b`, `c`."""
    quoted = [f"`{n}`" for n in names]
    if len(quoted) == 1:
        return quoted[0]
    if len(quoted) == 2:
        return f"{quoted[0]} or {quoted[1]}"
    return "one of " + ", ".join(quoted)


def _decode(tp: Any, value: Any, path: str, strict: bool) -> Any:
    at = f" at `{path}`" if path else ""
    if tp is Any:
        return value
    # The scalars first: most fields are one.
    if tp is bool:
        if not isinstance(value, bool):
            raise DecodeError(f"invalid type: {_type_name(value)}, expected a boolean{at}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise DecodeError(f"invalid type: {_type_name(value)}, expected an integer{at}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DecodeError(f"invalid type: {_type_name(value)}, expected a number{at}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise DecodeError(f"invalid type: {_type_name(value)}, expected a string{at}")
        return value
    if typing.get_origin(tp) is typing.Literal:
        allowed = [str(a) for a in typing.get_args(tp)]
        if not isinstance(value, str):
            raise DecodeError(f"invalid type: {_type_name(value)}, expected a string{at}")
        if value not in allowed:
            raise DecodeError(f"unknown variant `{value}`, expected {_expected(allowed)}{at}")
        return value
    origin = typing.get_origin(tp)
    if origin in (Union, pytypes.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _decode(inner[0], value, path, strict)
        raise DecodeError(f"unions other than `X | None` cannot be decoded{at}")
    if origin is list:
        (item,) = typing.get_args(tp) or (Any,)
        if not isinstance(value, list):
            raise DecodeError(f"invalid type: {_type_name(value)}, expected a list{at}")
        return [_decode(item, v, f"{path}[{i}]", strict) for i, v in enumerate(value)]
    if origin is dict:
        _, item = typing.get_args(tp) or (str, Any)
        if not isinstance(value, dict):
            raise DecodeError(f"invalid type: {_type_name(value)}, expected a map{at}")
        return {k: _decode(item, v, _join(path, k), strict) for k, v in value.items()}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(value, dict):
            raise DecodeError(
                f"invalid type: {_type_name(value)}, expected struct {tp.__name__}{at}"
            )
        plan = _plan(tp)
        if strict:
            for key in value:
                if key not in plan.keys:
                    where = f" in `{path}`" if path else ""
                    raise DecodeError(
                        f"unknown field `{key}`, expected {_expected(list(plan.keys))}{where}"
                    )
        kwargs: dict[str, Any] = {}
        for f in plan.fields:
            if f.key in value:
                kwargs[f.name] = _decode(f.hint, value[f.key], _join(path, f.key), strict)
            elif f.required:
                if f.optional:
                    kwargs[f.name] = None
                else:
                    where = f" in `{path}`" if path else ""
                    raise DecodeError(f"missing field `{f.key}`{where}")
        return tp(**kwargs)
    if tp is Object:
        if not isinstance(value, dict):
            raise DecodeError(f"invalid type: {_type_name(value)}, expected an object{at}")
        return Object(value)
    raise DecodeError(f"the type {tp!r} cannot be decoded{at}")


@dataclass(frozen=True)
class _Field:
    name: str
    #: The JSON key (camelCase).
    key: str
    #: The resolved type hint.
    hint: Any
    #: No default: the key must be there (or the hint admits `None`).
    required: bool
    optional: bool


@dataclass(frozen=True)
class _Plan:
    fields: tuple[_Field, ...]
    #: The JSON keys, in field order.
    keys: tuple[str, ...]


#: How to decode each dataclass: its resolved hints and JSON keys, worked out once
#: (`typing.get_type_hints` is most of a small decode's cost). Filled at build time for the
#: plugin's own dataclasses (`prepare`), so that a call, which starts from the build's
#: snapshot, finds them here.
_PLANS: dict[type, _Plan] = {}


def _plan(tp: type) -> _Plan:
    plan = _PLANS.get(tp)
    if plan is None:
        hints = typing.get_type_hints(tp)
        fields = tuple(
            _Field(
                name=f.name,
                key=camel(f.name),
                hint=hints[f.name],
                required=f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING,
                optional=_is_optional(hints[f.name]),
            )
            for f in dataclasses.fields(tp)
        )
        plan = _Plan(fields, tuple(f.key for f in fields))
        _PLANS[tp] = plan
    return plan


def prepare(tp: Any) -> None:
    """Works out now how to decode `tp` and every dataclass its fields reach, so that
    `decode` finds it done. The SDK does it at build time for every dataclass of the plugin's
    own modules; a type it cannot resolve is left for `decode` to report."""
    seen: set[int] = set()
    todo = [tp]
    while todo:
        t = todo.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        todo.extend(typing.get_args(t))
        if dataclasses.is_dataclass(t) and isinstance(t, type):
            try:
                todo.extend(f.hint for f in _plan(t).fields)
            except Exception:  # noqa: BLE001 - a hint that does not resolve fails in decode
                continue


def _is_optional(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, pytypes.UnionType) and type(None) in typing.get_args(tp)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _type_name(value: Any) -> str:
    """The JSON type of `value` as serde names it, with a short preview of scalars."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{str(value).lower()}`"
    if isinstance(value, (int, float)):
        return f"number `{value}`"
    if isinstance(value, str):
        preview = value if len(value) <= 32 else value[:32] + "..."
        return f"string {json.dumps(preview)}"
    if isinstance(value, list):
        return "a list"
    return "a map"
