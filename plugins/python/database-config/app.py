"""`database-config` in Python: reconciles each `Database` (demo.wasmop.dev/v1, the CRD in
`plugins/rust/database-config/crd.yaml`) into a ConfigMap `<name>-config` that applications
mount, and reports a `Ready` condition. The same logic as the Rust plugin, passing the same
golden cases (`plugins/rust/database-config/tests/cases`).

Build: `guest-sdk/python/build plugins/python/database-config -o database-config.wasm`.
"""

from dataclasses import dataclass
from typing import Any

import wasmop
from wasmop import CONFIG_MAP, Action, Context, Event, Info, Kind, Object

DATABASE = Kind("demo.wasmop.dev", "v1", "Database")


@dataclass
class DatabaseSpec:
    """The Database's spec; every field is required, as the CRD says."""

    engine: str
    host: str
    port: int
    replicas: int


class DatabaseConfig(wasmop.Reconciler):
    kind = DATABASE

    def describe(self) -> Info:
        return Info("database-config", "0.1.0").owns(CONFIG_MAP)

    def reconcile(self, db: Object, ctx: Context) -> Action:
        spec = db.spec_as(DatabaseSpec)
        name = f"{db.name}-config"
        ctx.apply(
            {
                "metadata": wasmop.owned_meta(db, name),
                "data": {
                    "engine": spec.engine,
                    "host": spec.host,
                    "port": str(spec.port),
                    "replicas": str(spec.replicas),
                    "url": f"{spec.engine}://{spec.host}:{spec.port}",
                },
            },
            CONFIG_MAP,
        )

        # The status as the Rust plugin's typed status sees it: its conditions and
        # observedGeneration (anything else under status is not this plugin's).
        stored = db.get("status") or {}
        old_conditions: list[dict[str, Any]] = stored.get("conditions") or []
        old = {"conditions": old_conditions, "observedGeneration": stored.get("observedGeneration")}
        conditions = [dict(c) for c in old_conditions]
        message = f"ConfigMap {name} is up to date"
        wasmop.set_condition(
            conditions,
            wasmop.condition("Ready", True, "ConfigApplied", message, db.generation),
        )
        status = {"conditions": conditions, "observedGeneration": db.generation}
        if status != old:
            ctx.update_status(db, status)
            # Only on a change, so the Event records what happened to the Database, not
            # every resync.
            ctx.event(db, Event.normal("ConfigApplied", "Apply", message))
        return Action.done()


Reconciler = wasmop.export(DatabaseConfig)
