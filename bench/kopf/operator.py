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

The logic without API calls (the desired ConfigMap, the Ready condition, whether the status
changed) is not written here: it is `plugins/python/database-config/database_logic.py`, the
module the Python wasmop plugin bundles, imported from there, so that the kopf operator and
the Python plugin run the same function bodies (bench/run section 8).
"""

import logging
import sys
from pathlib import Path

import kopf
import kubernetes

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins" / "python" / "database-config"))
import database_logic  # noqa: E402  (the plugin's own module, from the plugin's directory)

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


@kopf.on.resume("demo.wasmop.dev", "v1", "databases")
@kopf.on.create("demo.wasmop.dev", "v1", "databases")
@kopf.on.update("demo.wasmop.dev", "v1", "databases", field="spec")
def reconcile(body, spec, meta, status, namespace, name, patch, **_):
    configmap = database_logic.desired_config_map(
        body, spec["engine"], spec["host"], spec["port"], spec["replicas"])
    cm_name = configmap["metadata"]["name"]
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

    new_status, changed = database_logic.ready_status(status, name, meta.get("generation"))
    if changed:
        patch.status["conditions"] = new_status["conditions"]
        patch.status["observedGeneration"] = new_status["observedGeneration"]
        kopf.event(body, type="Normal", reason="ConfigApplied",
                   message=database_logic.ready_message(name))
