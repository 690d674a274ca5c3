"""The generated bindings of the `wasmop:plugin@0.3.0` world `plugin`, in one place.

componentize-py generates the package `wit_world` from `wit/plugin.wit` when it builds a
plugin (and `guest-sdk/python/check` generates it for the SDK's own tests and type check).
Every other module of the SDK reaches the host through the names imported here, so a test can
replace one host call by assigning to it (`wasmop._wit.kube.apply = fake`).
"""

from componentize_py_types import Err
from wit_world.exports import reconciler as exports
from wit_world.imports import config, events, kube, log, plugin_info, types

__all__ = ["Err", "config", "events", "exports", "kube", "log", "plugin_info", "types"]
