"""The logic of `database-config` that does not talk to the cluster: the desired ConfigMap of
a Database, its Ready condition, and whether the status changed.

Shared on purpose: the Python plugin (`app.py`, which the build bundles with this module)
and the kopf operator of the benchmarks (`bench/kopf/operator.py`, which imports this file
from here) run these same function bodies, so `bench/run` section 8 compares the runtimes
rather than two codings of the logic. Hence only the standard library: no wasmop SDK (its
package needs the component's bindings) and no Kubernetes client. The condition rules are
the SDK's (`wasmop.set_condition`): one condition per type, `lastTransitionTime` kept while
the status is unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any


def config_map_name(database_name: str) -> str:
    """The name of the ConfigMap a Database gets."""
    return f"{database_name}-config"


def owner_reference(database: Mapping[str, Any]) -> dict[str, Any]:
    """A controller reference to `database`, which must have been read from the cluster."""
    meta = database.get("metadata") or {}
    uid = meta.get("uid")
    if not isinstance(uid, str):
        raise ValueError(
            f"Database {meta.get('namespace')}/{meta.get('name')} has no metadata.uid, "
            "so it cannot own its ConfigMap"
        )
    return {
        "apiVersion": database["apiVersion"],
        "kind": database["kind"],
        "name": meta["name"],
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def desired_config_map(
    database: Mapping[str, Any], engine: str, host: str, port: int, replicas: int
) -> dict[str, Any]:
    """The ConfigMap `<name>-config` that `database` (with this validated spec) owns, as a
    server-side apply body."""
    meta = database["metadata"]
    metadata: dict[str, Any] = {"name": config_map_name(meta["name"])}
    if meta.get("namespace") is not None:
        metadata["namespace"] = meta["namespace"]
    metadata["ownerReferences"] = [owner_reference(database)]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata,
        "data": {
            "engine": engine,
            "host": host,
            "port": str(port),
            "replicas": str(replicas),
            "url": f"{engine}://{host}:{port}",
        },
    }


def ready_message(database_name: str) -> str:
    """The Ready condition's message, also the Event's note."""
    return f"ConfigMap {config_map_name(database_name)} is up to date"


def now() -> str:
    """Now in whole seconds as Kubernetes stores times, as the SDK's `conditions.now`."""
    seconds = max(0, int(time.time()))
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def set_condition(conditions: list[dict[str, Any]], new: dict[str, Any]) -> None:
    """Puts `new` into `conditions` in place of the condition of its type, keeping the old
    `lastTransitionTime` when the status is unchanged (the SDK's rule)."""
    new = dict(new)
    for i, old in enumerate(conditions):
        if old.get("type") == new.get("type"):
            if old.get("status") == new.get("status") and "lastTransitionTime" in old:
                new["lastTransitionTime"] = old["lastTransitionTime"]
            conditions[i] = new
            return
    conditions.append(new)


def ready_status(
    stored: Mapping[str, Any] | None, database_name: str, generation: int | None
) -> tuple[dict[str, Any], bool]:
    """The status with the Ready condition for `generation`, and whether it differs from
    `stored` as this plugin sees a status (its conditions and observedGeneration; anything
    else under status is not this plugin's), so that an unchanged status is not written."""
    stored = stored or {}
    old_conditions: list[dict[str, Any]] = list(stored.get("conditions") or [])
    old = {"conditions": old_conditions, "observedGeneration": stored.get("observedGeneration")}
    conditions = [dict(c) for c in old_conditions]
    ready: dict[str, Any] = {
        "type": "Ready",
        "status": "True",
        "reason": "ConfigApplied",
        "message": ready_message(database_name),
        "lastTransitionTime": now(),
    }
    if generation is not None:
        ready["observedGeneration"] = generation
    set_condition(conditions, ready)
    status = {"conditions": conditions, "observedGeneration": generation}
    return status, status != old
