"""What the build leaves warm in a plugin's snapshot.

componentize-py pre-initialises a plugin's component: it imports `app.py` at build time and
keeps the interpreter's memory as it is then, and every call starts from that memory in a
fresh instance. So whatever a call computes the first time is computed again by every call:
CPython's specialised bytecode (an instruction adapts to the types it meets, once it has run),
its attribute and method caches, and the SDK's own caches. Run at build time, that work is
part of the snapshot instead.

`export` calls `reconciler` and `export_admission` calls `admission`: they take the SDK's
whole path once through, a made-up object of the plugin's kind against fake host calls (so
no build ever calls a real host; the fakes are put back as they were), and work out how to
decode every dataclass of the plugin's own modules. The plugin's own `reconcile` runs only
on the objects of its `warm_up`, which it sets to ask for it. Measured: the SDK's README,
"Warm start".
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from . import _wit
from .conditions import condition, find_condition, set_condition
from .context import Context, DeleteOptions, Event, Patch
from .errors import Error, UsageError
from .objects import Kind, Object, owned_meta, prepare

if TYPE_CHECKING:
    from .admission import Admission
    from .reconciler import Reconciler

#: Off in the runner of `wasmop dev`, which imports the project once per call.
ENABLED = True


def reconciler(
    cls: type[Reconciler], plugin: Reconciler, call: Callable[[Any, bool, Any], Any]
) -> None:
    """Warms the reconcile path of the plugin class `cls`: `call` is the export's own
    `_call`, run with a stand-in plugin that goes through the `Context`, then with `plugin`
    on each of `cls.warm_up`."""
    if not ENABLED:
        return
    _prepare_modules(cls)
    sample = json.dumps(_sample(cls.kind))
    # Twice at least: CPython specialises an instruction the second time it runs. An error
    # here is the SDK's own (`_StandIn` goes through fakes): it fails the build.
    for cleanup in (False, True, False):
        with _fake_host(sample):
            call(_StandIn(), cleanup, _request(sample))
    for i, obj in enumerate(cls.warm_up):
        # Not an object the host could hand over: the plugin's mistake, and the build's error.
        try:
            text = json.dumps(obj)
            req = _request(text)
        except (TypeError, ValueError, Error) as e:
            raise UsageError(
                f"{cls.__name__}.warm_up[{i}] is not an object to reconcile: {e}"
            ) from None
        for _ in range(2):
            with _fake_host(text):
                try:
                    call(plugin, False, req)
                except _wit.Err as e:
                    # The plugin's own code on its own sample: the build goes on, and says so.
                    message = getattr(e.value, "value", e.value)
                    print(
                        f"build: {cls.__name__}.warm_up[{i}] failed, so the build keeps less "
                        f"of it warm: {message}",
                        file=sys.stderr,
                    )
                    break


def _request(text: str) -> _wit.exports.Request:
    return _wit.exports.Request(target=Object.from_json(text).ref(), object=text)


def admission(cls: type[Admission]) -> None:
    """Works out, for an admission export, how to decode the plugin's dataclasses (its
    `validate` and `mutate` run only on real reviews)."""
    if ENABLED:
        _prepare_modules(cls)


class _StandIn:
    """A plugin that calls what a reconcile typically calls."""

    def reconcile(self, obj: Object, ctx: Context) -> Any:
        from .kinds import CONFIG_MAP
        from .reconciler import Action

        _ = (obj.name, obj.namespace, obj.uid, obj.resource_version, obj.generation)
        _ = (obj.labels, obj.annotations, obj.is_being_deleted, obj.kind, obj.ref())
        # A ConfigMap in the object's namespace (or, for a cluster-scoped kind, in `warm`).
        ns = obj.namespace or "warm"
        ctx.get(CONFIG_MAP, "warm", ns)
        ctx.list(CONFIG_MAP, ns)
        ctx.list_owned(CONFIG_MAP, obj)
        meta = owned_meta(obj, f"{obj.name}-config")
        meta["namespace"] = ns
        ctx.apply({"metadata": meta, "data": {"name": obj.name}}, CONFIG_MAP)
        ctx.patch(CONFIG_MAP, "warm", Patch.merge({"data": {"k": "v"}}), ns)
        status = dict(obj.get("status") or {})
        conditions = list(status.get("conditions") or [])
        set_condition(conditions, condition("Ready", True, "Warm", "warm", obj.generation))
        find_condition(conditions, "Ready")
        status["conditions"] = conditions
        ctx.update_status(obj, status)
        ctx.event(obj, Event.normal("Warm", "Warm", "warm"))
        ctx.log.debug("warm %s", obj.name)
        ctx.config()
        return Action.requeue_after(60)

    def cleanup(self, obj: Object, ctx: Context) -> Any:
        from .kinds import CONFIG_MAP

        ctx.delete(CONFIG_MAP, "warm", obj.namespace or "warm", DeleteOptions())
        return None


def _sample(kind: Kind) -> dict[str, Any]:
    """An object of `kind` as the host hands one over: metadata as the API server fills it
    in, an empty spec and a Ready condition."""
    meta: dict[str, Any] = {
        "name": "warm",
        "uid": "00000000-0000-4000-8000-000000000000",
        "resourceVersion": "1",
        "generation": 1,
        "creationTimestamp": "2025-01-01T00:00:00Z",
        "labels": {"app": "warm"},
        "annotations": {"warm": "warm"},
        "managedFields": [
            {
                "manager": "warm",
                "operation": "Update",
                "apiVersion": kind.api_version,
                "time": "2025-01-01T00:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {".": {}}},
            }
        ],
    }
    if kind.namespaced:
        meta["namespace"] = "warm"
    return {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": meta,
        "spec": {},
        "status": {
            "conditions": [
                condition("Ready", False, "Warm", "warm", 1)
                | {"lastTransitionTime": "2025-01-01T00:00:00Z"}
            ]
        },
    }


@contextmanager
def _fake_host(text: str) -> Iterator[None]:
    """Host calls as an otherwise empty cluster answers them, the object being reconciled
    (`text`) aside: nothing to get or list, a write stores what it was given (a patch, the
    object as it was). Put back as they were afterwards."""

    def not_found(*_: Any) -> Any:
        raise _wit.Err(_wit.types.KubeError_NotFound("warm"))

    fakes: list[tuple[Any, str, Any]] = [
        (_wit.kube, "get", not_found),
        (_wit.kube, "list", lambda *_: []),
        (_wit.kube, "list_owned", lambda *_: []),
        (_wit.kube, "create", lambda body: body),
        (_wit.kube, "apply", lambda body: body),
        (_wit.kube, "patch", lambda *_: text),
        (_wit.kube, "patch_status", lambda *_: text),
        (_wit.kube, "delete", lambda *_: None),
        (_wit.events, "emit", lambda *_: None),
        (_wit.log, "log", lambda *_: None),
        (_wit.config, "get", lambda: "{}"),
    ]
    saved = [(module, name, getattr(module, name)) for module, name, _ in fakes]
    try:
        for module, name, fake in fakes:
            setattr(module, name, fake)
        yield
    finally:
        for module, name, real in saved:
            setattr(module, name, real)


def _prepare_modules(cls: type) -> None:
    """Works out how to decode every dataclass defined in the plugin's own modules: those
    beside the module of `cls` (its `app.py`), the SDK's excepted."""
    home = sys.modules.get(cls.__module__)
    where = getattr(home, "__file__", None)
    if not isinstance(where, str):
        return
    root = os.path.dirname(where) + os.sep
    sdk = os.path.dirname(__file__) + os.sep
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or not path.startswith(root) or path.startswith(sdk):
            continue
        for value in list(vars(module).values()):
            if (
                isinstance(value, type)
                and dataclasses.is_dataclass(value)
                and value.__module__ == module.__name__
            ):
                prepare(value)
