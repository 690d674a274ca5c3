"""The runner of a `wasmop dev` build: it runs the project's modules from the sources the host
gives each call, so that a saved edit needs no new component.

A Python plugin's component is a whole CPython: building one takes seconds (componentize-py
pre-initialises the interpreter) and so does compiling it, while an edit changes a few
kilobytes. So `build.py --dev` builds a runner once: CPython, this SDK and every module the
project imports from outside itself, imported at build time (an interpreter in a component has
no files to import from later). Each dev build is that runner with the project's sources
appended; `wasmop dev` cuts them off, compiles the runner once, and gives them to each call
(`describe` included) on stdin. Each call then imports the project's entry module `app` from
them and calls what it exports, so every call runs the sources as saved, as a built component
runs the `app.py` it was built from.

A module the runner was not built with cannot be imported: `build.py --dev` builds a new
runner when the project's imports change. A dev build is not for shipping: outside `wasmop
dev` it has no sources and says so; `build.py` builds the component to ship.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import linecache
import os
import sys
import traceback
from types import ModuleType
from typing import Any, NoReturn

from . import _wit, warm
from .reconciler import _fail, error_message

#: The layout of the sources `build.py --dev` appends: `{"format": 1, "modules": {path: text}}`,
#: each path relative to the project (`app.py`, `helpers/__init__.py`).
FORMAT = 1
#: The project's entry module.
ENTRY = "app"
#: What a dev build without sources says.
NOT_UNDER_DEV = (
    "this component is a `wasmop dev` build (the runner of a Python project): it runs the "
    "sources `wasmop dev` gives it and nothing else; build the component to ship with "
    "`build.py`"
)


class _Sources(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports the project's modules from their sources: `a.b` from `a/b.py` or
    `a/b/__init__.py`, ahead of everything else on the path (as the project's own directory
    comes first in a built component)."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    def find_spec(
        self,
        fullname: str,
        path: Any = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        base = fullname.replace(".", "/")
        for filename, package in ((f"{base}/__init__.py", True), (f"{base}.py", False)):
            if filename in self.files:
                return importlib.util.spec_from_loader(
                    fullname, self, origin=filename, is_package=package
                )
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        spec = module.__spec__
        assert spec is not None and spec.origin is not None
        filename = spec.origin
        source = self.files[filename]
        module.__file__ = filename
        # Tracebacks show the lines, as they do for a built component's modules.
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec", dont_inherit=True), module.__dict__)


def _stdin() -> bytes:
    chunks = []
    while chunk := os.read(0, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def sources(data: bytes) -> dict[str, str]:
    """The project's modules from what `build.py --dev` appended. Raises `ValueError` naming
    what is wrong."""
    if not data:
        raise ValueError(NOT_UNDER_DEV)
    try:
        bundle = json.loads(data)
    except ValueError as e:
        raise ValueError(f"the dev build's sources are not JSON: {e}") from None
    if not isinstance(bundle, dict) or bundle.get("format") != FORMAT:
        raise ValueError(
            f"the dev build's sources are not of format {FORMAT}: rebuild with this SDK's "
            "`build.py --dev`"
        )
    modules = bundle.get("modules")
    if not isinstance(modules, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in modules.items()
    ):
        raise ValueError("the dev build's `modules` is not an object of path to source text")
    if f"{ENTRY}.py" not in modules:
        raise ValueError(f"the dev build's sources have no {ENTRY}.py (the plugin's entry module)")
    return modules


_app: ModuleType | None = None


def app() -> ModuleType:
    """The project's entry module, imported from this call's sources (once per call: each
    call is a fresh instance of the runner)."""
    global _app
    if _app is None:
        # Warming is for a build's snapshot; here it would be redone by every call.
        warm.ENABLED = False
        sys.meta_path.insert(0, _Sources(sources(_stdin())))
        _app = importlib.import_module(ENTRY)
    return _app


def _failed_describe(name: str, e: BaseException) -> NoReturn:
    """Ends a `describe` the project failed: its exception on one line, the last of stderr,
    which the host's rejection of the version quotes (an exception escaping the export would
    end it with componentize-py's own line instead), then the instance."""
    frames = traceback.extract_tb(e.__traceback__)
    where = next((f for f in reversed(frames) if not f.filename.startswith("/")), None)
    at = f" at {where.filename}:{where.lineno}" if where else ""
    what = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    line = f"the project's {name}.describe failed: {what}{at}".replace("\n", " ")
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
    os._exit(1)


def _export(name: str) -> Any:
    export = getattr(app(), name, None)
    if export is None:
        raise ValueError(f"{ENTRY}.py binds no `{name}` at its top level")
    return export()


def _describe(name: str) -> Any:
    """The project's `name` export's `describe`, or the end of the load, said once."""
    try:
        return _export(name).describe()
    except BaseException as e:  # noqa: BLE001 - every failure ends the load, said once
        _failed_describe(name, e)


class Reconciler:
    """The runner's `reconciler` export: the project's `Reconciler`, imported per call."""

    def describe(self) -> _wit.plugin_info.Info:
        info: _wit.plugin_info.Info = _describe("Reconciler")
        return info

    def reconcile(self, req: _wit.exports.Request) -> _wit.exports.Action:
        return self._call("reconcile", req)

    def cleanup(self, req: _wit.exports.Request) -> _wit.exports.Action:
        return self._call("cleanup", req)

    @staticmethod
    def _call(method: str, req: _wit.exports.Request) -> _wit.exports.Action:
        # The project's modules fail to import as a reconcile's error, not a trap: a built
        # component would not have built, and the next saved edit may fix them.
        try:
            export = _export("Reconciler")
        except BaseException as e:  # noqa: BLE001 - every failure is the reconcile's error
            raise _fail(True, f"cannot import the project: {error_message(e)}") from None
        action: _wit.exports.Action = getattr(export, method)(req)
        return action


class Admission:
    """The runner's `admission` export: the project's `Admission`, imported per call."""

    def describe(self) -> _wit.admission.AdmissionInfo:
        info: _wit.admission.AdmissionInfo = _describe("Admission")
        return info

    def validate(self, req: _wit.admission.Review) -> _wit.admission.Allowed:
        allowed: _wit.admission.Allowed = _export("Admission").validate(req)
        return allowed

    def mutate(self, req: _wit.admission.Review) -> _wit.admission.Mutation:
        mutation: _wit.admission.Mutation = _export("Admission").mutate(req)
        return mutation
