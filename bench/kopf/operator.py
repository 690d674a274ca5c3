"""The kopf contender of wasmop's benchmarks (bench/run).

The logic of plugins/rust/database-config written as a kopf user would: each Database
(demo.wasmop.dev/v1) gets a server-side-applied ConfigMap "<name>-config" that it owns, and a
Ready condition with observedGeneration in its status; the status is patched (through kopf's
own patch of the status subresource), and an Event recorded, only when it changes.

Handlers run on creation, on a change of the spec and when the operator starts (resume).
kopf's concurrency is left at its default: `settings.queueing.worker_limit` caps per-object
workers, each of which lingers for `idle_timeout` (5 s) after its object, so a cap of 4 (wasmop's
per-plugin default) measured at under one object per second; sync handlers run in kopf's
thread pool. kopf's own success/failure Events are turned
off so that the Events are the same as the other contenders'. Started as
`kopf run --all-namespaces --standalone operator.py`; it prints "ready" on stdout when its
start-up handlers have run, which bench/run times.
"""

import datetime
import logging

import kopf
import kubernetes

FIELD_MANAGER = "bench/database-config"
# One API client (one connection pool) for the whole operator, made at start-up.
CORE: kubernetes.client.CoreV1Api | None = None


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_):
    settings.posting.level = logging.WARNING
    global CORE
    kubernetes.config.load_kube_config()
    CORE = kubernetes.client.CoreV1Api()
    print("ready", flush=True)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@kopf.on.resume("demo.wasmop.dev", "v1", "databases")
@kopf.on.create("demo.wasmop.dev", "v1", "databases")
@kopf.on.update("demo.wasmop.dev", "v1", "databases", field="spec")
def reconcile(body, spec, meta, status, namespace, name, patch, **_):
    cm_name = f"{name}-config"
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": cm_name,
            "namespace": namespace,
            "ownerReferences": [
                {
                    "apiVersion": "demo.wasmop.dev/v1",
                    "kind": "Database",
                    "name": name,
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "data": {
            "engine": spec["engine"],
            "host": spec["host"],
            "port": str(spec["port"]),
            "replicas": str(spec["replicas"]),
            "url": f"{spec['engine']}://{spec['host']}:{spec['port']}",
        },
    }
    try:
        CORE.patch_namespaced_config_map(
            cm_name,
            namespace,
            configmap,
            field_manager=FIELD_MANAGER,
            force=True,
            _content_type="application/apply-patch+yaml",
        )
    except kubernetes.client.ApiException as e:
        raise kopf.TemporaryError(
            f"apply of ConfigMap {namespace}/{cm_name} failed: {e.status} {e.reason}", delay=1
        )

    generation = meta.get("generation")
    message = f"ConfigMap {cm_name} is up to date"
    old_conditions = list(status.get("conditions") or [])
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "ConfigApplied",
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": _now(),
    }
    conditions = []
    found = False
    for c in old_conditions:
        if c.get("type") == "Ready":
            found = True
            if c.get("status") == ready["status"]:
                ready["lastTransitionTime"] = c.get("lastTransitionTime")
            conditions.append(ready)
        else:
            conditions.append(c)
    if not found:
        conditions.append(ready)
    if conditions != old_conditions or status.get("observedGeneration") != generation:
        patch.status["conditions"] = conditions
        patch.status["observedGeneration"] = generation
        kopf.event(body, type="Normal", reason="ConfigApplied", message=message)
