"""Admission webhooks in Python: an `Admission` subclass reviews one kind before the API
server stores it, beside the plugin's `Reconciler` (whose name and version it shares), or on
its own in an admission-only plugin (which names itself).

    class DatabaseAdmission(wasmop.Admission):
        kind = DATABASE

        def webhooks(self) -> Webhooks:
            ops = [Operation.CREATE, Operation.UPDATE]
            return Webhooks(
                mutating=Webhook(ops, failure_policy=FailurePolicy.IGNORE, timeout_seconds=5),
                validating=Webhook(ops, timeout_seconds=5),
            )

        def mutate(self, review: Review, ctx: Context) -> Object | None:
            db = review.object
            if db is None or "replicas" in db.get("spec", {}):
                return None  # admitted unchanged
            db["spec"]["replicas"] = 1
            return db  # the host computes the JSON patch

        def validate(self, review: Review, ctx: Context) -> Allowed | None:
            if review.object is not None and review.object["spec"].get("port") == 0:
                raise Refused.invalid("spec.port: Invalid value: 0")
            return None  # admitted

    Reconciler = wasmop.export(DatabaseConfig)
    Admission = wasmop.export_admission(DatabaseAdmission, DatabaseConfig)

An admission-only plugin binds no `Reconciler` and gives its name and version instead:

    Admission = wasmop.export_admission(RequiredLabels, name="required-labels", version="0.1.0")

`guest-sdk/python/build` builds a plugin whose `app.py` binds `Admission` against the world
`plugin-with-admission`, or `admission-plugin` when it binds no `Reconciler`. A review may
read through `ctx` within the plugin's grants; every write is refused by the host. A review
that raises anything but `Refused` is a failed review (its traceback's last line in the
host's message), answered by the webhook's failure policy.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import ClassVar

from . import _wit, warm
from .context import Context, _dumps
from .errors import UsageError
from .info import Info, Permission
from .objects import Kind, Object
from .reconciler import Reconciler, error_message


class Operation(Enum):
    """An operation a webhook reviews."""

    CREATE = "CREATE"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    CONNECT = "CONNECT"

    def wit(self) -> _wit.admission.Operation:
        """The WIT enum."""
        return _wit.admission.Operation[self.name]


class FailurePolicy(Enum):
    """What the API server does when a review cannot be answered: `FAIL` refuses the
    request (the default), `IGNORE` lets it through with a warning."""

    FAIL = "Fail"
    IGNORE = "Ignore"

    def wit(self) -> _wit.admission.FailurePolicy:
        """The WIT enum."""
        return _wit.admission.FailurePolicy[self.name]


@dataclass
class Webhook:
    """One webhook on the `Admission`'s kind: the operations it reviews, selectors on the
    request's namespace and on the object (label-selector syntax), its failure policy, how
    long the API server waits (1 to 30 s), and a subresource instead of the object."""

    operations: list[Operation]
    namespace_selector: str | None = None
    object_selector: str | None = None
    failure_policy: FailurePolicy = FailurePolicy.FAIL
    timeout_seconds: int = 10
    subresource: str | None = None

    def wit(self, kind: Kind) -> _wit.admission.Registration:
        """The WIT record, for `kind`."""
        a = _wit.admission
        return a.Registration(
            rules=[
                a.Rule(
                    kind=kind.wit(),
                    operations=[o.wit() for o in self.operations],
                    subresource=self.subresource,
                )
            ],
            namespace_selector=self.namespace_selector,
            object_selector=self.object_selector,
            failure_policy=self.failure_policy.wit(),
            timeout_seconds=self.timeout_seconds,
        )


@dataclass
class Webhooks:
    """The webhooks a plugin asks the host to register (at least one), and the reads (`GET`,
    `LIST`) its reviews make beyond the reviewed object that the reconciler's `Info` does not
    already ask for: all an admission-only plugin may read. The operator grants them as
    `Info`'s; the host refuses other verbs at load."""

    validating: Webhook | None = None
    mutating: Webhook | None = None
    permissions: list[Permission] = field(default_factory=list)


@dataclass(frozen=True)
class UserInfo:
    """Who made the request, as the API server authenticated them."""

    username: str
    uid: str
    groups: list[str]
    extra: dict[str, list[str]]


@dataclass(frozen=True)
class Review:
    """One admission request: the operation, the object as it would be stored (`None` on a
    delete), the object as it is stored (updates, deletes), who asked, and whether it is a
    dry run."""

    uid: str
    operation: Operation
    name: str | None
    namespace: str | None
    sub_resource: str | None
    user: UserInfo
    object: Object | None
    old_object: Object | None
    dry_run: bool


