"""The `Reconciler` base class a plugin subclasses, the `Action` it returns, and `export`,
which turns it into the component's `wasmop:plugin/reconciler` export.

Reconcile is level-based: given the object as it is now, make the world match it, and be
idempotent, since the host calls it again on every change, resync and retry. Each call runs
in a fresh instance, so nothing carries over between calls (module globals included, beyond
what the build's pre-initialisation set up); keep state in the cluster.

How a call ends: the `Action` returned (`None` is `Action.done()`), or the exception raised.
`Retryable` and `Permanent` say which they are; a `KubeError` is retryable unless it is
`Denied` or `Invalid`; any other `wasmop.Error` is permanent; any other exception (even
`SystemExit` from `sys.exit()`) is retryable and its message carries the exception and the
last frames of its traceback (at most `TRACEBACK_FRAMES` frames and `MESSAGE_CAP`
characters), so a bug shows where it is in the host's log, Event and metrics instead of a
bare trap.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from . import _wit, warm
from .context import Context
from .errors import Error
from .info import Info
from .objects import Kind, Object

#: Frames of an uncaught exception's traceback its message keeps: the innermost ones, where
#: the bug is. Bounded so a deep recursion's error stays one readable line.
TRACEBACK_FRAMES = 5
#: The most characters an error message carries; the host cuts and escapes it again.
MESSAGE_CAP = 2048


@dataclass(frozen=True)
class Action:
    """What to do after a successful reconcile: nothing until something changes
    (`Action.done()`), or reconcile again after `requeue_after_ms` milliseconds (the host
    raises a delay below its `minRequeueAfter`, 1 s by default)."""

    requeue_after_ms: int | None = None

    @classmethod
    def done(cls) -> Action:
        """Nothing more until something changes (or the periodic resync)."""
        return cls()

    @classmethod
    def requeue_after(cls, seconds: float) -> Action:
        """Reconcile this object again after `seconds`."""
        return cls(max(0, int(seconds * 1000)))

    def wit(self) -> _wit.exports.Action:
        """The WIT variant."""
        if self.requeue_after_ms is None:
            return _wit.exports.Action_Done()
        return _wit.exports.Action_RequeueAfter(min(self.requeue_after_ms, 2**64 - 1))


class Reconciler:
    """A reconcile plugin. Subclass it, set `kind` to the primary kind, implement `describe`
    and `reconcile` (and `cleanup` if you declare a finalizer), and export it at the bottom of
    the plugin's `app.py` with `Reconciler = wasmop.export(MyReconciler)`."""

    #: The kind it reconciles.
    kind: ClassVar[Kind]

    #: Objects of `kind` the build reconciles before it snapshots the component, as if the
    #: cluster held nothing else (a get finds nothing, a list is empty, a write stores what it
    #: was given; nothing reaches a cluster), so that every call starts with this plugin's
    #: own code warm: CPython's bytecode specialised and its caches filled. Optional
    #: (measured in the SDK's README, "Warm start"). What `reconcile` leaves in module
    #: globals here, every call starts with.
    warm_up: ClassVar[Sequence[Mapping[str, Any]]] = ()

    def describe(self) -> Info:
        """What the plugin declares. Called once per loaded version; must not call the
        host."""
        raise NotImplementedError("a Reconciler must implement describe")

    def reconcile(self, obj: Object, ctx: Context) -> Action | None:
        """Brings the world in line with `obj`."""
        raise NotImplementedError("a Reconciler must implement reconcile")

    def cleanup(self, obj: Object, ctx: Context) -> Action | None:
        """Called instead of `reconcile` for an object that is being deleted and carries the
        plugin's finalizer; the host removes the finalizer when this returns `done`. The
        default has nothing to clean up."""
        return Action.done()


def error_message(e: BaseException) -> str:
    """An uncaught exception as one message: `Type: message`, then the last
    `TRACEBACK_FRAMES` frames (`file:line in function`), cut at `MESSAGE_CAP` characters."""
    head = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    frames = traceback.extract_tb(e.__traceback__)[-TRACEBACK_FRAMES:]
    lines = [head]
    if frames:
        lines.append(f"traceback (innermost {len(frames)} frames):")
        lines.extend(f"  {f.filename}:{f.lineno} in {f.name}" for f in frames)
    text = "\n".join(lines)
    return text if len(text) <= MESSAGE_CAP else text[: MESSAGE_CAP - 3] + "..."


def _fail(retryable: bool, message: str) -> _wit.Err[_wit.exports.Error]:
    error: _wit.exports.Error = (
        _wit.exports.Error_Retryable(message)
        if retryable
        else _wit.exports.Error_Permanent(message)
    )
    return _wit.Err(error)


def _call(plugin: Reconciler, cleanup: bool, req: _wit.exports.Request) -> _wit.exports.Action:
    """One reconcile or cleanup: the request decoded, the plugin called, its result or
    exception mapped to the WIT result (an error is raised as `Err`, componentize-py's way)."""
    try:
        obj = Object.from_json(req.object)
    except Exception as e:  # noqa: BLE001 - whatever the host sent, the answer is permanent
        raise _fail(False, f"cannot decode the object from the host: {e}") from None
    ctx = Context(req.target)
    try:
        action = (plugin.cleanup if cleanup else plugin.reconcile)(obj, ctx)
    except Error as e:
        raise _fail(e.retryable, e.message) from None
    except BaseException as e:  # noqa: BLE001 - every other exception is a retryable error
        # `BaseException`, not `Exception`: `sys.exit()` (SystemExit) and KeyboardInterrupt
        # would otherwise escape the export, and componentize-py ends the instance with a bare
        # "Exited with i32 exit status 1" trap that says nothing of where. A plugin that
        # runs into the host's memory cap still ends as out-of-memory, not as this error
        # (tests/python/tests/hostile.rs).
        raise _fail(True, error_message(e)) from None
    return (action or Action.done()).wit()


def export(cls: type[Reconciler]) -> type:
    """The class componentize-py exports for `cls`: bind it to the name `Reconciler` at the
    top level of the plugin's `app.py` (`Reconciler = wasmop.export(DatabaseConfig)`)."""
    plugin = cls()

    class Export:
        def describe(self) -> _wit.plugin_info.Info:
            return plugin.describe().wit(cls.kind)

        def reconcile(self, req: _wit.exports.Request) -> _wit.exports.Action:
            return _call(plugin, False, req)

        def cleanup(self, req: _wit.exports.Request) -> _wit.exports.Action:
            return _call(plugin, True, req)

    Export.__name__ = Export.__qualname__ = f"{cls.__name__}Export"
    warm.reconciler(cls, plugin, _call)
    return Export
