"""`namespace-defaults` in Python: every Namespace labelled `demo.wasmop.dev/defaults=enabled`
gets a ResourceQuota, a LimitRange with container defaults and a default-deny NetworkPolicy,
all named `namespace-defaults` and owned by the Namespace. The values come from the plugin's
configuration (`Config`). The same logic as the Rust plugin, passing the same golden cases
(`plugins/rust/namespace-defaults/tests/cases`).
"""

from dataclasses import dataclass, field
from typing import Any, Literal

import wasmop
from wasmop import (
    LIMIT_RANGE,
    NAMESPACE,
    NETWORK_POLICY,
    RESOURCE_QUOTA,
    Action,
    Context,
    Info,
    Object,
)

#: The name of every object the plugin creates.
NAME = "namespace-defaults"


@dataclass
class Config:
    """The plugin's configuration. Each field left out takes its default; a field given
    replaces the default as a whole (a `quota` with only `pods` sets only `pods`). The
    defaults are sized for a small team; ingress is denied, egress stays open so workloads
    keep reaching DNS and the API server."""

    #: The ResourceQuota's `spec.hard`.
    quota: dict[str, str] = field(
        default_factory=lambda: {
            "requests.cpu": "4",
            "requests.memory": "8Gi",
            "limits.cpu": "8",
            "limits.memory": "16Gi",
            "pods": "50",
        }
    )
    #: Default container limits in the LimitRange (`default`).
    container_limits: dict[str, str] = field(
        default_factory=lambda: {"cpu": "500m", "memory": "512Mi"}
    )
    #: Default container requests in the LimitRange (`defaultRequest`).
    container_requests: dict[str, str] = field(
        default_factory=lambda: {"cpu": "100m", "memory": "128Mi"}
    )
    #: The traffic the NetworkPolicy denies to every pod by default; empty means no
    #: NetworkPolicy (an existing one is deleted).
    deny: list[Literal["Ingress", "Egress"]] = field(default_factory=lambda: ["Ingress"])


class NamespaceDefaults(wasmop.Reconciler):
    kind = NAMESPACE

    def describe(self) -> Info:
        return (
            Info(NAME, "0.1.0")
            .selector("demo.wasmop.dev/defaults=enabled")
            .owns(RESOURCE_QUOTA)
            .owns(LIMIT_RANGE)
            .owns(NETWORK_POLICY)
        )

    def reconcile(self, ns: Object, ctx: Context) -> Action:
        status: dict[str, Any] = ns.get("status") or {}
        if status.get("phase") == "Terminating" or ns.is_being_deleted:
            # The API server refuses new objects in a terminating namespace, and the
            # garbage collector removes the ones there are.
            return Action.done()
        config: Config = ctx.config(Config)
        metadata = {**wasmop.owned_meta(ns, NAME), "namespace": ns.name}

        ctx.apply({"metadata": metadata, "spec": {"hard": config.quota}}, RESOURCE_QUOTA)
        limits = {
            "type": "Container",
            "default": config.container_limits,
            "defaultRequest": config.container_requests,
        }
        ctx.apply({"metadata": metadata, "spec": {"limits": [limits]}}, LIMIT_RANGE)

        if not config.deny:
            ctx.delete(NETWORK_POLICY, NAME, ns.name)
        else:
            # An empty selector selects every pod; no rules means nothing is allowed.
            spec = {"podSelector": {}, "policyTypes": list(config.deny)}
            ctx.apply({"metadata": metadata, "spec": spec}, NETWORK_POLICY)
        return Action.done()


Reconciler = wasmop.export(NamespaceDefaults)