@dataclass
class Allowed:
    """An admission, with warnings for the client (`kubectl` prints them)."""

    warnings: list[str] = field(default_factory=list)


@dataclass
class Mutated:
    """A mutating review's admission: the changed object (`None`: unchanged) and warnings."""

    object: Object | None = None
    warnings: list[str] = field(default_factory=list)


class Refused(Exception):  # noqa: N818 - it is the answer, not an error of the plugin's
    """Raise it to refuse the request: `message` is what the user sees, `reason` and `code`
    the status (`Forbidden`, 403 by default; `Refused.invalid` is `Invalid`, 422, what the
    API server says of a bad field)."""

    def __init__(
        self,
        message: str,
        reason: str = "Forbidden",
        code: int = 403,
        warnings: list[str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason
        self.code = code
        self.warnings = warnings or []

    @classmethod
    def invalid(cls, message: str) -> Refused:
        """A refusal for an invalid object: reason `Invalid`, code 422."""
        return cls(message, "Invalid", 422)

    def wit(self) -> _wit.admission.Denial:
        """The WIT record."""
        return _wit.admission.Denial(
            message=self.message, reason=self.reason, code=self.code, warnings=self.warnings
        )


class Admission:
    """The admission half of a plugin. Subclass it, set `kind`, implement `webhooks` and
    `validate` and/or `mutate`, and export it at the bottom of `app.py` with
    `Admission = wasmop.export_admission(MyAdmission, MyReconciler)`, or, in an
    admission-only plugin, `wasmop.export_admission(MyAdmission, name=..., version=...)`."""

    #: The kind it reviews.
    kind: ClassVar[Kind]

    def webhooks(self) -> Webhooks:
        """The webhooks to register. Called once per loaded version; must not call the host."""
        raise NotImplementedError("an Admission must implement webhooks")

    def validate(self, review: Review, ctx: Context) -> Allowed | None:
        """Admits the request (`None` or `Allowed`) or refuses it (`raise Refused(...)`)."""
        return None

    def mutate(self, review: Review, ctx: Context) -> Object | Mutated | None:
        """Admits the request unchanged (`None`), changed (the object, or `Mutated`), or
        refuses it (`raise Refused(...)`). Mutating webhooks run before validating ones."""
        return None


def _review(kind: Kind, req: _wit.admission.Review) -> tuple[Review, Context]:
    """The request as the SDK's `Review`, and the context of its object."""
    objects = []
    for which, text in (("object", req.object), ("old object", req.old_object)):
        try:
            objects.append(None if text is None else Object.from_json(text))
        except Exception as e:  # noqa: BLE001 - whatever the host sent, the answer is a refusal
            raise _wit.Err(
                Refused(f"cannot decode the {which}: {e}", "BadRequest", 400).wit()
            ) from None
    review = Review(
        uid=req.uid,
        operation=Operation[req.operation.name],
        name=req.name,
        namespace=req.namespace,
        sub_resource=req.sub_resource,
        user=UserInfo(
            username=req.user_info.username,
            uid=req.user_info.uid,
            groups=list(req.user_info.groups),
            extra={k: list(v) for k, v in req.user_info.extra},
        ),
        object=objects[0],
        old_object=objects[1],
        dry_run=req.dry_run,
    )
    target = _wit.types.ObjectRef(kind=kind.wit(), namespace=req.namespace, name=req.name or "")
    return review, Context(target)


def _failed(e: BaseException) -> BaseException:
    """An exception that is not a refusal: its message goes to stderr, whose last line the
    host puts in the failed review's message, and it ends the call as a trap."""
    print(error_message(e).replace("\n", " | "), file=sys.stderr)
    return e


#: A plugin's name: a DNS-1123 label, as the host parses it (`PluginName`), at most 63
#: characters. Checked here too so that a bad one fails the build, not the load.
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
#: A plugin's version: what the host accepts (`check_version` in
#: `host/runtime/src/describe/declared.rs`), 1 to 64 characters of `[A-Za-z0-9.+_-]`.
_VERSION = re.compile(r"[A-Za-z0-9.+_-]{1,64}")


def _identity(
    cls: type[Admission],
    reconciler: type[Reconciler] | None,
    name: str | None,
    version: str | None,
) -> Callable[[], Info]:
    """Who the plugin is, from what `export_admission` was given (read at `describe`, as the
    reconciler's `describe` says it), or a `UsageError` that says how to fix the call."""
    call = f"export_admission({getattr(cls, '__name__', repr(cls))}, ...)"
    if not (isinstance(cls, type) and issubclass(cls, Admission)):
        raise UsageError(f"{call}: {cls!r} is not a subclass of wasmop.Admission")
    if not hasattr(cls, "kind"):
        raise UsageError(f"{call}: {cls.__name__} does not set `kind`, the kind it reviews")
    if reconciler is not None:
        if not (isinstance(reconciler, type) and issubclass(reconciler, Reconciler)):
            raise UsageError(
                f"{call}: {reconciler!r} is not a subclass of wasmop.Reconciler; an "
                "admission-only plugin passes name= and version= (keywords) instead"
            )
        if name is not None or version is not None:
            raise UsageError(
                f"{call}: give the plugin's Reconciler or name= and version=, not both: the "
                f"admission half of a plugin that reconciles has {reconciler.__name__}'s name "
                "and version"
            )
        if not _wit.exports_reconciler:
            raise UsageError(
                f"{call}: app.py binds no `Reconciler`, so the component is admission-only and "
                f"would not reconcile with {reconciler.__name__}: bind `Reconciler = "
                f"wasmop.export({reconciler.__name__})` too, or pass name= and version= "
                "instead of it"
            )
        return reconciler().describe
    if name is None or version is None:
        raise UsageError(
            f"{call}: an admission-only plugin names itself: pass name= and version= "
            "(or the plugin's Reconciler, whose name and version it shares)"
        )
    if not (isinstance(name, str) and _NAME.fullmatch(name)):
        raise UsageError(
            f"{call}: name {name!r} is not a plugin name: a DNS-1123 label (lowercase "
            "letters, digits and `-`, starting and ending with a letter or digit), at most "
            "63 characters"
        )
    if not (isinstance(version, str) and _VERSION.fullmatch(version)):
        raise UsageError(
            f"{call}: version {version!r} is not a version: 1 to 64 characters of "
            "letters, digits and `.+_-`"
        )
    if _wit.exports_reconciler:
        raise UsageError(
            f"{call}: app.py also binds `Reconciler`, and a plugin that reconciles has its "
            "reconciler's name and version: pass the Reconciler instead of name= and version="
        )
    info = Info(name, version)
    return lambda: info


def export_admission(
    cls: type[Admission],
    reconciler: type[Reconciler] | None = None,
    *,
    name: str | None = None,
    version: str | None = None,
) -> type:
    """The class componentize-py exports for `cls`: bind it to the name `Admission` at the
    top level of the plugin's `app.py`. Who the plugin is (admission-info's `name` and
    `version`) comes from one of:

    - `reconciler`, the plugin's `Reconciler`, exported beside it (`Reconciler =
      wasmop.export(...)`), whose name and version the admission half declares too;
    - `name` and `version`, in an admission-only plugin: its `app.py` binds no `Reconciler`,
      and the build targets the world `admission-plugin`.

    Raises `UsageError` for anything else (neither or both, a name that is not a DNS-1123
    label, a version the host would refuse, a form that does not fit what `app.py` binds).
    `app.py` runs when the build pre-initialises the component, so the build fails with the
    message."""
    who = _identity(cls, reconciler, name, version)
    plugin = cls()

    class Export:
        def describe(self) -> _wit.admission.AdmissionInfo:
            info = who()
            hooks = plugin.webhooks()
            return _wit.admission.AdmissionInfo(
                name=info.name,
                version=info.version,
                validating=hooks.validating.wit(cls.kind) if hooks.validating else None,
                mutating=hooks.mutating.wit(cls.kind) if hooks.mutating else None,
                permissions=[p.wit() for p in hooks.permissions],
            )

        def validate(self, req: _wit.admission.Review) -> _wit.admission.Allowed:
            review, ctx = _review(cls.kind, req)
            try:
                allowed = plugin.validate(review, ctx) or Allowed()
            except Refused as r:
                raise _wit.Err(r.wit()) from None
            except BaseException as e:
                raise _failed(e) from None
            return _wit.admission.Allowed(warnings=allowed.warnings)

        def mutate(self, req: _wit.admission.Review) -> _wit.admission.Mutation:
            review, ctx = _review(cls.kind, req)
            try:
                answer = plugin.mutate(review, ctx)
            except Refused as r:
                raise _wit.Err(r.wit()) from None
            except BaseException as e:
                raise _failed(e) from None
            if answer is None:
                return _wit.admission.Mutation(object=None, warnings=[])
            if isinstance(answer, Mutated):
                text = None if answer.object is None else _dumps(answer.object)
                return _wit.admission.Mutation(object=text, warnings=answer.warnings)
            return _wit.admission.Mutation(object=_dumps(answer), warnings=[])

    Export.__name__ = Export.__qualname__ = f"{cls.__name__}Export"
    warm.admission(cls)
    return Export
