"""The generated bindings of the `wasmop:plugin@0.3.0` worlds `plugin` and
`plugin-with-admission`, in one place.

componentize-py generates the package `wit_world` from `wit/plugin.wit` when it builds a
plugin (and `guest-sdk/python/check` generates it for the SDK's own tests and type check).
Every other module of the SDK reaches the host through the names imported here, so a test can
replace one host call by assigning to it (`wasmop._wit.kube.apply = fake`).
"""

from types import ModuleType
from typing import TYPE_CHECKING

from componentize_py_types import Err
from wit_world.exports import reconciler as exports
from wit_world.imports import config, events, kube, log, plugin_info, types

# The `admission` export's types exist in the world `plugin-with-admission` only, which a
# plugin that binds `Admission` in its `app.py` is built for (`guest-sdk/python/build`).
if TYPE_CHECKING:
    from wit_world.exports import admission
else:
    try:
        from wit_world.exports import admission
    except ImportError:  # the world `plugin`: no admission half, nothing here uses it
        admission = ModuleType("admission")

__all__ = ["Err", "admission", "config", "events", "exports", "kube", "log", "plugin_info", "types"]
