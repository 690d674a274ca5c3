"""What every section of bench/run shares: paths, the builds, the control plane with its
audit log, and the report's helpers. The contenders' processes are in processes.py,
Prometheus histograms in promtext.py, the convergence run and plugin directories in
convergence.py."""

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
TARGET = ROOT / "target"
WORK = TARGET / "bench"
CACHE = Path(os.environ.get("WASMOP_CACHE_DIR", Path.home() / ".cache" / "wasmop"))
# A convergence run that takes longer is reported as not converged.
CONVERGE_TIMEOUT_S = 600
CONTENDERS = ["wasmop", "native", "controller-runtime", "kopf"]
USERS = {c: f"bench-{c}" for c in CONTENDERS}
# Plugin name -> (cargo package, component file name).
GUESTS = {
    "database-config": ("database-config", "database_config"),
    "noop": ("hostile-noop", "hostile_noop"),
    "infinite-loop": ("hostile-infinite-loop", "hostile_infinite_loop"),
}


def log(msg):
    print(f"\033[1m==> {msg}\033[0m", file=sys.stderr, flush=True)


def run(cmd, **kw):
    log(" ".join(str(c) for c in cmd))
    return subprocess.run(cmd, check=True, **kw)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------
# Building


def build(skip=False):
    """Release builds of everything (none with `skip`); returns the paths the runs start."""
    if not skip:
        compile_all()
    req = (ROOT / "bench" / "kopf" / "requirements.txt").read_bytes()
    venv = CACHE / "tools" / f"kopf-venv-{hashlib.sha256(req).hexdigest()[:12]}"
    if not (venv / "bin" / "kopf").exists():
        run([sys.executable, "-m", "venv", str(venv)])
        run([str(venv / "bin" / "pip"), "install", "-q", "-r",
             str(ROOT / "bench" / "kopf" / "requirements.txt")])
    cp_bin = subprocess.run([str(ROOT / "tests" / "control-plane" / "cp"), "build"], check=True,
                            capture_output=True, text=True).stdout.strip()
    rel = TARGET / "release"
    return {
        "wasmop": rel / "wasmop",
        "native": rel / "database-config-native",
        "load": rel / "bench-load",
        "admission-native": rel / "admission-native",
        "cr": WORK / "bin" / "database-config-cr",
        "kopf": venv / "bin" / "kopf",
        "cp": Path(cp_bin),
        "guests": {n: TARGET / "wasm-guests" / "wasm32-wasip2" / "wasm" / f"{f}.wasm"
                   for n, (_, f) in GUESTS.items()},
    }


def compile_all():
    run(["cargo", "build", "--release", "-p", "wasmop", "-p", "wasmop-bench-native"], cwd=ROOT)
    # The same target dir and profile as the test suite's and the demo's guest builds.
    cmd = ["cargo", "build", "--target", "wasm32-wasip2", "--profile", "wasm",
           "--target-dir", str(TARGET / "wasm-guests")]
    for package, _ in GUESTS.values():
        cmd += ["-p", package]
    run(cmd, cwd=ROOT)
    out = WORK / "bin"
    out.mkdir(parents=True, exist_ok=True)
    run(["go", "build", "-o", str(out / "database-config-cr"), "."],
        cwd=ROOT / "bench" / "controller-runtime")


# ---------------------------------------------------------------------------------------------
# The control plane, with an audit log that tells the controllers' requests apart

AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
# One line per request, written when the request is received (so watches count once too).
omitStages: [ResponseStarted, ResponseComplete, Panic]
rules:
  - level: Metadata
    users: [%s]
  - level: None
"""


class ControlPlane:
    def __init__(self, bins, run_dir):
        self.dir = run_dir / "cluster"
        self.audit = run_dir / "audit.log"
        policy = run_dir / "audit-policy.yaml"
        policy.write_text(AUDIT_POLICY % ", ".join(USERS.values()))
        self.log = open(run_dir / "control-plane.log", "w")
        self.proc = subprocess.Popen(
            [str(bins["cp"]), "up", "--dir", str(self.dir), "--output", "json",
             f"--apiserver-arg=--audit-log-path={self.audit}",
             f"--apiserver-arg=--audit-policy-file={policy}",
             "--apiserver-arg=--audit-log-maxsize=0"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True)
        deadline = time.time() + 300
        self.kubeconfig = None
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit(f"bench: the control plane exited; see {run_dir}/control-plane.log")
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                continue
            if msg.get("ok") is False:
                raise SystemExit(f"bench: the control plane failed: {msg.get('error')}")
            if msg.get("state", {}).get("kubeconfig"):
                self.kubeconfig = msg["state"]["kubeconfig"]
                break
        if not self.kubeconfig:
            raise SystemExit("bench: the control plane did not become ready in 300 s")
        self.cp = bins["cp"]
        self.users = {c: self.command(f"mint-user {u} system:masters")["kubeconfig"]
                      for c, u in USERS.items()}

    def command(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        if not reply.get("ok", True) or reply.get("error"):
            raise SystemExit(f"bench: control plane command {line!r}: {reply['error']}")
        return reply

    def kubectl(self, *args, check=True, quiet=True):
        return subprocess.run([str(self.cp), "kubectl", *args], check=check, text=True,
                              env={**os.environ, "KUBECONFIG": self.kubeconfig},
                              capture_output=quiet)

    def audit_offset(self):
        return self.audit.stat().st_size if self.audit.exists() else 0

    def requests_since(self, offset, user):
        """Requests `user` made since `offset` of the audit log, in all and by verb."""
        by_verb = {}
        with open(self.audit, "rb") as f:
            f.seek(offset)
            for line in f:
                try:
                    e = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if e.get("user", {}).get("username") != user:
                    continue
                v = e.get("verb", "?")
                by_verb[v] = by_verb.get(v, 0) + 1
        return sum(by_verb.values()), by_verb

    def delete_namespace(self, ns):
        self.kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=true",
                     "--timeout=600s")

    def stop(self):
        try:
            self.proc.stdin.write("shutdown\n")
            self.proc.stdin.close()
        except (BrokenPipeError, ValueError):
            pass
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# ---------------------------------------------------------------------------------------------
# Processes: CPU, memory, readiness


# ---------------------------------------------------------------------------------------------
# Reporting


def machine():
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = Path("/proc/meminfo").read_text().splitlines()[0].split()[1]
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "ram_gib": round(int(mem) / 2**20, 1),
        "kernel": os.uname().release,
        "uptime_load": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
    }


def goal(ok):
    return "n/a" if ok is None else ("met" if ok else "MISSED")


