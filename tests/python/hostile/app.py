"""Hostile test plugin in Python (the Python counterpart of `tests/hostile/*`): its reconcile
attacks the host in the way the target object's name says, so one component (a CPython
component is ~19 MB and costs tens of seconds of compile) covers every attack. Each must end
in its typed outcome while a healthy plugin beside it keeps reconciling
(`tests/python/tests/hostile.rs`); any other name reconciles as a harmless no-op.

The sandbox attacks (`read-file` ... `environ`) use the standard library as a plugin author
would; the host links WASI with no authority, so each fails inside the interpreter as a Python
exception, which the SDK turns into a retryable error naming it.
"""

import os
import socket
import sys

import wasmop
from wasmop import Action, Context, Info, Kind, Object

TARGET = Kind("wasmop.test", "v1", "Target")


def spin() -> None:
    n = 0
    while True:
        n += 1


def hoard() -> None:
    # Touched, not just reserved: bytearray zero-fills every MiB it takes.
    hoard: list[bytearray] = []
    while True:
        hoard.append(bytearray(1 << 20))


def descend(depth: int) -> int:
    return descend(depth + 1) + 1


def descend_unlimited() -> int:
    # Python's own limit lifted: what stops it now is the host.
    sys.setrecursionlimit(1 << 30)
    return descend(0)


def read_file() -> None:
    with open("/etc/passwd") as f:
        f.read()


def write_file() -> None:
    with open("/tmp/wasmop-hostile", "w") as f:
        f.write("escaped")


def list_root() -> None:
    os.listdir("/")


def connect() -> None:
    # The loopback of the host's node (an address, so no name lookup comes first).
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.connect(("127.0.0.1", 6443))


def resolve() -> None:
    # The API server's name inside a cluster (bytes: no IDNA codec is needed to ask).
    socket.getaddrinfo(b"kubernetes.default.svc", 443)


def nest() -> str:
    # Recursion in C, not in Python frames: repr of a list nested 100,000 deep.
    nested: list[object] = []
    for _ in range(100_000):
        nested = [nested]
    return repr(nested)


def environ() -> None:
    # An empty environment is the finding; the exception carries it to the host's report.
    raise LookupError(f"environment: {dict(os.environ)!r}")


def exit_process() -> None:
    sys.exit(3)


def exit_now() -> None:
    os._exit(3)


def throw() -> None:
    raise ValueError("hostile Python plugin raised on purpose")


ATTACKS = {
    "infinite-loop": spin,
    "memory-bomb": hoard,
    "recursion": lambda: descend(0),
    "unbounded-recursion": descend_unlimited,
    "exception": throw,
    "deep-repr": nest,
    "exit": exit_process,
    "os-exit": exit_now,
    "read-file": read_file,
    "write-file": write_file,
    "list-root": list_root,
    "connect": connect,
    "resolve": resolve,
    "environ": environ,
}


class Hostile(wasmop.Reconciler):
    kind = TARGET

    def describe(self) -> Info:
        return Info("python-hostile", "0.1.0")

    def reconcile(self, obj: Object, ctx: Context) -> Action:
        attack = ATTACKS.get(obj.name)
        if attack is not None:
            attack()
        return Action.done()


Reconciler = wasmop.export(Hostile)
