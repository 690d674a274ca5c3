"""Write wasmop reconcile plugins in Python.

A plugin is one `Reconciler` subclass in the plugin's `app.py`, exported with `export`. It
works on objects as dicts (`Object`, with helpers for metadata) and reaches the cluster only
through the `Context` each reconcile gets, within what it declared in `describe`:

    import wasmop
    from wasmop import CONFIG_MAP, NAMESPACE, Action, Context, Info, Object

    class TeamInfo(wasmop.Reconciler):
        kind = NAMESPACE

        def describe(self) -> Info:
            return Info("team-info", "0.1.0").owns(CONFIG_MAP)

        def reconcile(self, ns: Object, ctx: Context) -> Action:
            meta = wasmop.owned_meta(ns, "team-info")
            meta["namespace"] = ns.name
            ctx.apply({"metadata": meta, "data": {"namespace": ns.name}}, CONFIG_MAP)
            return Action.done()

    Reconciler = wasmop.export(TeamInfo)

Build it with `guest-sdk/python/build <plugin-dir> -o plugin.wasm` and try it offline with
`wasmop test`. The contract is `wit/plugin.wit` (`wasmop:plugin@0.3.0`).
"""

from . import log
from .admission import (
    Admission,
    Allowed,
    FailurePolicy,
    Mutated,
    Operation,
    Refused,
    Review,
    UserInfo,
    Webhook,
    Webhooks,
    export_admission,
)
from .conditions import condition, find_condition, now, set_condition
from .context import Context, DeleteOptions, Event, Patch, Propagation, Stored
from .errors import (
    AlreadyExists,
    Conflict,
    DecodeError,
    Denied,
    Error,
    Forbidden,
    Invalid,
    KubeError,
    NotFound,
    Other,
    Permanent,
    Retryable,
    Unavailable,
    UsageError,
)
from .info import Info, Mapping, Permission, Verb
from .kinds import (
    CONFIG_MAP,
    DEPLOYMENT,
    JOB,
    LIMIT_RANGE,
    NAMESPACE,
    NETWORK_POLICY,
    POD,
    RESOURCE_QUOTA,
    SECRET,
    SERVICE,
)
from .objects import Kind, Object, decode, object_reference, owned_meta, owner_reference
from .reconciler import Action, Reconciler, error_message, export

__all__ = [
    "CONFIG_MAP",
    "DEPLOYMENT",
    "JOB",
    "LIMIT_RANGE",
    "NAMESPACE",
    "NETWORK_POLICY",
    "POD",
    "RESOURCE_QUOTA",
    "SECRET",
    "SERVICE",
    "Action",
    "Admission",
    "Allowed",
    "AlreadyExists",
    "Conflict",
    "Context",
    "DecodeError",
    "DeleteOptions",
    "Denied",
    "Error",
    "Event",
    "FailurePolicy",
    "Forbidden",
    "Info",
    "Invalid",
    "Kind",
    "KubeError",
    "Mapping",
    "Mutated",
    "NotFound",
    "Object",
    "Operation",
    "Other",
    "Patch",
    "Permanent",
    "Permission",
    "Propagation",
    "Reconciler",
    "Refused",
    "Retryable",
    "Review",
    "Stored",
    "Unavailable",
    "UsageError",
    "UserInfo",
    "Verb",
    "Webhook",
    "Webhooks",
    "condition",
    "decode",
    "error_message",
    "export",
    "export_admission",
    "find_condition",
    "log",
    "now",
    "object_reference",
    "owned_meta",
    "owner_reference",
    "set_condition",
]
