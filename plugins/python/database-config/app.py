"""`database-config` in Python: reconciles each `Database` (demo.wasmop.dev/v1, the CRD in
`plugins/rust/database-config/crd.yaml`) into a ConfigMap `<name>-config` that applications
mount, and reports a `Ready` condition. The same logic as the Rust plugin, passing the same
golden cases (`plugins/rust/database-config/tests/cases`). The logic without host calls is
in `database_logic.py`, shared with the kopf operator of `bench/run`.

Build: `guest-sdk/python/build plugins/python/database-config -o database-config.wasm`.
"""

from dataclasses import dataclass

import database_logic

import wasmop
from wasmop import CONFIG_MAP, Action, Context, Event, Info, Kind, Object

DATABASE = Kind("demo.wasmop.dev", "v1", "Database")

# The engines a Database can run, as the CRD's enum lists them.
ENGINES = ("postgres", "mysql", "mariadb")


@dataclass
class DatabaseSpec:
    """The Database's spec; every field is required, as the CRD says."""

    engine: str
    host: str
    port: int
    replicas: int

    def __post_init__(self) -> None:
        # Another engine fails to decode, as the Rust plugin's enum does and in serde's words:
        # a permanent error, never a ConfigMap. (Not a `Literal`: the SDK's message for one
        # adds the path, `at `engine``, which serde's does not, and the reports must be equal.)
        if self.engine not in ENGINES:
            known = ", ".join(f"`{e}`" for e in ENGINES)
            raise wasmop.DecodeError(f"unknown variant `{self.engine}`, expected one of {known}")


class DatabaseConfig(wasmop.Reconciler):
    kind = DATABASE

    def describe(self) -> Info:
        return Info("database-config", "0.1.0").owns(CONFIG_MAP)

    def reconcile(self, db: Object, ctx: Context) -> Action:
        spec = db.spec_as(DatabaseSpec)
        # The ConfigMap and the status come from `database_logic`, which the kopf operator
        # of the benchmarks runs too; this method is the plugin's part: the host calls.
        ctx.apply(
            database_logic.desired_config_map(db, spec.engine, spec.host, spec.port, spec.replicas),
            CONFIG_MAP,
        )
        status, changed = database_logic.ready_status(db.get("status"), db.name, db.generation)
        if changed:
            ctx.update_status(db, status)
            # Only on a change, so the Event records what happened to the Database, not
            # every resync.
            message = database_logic.ready_message(db.name)
            ctx.event(db, Event.normal("ConfigApplied", "Apply", message))
        return Action.done()


Reconciler = wasmop.export(DatabaseConfig)
