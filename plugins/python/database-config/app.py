"""`database-config` in Python: reconciles each `Database` (demo.wasmop.dev/v1, the CRD in
`plugins/rust/database-config/crd.yaml`) into a ConfigMap `<name>-config` that applications
mount, and reports a `Ready` condition; and reviews Databases before they are stored: its
mutating webhook defaults `spec.replicas` to 1, its validating webhook refuses an unknown
engine, a port outside 1-65535 and a host that is neither a DNS name nor an IP address. The
same logic as the Rust plugin, passing the same golden cases
(`plugins/rust/database-config/tests/cases` and `tests/admission`). The logic without host
calls is in `database_logic.py`, shared with the kopf operator of `bench/run`.

Build: `guest-sdk/python/build plugins/python/database-config -o database-config.wasm`.
"""

import ipaddress
import json
from dataclasses import dataclass
from typing import Any

import database_logic

import wasmop
from wasmop import (
    CONFIG_MAP,
    Action,
    Allowed,
    Context,
    Event,
    FailurePolicy,
    Info,
    Kind,
    Object,
    Operation,
    Refused,
    Review,
    Webhook,
    Webhooks,
)

DATABASE = Kind("demo.wasmop.dev", "v1", "Database")

# The engines a Database can run, as the CRD's enum lists them.
ENGINES = ("postgres", "mysql", "mariadb")
# What `replicas` is when a Database does not say (the mutating webhook fills it in).
DEFAULT_REPLICAS = 1


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
    # Reconciled once at build time against fake host calls, so that every call starts with
    # this code warm (`wasmop.Reconciler.warm_up`).
    warm_up = (
        {
            "apiVersion": "demo.wasmop.dev/v1",
            "kind": "Database",
            "metadata": {"name": "warm", "namespace": "warm", "uid": "warm", "generation": 1},
            "spec": {"engine": "postgres", "host": "db.warm.svc", "port": 5432, "replicas": 1},
        },
    )

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


def is_dns_name(host: str) -> bool:
    """A DNS-1123 subdomain: dot-separated labels of lowercase letters, digits and `-`."""

    def label(part: str) -> bool:
        return (
            0 < len(part) <= 63
            and part[0].isascii()
            and part[0].isalnum()
            and part[-1].isascii()
            and part[-1].isalnum()
            and all(c in "abcdefghijklmnopqrstuvwxyz0123456789-" for c in part)
        )

    return len(host) <= 253 and all(label(p) for p in host.split("."))


def is_ip(host: str) -> bool:
    if "%" in host:  # a scoped IPv6 address names an interface, not a database
        return False
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def shown(value: Any) -> str:
    """A value as the Rust plugin shows it in a message: compact JSON."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def problems(spec: dict[str, Any]) -> list[str]:
    """What is wrong with `spec`, one message per field, as the API server words field
    errors (the Rust plugin's messages, word for word)."""
    found = []
    engine = spec.get("engine")
    if engine is None:
        found.append("spec.engine: Required value")
    elif not (isinstance(engine, str) and engine in ENGINES):
        found.append(
            f"spec.engine: Unsupported value: {shown(engine)}: supported values: "
            '"postgres", "mysql", "mariadb"'
        )
    port = spec.get("port")
    if port is None:
        found.append("spec.port: Required value")
    elif not (isinstance(port, int) and not isinstance(port, bool) and 1 <= port <= 65535):
        found.append(f"spec.port: Invalid value: {shown(port)}: must be a TCP port, 1 to 65535")
    host = spec.get("host")
    if host is None:
        found.append("spec.host: Required value")
    elif not (isinstance(host, str) and (is_dns_name(host) or is_ip(host))):
        found.append(
            f"spec.host: Invalid value: {shown(host)}: must be a DNS name (lowercase letters, "
            "digits, '-' and '.') or an IP address"
        )
    return found


class DatabaseAdmission(wasmop.Admission):
    kind = DATABASE

    def webhooks(self) -> Webhooks:
        ops = [Operation.CREATE, Operation.UPDATE]
        return Webhooks(
            mutating=Webhook(ops, failure_policy=FailurePolicy.IGNORE, timeout_seconds=5),
            validating=Webhook(ops, timeout_seconds=5),
        )

    def mutate(self, review: Review, ctx: Context) -> Object | None:
        db = review.object
        if db is None:
            return None
        spec = db.setdefault("spec", {})
        if not isinstance(spec, dict):
            raise Refused("cannot decode the object: spec is not an object", "BadRequest", 400)
        if spec.get("replicas") is not None:
            return None
        spec["replicas"] = DEFAULT_REPLICAS
        return db

    def validate(self, review: Review, ctx: Context) -> Allowed | None:
        db = review.object
        if db is None:
            return None
        spec = db.get("spec") or {}
        if not isinstance(spec, dict):
            raise Refused("cannot decode the object: spec is not an object", "BadRequest", 400)
        found = problems(spec)
        if found:
            name = db.metadata.get("name") or "(generated)"
            raise Refused.invalid(f"Database {name} is invalid: {'; '.join(found)}")
        return None


Reconciler = wasmop.export(DatabaseConfig)
Admission = wasmop.export_admission(DatabaseAdmission, DatabaseConfig)
