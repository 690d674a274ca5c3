"""The generated bindings of the `wasmop:plugin@0.3.0` worlds `plugin`, `admission-plugin` and
`plugin-with-admission`, in one place.

componentize-py generates the package `wit_world` from `wit/plugin.wit` when it builds a
plugin (and `guest-sdk/python/check` generates it for the SDK's own tests and type check, for
`plugin-with-admission`, whose bindings hold both exports). Every other module of the SDK
reaches the host through the names imported here, so a test can replace one host call by
assigning to it (`wasmop._wit.kube.apply = fake`).
"""

from types import ModuleType
from typing import TYPE_CHECKING

from componentize_py_types import Err
from wit_world.imports import config, events, kube, log, plugin_info, types

# Each world has the bindings of its own exports only (`guest-sdk/python/build` picks the
# world from what the plugin's `app.py` binds): `plugin` has no `admission`, and
# `admission-plugin` no `reconciler`. The missing one is an empty module, which nothing of
# that world uses; `exports_reconciler` says which it is, so that `export_admission` can tell
# a plugin whose admission half names a reconciler the component does not export.
if TYPE_CHECKING:
    from wit_world.exports import admission
    from wit_world.exports import reconciler as exports

    exports_reconciler: bool
else:
    try:
        from wit_world.exports import admission
    except ImportError:  # the world `plugin`
        admission = ModuleType("admission")
    try:
        from wit_world.exports import reconciler as exports
    except ImportError:  # the world `admission-plugin`
        exports = ModuleType("reconciler")
        exports_reconciler = False
    else:
        exports_reconciler = True

__all__ = [
    "Err",
    "admission",
    "config",
    "events",
    "exports",
    "exports_reconciler",
    "kube",
    "log",
    "plugin_info",
    "types",
]
