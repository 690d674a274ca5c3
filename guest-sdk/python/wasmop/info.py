"""What a plugin declares about itself: `Info`, built with chained calls from `Kind`s so that
a kind is never misspelt, and its parts (`Mapping`, `Verb`).

Declaring kinds grants calls on them (the host's rules, `wit/plugin.wit`): the primary kind
may be read, applied, patched and have its status patched; owned kinds may also be created and
deleted; watched kinds may be read. Ask for anything else with `permission`, and for no more
than the plugin uses: the operator sees the list before installing it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from . import _wit
from .objects import Kind


class Verb(Enum):
    """The verbs a permission grants; they mirror the host calls."""

    GET = "get"
    LIST = "list"
    CREATE = "create"
    PATCH = "patch"
    APPLY = "apply"
    DELETE = "delete"
    PATCH_STATUS = "patch-status"

    def wit(self) -> _wit.plugin_info.Verb:
        """The WIT enum case."""
        return _wit.plugin_info.Verb[self.name]


@dataclass(frozen=True)
class Mapping:
    """How a change to a watched kind selects the primary objects to reconcile. Build one
    with the class methods."""

    how: str
    key: str | None = None

    @classmethod
    def same_name(cls) -> Mapping:
        """The primary object with the same namespace and name."""
        return cls("same-name")

    @classmethod
    def label(cls, key: str) -> Mapping:
        """The primary object named by this label's value, in the changed object's
        namespace."""
        return cls("label", key)

    @classmethod
    def annotation(cls, key: str) -> Mapping:
        """The primary object named by this annotation's value: `name` or
        `namespace/name`."""
        return cls("annotation", key)

    @classmethod
    def all_in_namespace(cls) -> Mapping:
        """Every primary object in the changed object's namespace."""
        return cls("all-in-namespace")

    @classmethod
    def all(cls) -> Mapping:
        """Every primary object."""
        return cls("all")

    def wit(self) -> _wit.plugin_info.Mapping:
        """The WIT variant."""
        pi = _wit.plugin_info
        if self.how == "label":
            return pi.Mapping_Label(self.key or "")
        if self.how == "annotation":
            return pi.Mapping_Annotation(self.key or "")
        if self.how == "all-in-namespace":
            return pi.Mapping_AllInNamespace()
        if self.how == "all":
            return pi.Mapping_All()
        return pi.Mapping_SameName()


@dataclass(frozen=True)
class Permission:
    """`verbs` on objects of `kind`, in `namespaces` (none: those the plugin watches), which
    the operator must grant too. `Info.permission` adds one to a reconciler's declaration;
    `Webhooks(permissions=[...])` lists the reads (`GET`, `LIST`) a review makes."""

    kind: Kind
    verbs: tuple[Verb, ...]
    namespaces: tuple[str, ...] = ()

    def __init__(self, kind: Kind, verbs: Iterable[Verb], namespaces: Iterable[str] = ()) -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "verbs", tuple(verbs))
        object.__setattr__(self, "namespaces", tuple(namespaces))

    def wit(self) -> _wit.plugin_info.Permission:
        """The WIT record."""
        return _wit.plugin_info.Permission(
            group=self.kind.group,
            kind=self.kind.kind,
            verbs=[v.wit() for v in self.verbs],
            namespaces=list(self.namespaces),
        )


@dataclass
class Info:
    """Everything a plugin declares: `Info("team-info", "1.0.0").owns(CONFIG_MAP)`. The
    primary kind is the reconciler's `kind` and is filled in by the SDK."""

    name: str
    version: str
    _selector: str | None = None
    _owns: list[Kind] = field(default_factory=list)
    _watches: list[tuple[Kind, str | None, Mapping]] = field(default_factory=list)
    _finalizer: str | None = None
    _on_metadata: bool = False
    _permissions: list[Permission] = field(default_factory=list)

    def selector(self, selector: str) -> Info:
        """Reconciles only primary objects matching this label selector."""
        self._selector = selector
        return self

    def owns(self, kind: Kind) -> Info:
        """The plugin creates objects of `kind` with a controller reference to the primary
        object; a change to one reconciles its owner."""
        self._owns.append(kind)
        return self

    def watches(self, kind: Kind, mapping: Mapping, selector: str | None = None) -> Info:
        """A change to an object of `kind` (matching `selector`) reconciles the primary
        objects `mapping` selects."""
        self._watches.append((kind, selector, mapping))
        return self

    def finalizer(self, name: str) -> Info:
        """The host adds this finalizer to every primary object and calls `cleanup` when one
        is being deleted (a qualified name with a prefix: `example.com/cleanup`)."""
        self._finalizer = name
        return self

    def reconcile_on_metadata_change(self, on: bool = True) -> Info:
        """Also reconcile on changes that do not bump `metadata.generation`."""
        self._on_metadata = on
        return self

    def permission(self, kind: Kind, verbs: Iterable[Verb], namespaces: Iterable[str] = ()) -> Info:
        """`verbs` on objects of `kind`, in `namespaces` (default: those the plugin
        watches). The operator must grant it too."""
        self._permissions.append(Permission(kind, verbs, namespaces))
        return self

    def wit(self, primary: Kind) -> _wit.plugin_info.Info:
        """The WIT record, with `primary` as the primary kind."""
        pi = _wit.plugin_info
        return pi.Info(
            name=self.name,
            version=self.version,
            primary=primary.wit(),
            primary_selector=self._selector,
            owns=[k.wit() for k in self._owns],
            watches=[
                pi.Watch(kind=k.wit(), selector=s, mapping=m.wit()) for k, s, m in self._watches
            ],
            finalizer=self._finalizer,
            reconcile_on_metadata_change=self._on_metadata,
            permissions=[p.wit() for p in self._permissions],
        )
