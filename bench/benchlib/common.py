"""What every section of bench/run shares: the builds, the control plane with its audit log,
the contenders' processes (CPU, memory, readiness), Prometheus histograms, the convergence run
and the plugin directories."""

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
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


def cpu_seconds(pid):
    """utime + stime of `pid` and its waited-for children, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(x) for x in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


def status_kib(pid, key):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def http_get(url, timeout=2):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


class Controller:
    """One contender's process, started and timed to ready."""

    def __init__(self, kind, bins, cp, run_dir, plugins_dir=None, cache_dir=None, config=None,
                 user_kubeconfig=None, tag="", log_level="warn"):
        self.kind = kind
        self.log = open(run_dir / f"{kind}{tag}.log", "w")
        env = {**os.environ, "KUBECONFIG": user_kubeconfig or cp.users[kind]}
        self.metrics = self.health = None
        if kind == "wasmop":
            self.health = f"127.0.0.1:{free_port()}"
            self.metrics = f"127.0.0.1:{free_port()}"
            cmd = [str(bins["wasmop"]), "run", "--plugins", str(plugins_dir),
                   "--health-address", self.health, "--metrics-address", self.metrics,
                   "--log-format", "json", "--namespace", "wasmop-system"]
            if config:
                cmd += ["--config", str(config)]
            if cache_dir:
                cmd += ["--cache-dir", str(cache_dir)]
            # The others log only warnings; wasmop's default (info) writes a line per reconcile.
            # Section 8 reads the runtime's compile times from its info lines.
            env["WASMOP_LOG"] = log_level
        elif kind == "native":
            cmd = [str(bins["native"])]
        elif kind == "controller-runtime":
            cmd = [str(bins["cr"])]
        else:
            cmd = [str(bins["kopf"]), "run", "--all-namespaces", "--standalone", "--quiet",
                   str(ROOT / "bench" / "kopf" / "operator.py")]
        self.started = time.monotonic()
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE if kind != "wasmop"
                                     else self.log, stderr=self.log, text=True)
        self.pid = self.proc.pid

    def wait_ready(self, timeout=300):
        """Seconds from process start to ready: /readyz 200 for wasmop, a `ready` line on
        stdout for the others."""
        deadline = self.started + timeout
        if self.kind == "wasmop":
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise SystemExit(f"bench: wasmop exited ({self.proc.returncode}); see {self.log.name}")
                try:
                    if http_get(f"http://{self.health}/readyz", timeout=1)[0] == 200:
                        return time.monotonic() - self.started
                except OSError:
                    pass
                time.sleep(0.002)
            raise SystemExit(f"bench: wasmop not ready after {timeout} s; see {self.log.name}")
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit(f"bench: {self.kind} exited before ready; see {self.log.name}")
            if line.strip() == "ready":
                ready = time.monotonic() - self.started
                # Keep draining stdout so the process never blocks on a full pipe.
                import threading
                threading.Thread(target=lambda: [None for _ in self.proc.stdout], daemon=True).start()
                return ready

    def cpu(self):
        return cpu_seconds(self.pid)

    def rss_mib(self):
        return status_kib(self.pid, "VmRSS") / 1024

    def hwm_mib(self):
        return status_kib(self.pid, "VmHWM") / 1024

    def memory_split(self):
        """What the process maps now: anonymous and file-backed resident pages (a file page
        mapped at two addresses counts twice, as in VmRSS), and PSS, which counts each page
        once (shared pages divided among the processes that map them)."""
        pss = 0
        for line in Path(f"/proc/{self.pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                pss = int(line.split()[1])
        return {"rss_anon_mib": round(status_kib(self.pid, "RssAnon") / 1024, 1),
                "rss_file_mib": round(status_kib(self.pid, "RssFile") / 1024, 1),
                "pss_mib": round(pss / 1024, 1)}

    def scrape(self):
        return http_get(f"http://{self.metrics}/metrics")[1]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


# ---------------------------------------------------------------------------------------------
# Prometheus histograms


def histogram(text, name, labels):
    """Cumulative buckets [(le, count)] of the series `name` whose labels include `labels`."""
    buckets = []
    for line in text.splitlines():
        if not line.startswith(name + "_bucket{"):
            continue
        inside, value = line[len(name) + 8:].rsplit("}", 1)
        lab = dict(re.findall(r'(\w+)="([^"]*)"', inside))
        if all(lab.get(k) == v for k, v in labels.items()):
            le = float("inf") if lab["le"] == "+Inf" else float(lab["le"])
            buckets.append((le, float(value.split()[0])))
    return sorted(buckets)


def diff_buckets(after, before):
    b = dict(before)
    return [(le, c - b.get(le, 0.0)) for le, c in after]


def quantile(buckets, q):
    """histogram_quantile(): linear interpolation inside the bucket, as Prometheus does."""
    if not buckets or buckets[-1][1] == 0:
        return None
    total = buckets[-1][1]
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le, c in buckets:
        if c >= rank:
            if le == float("inf"):
                return prev_le
            if c == prev_c:
                return le
            return prev_le + (le - prev_le) * (rank - prev_c) / (c - prev_c)
        prev_le, prev_c = le, c
    return None


def ms(x):
    return None if x is None else round(x * 1000, 3)


# ---------------------------------------------------------------------------------------------
# The measurements


def plugin_dir(base, bins, count, extra=()):
    """A directory with `count` plugins: database-config itself, then copies whose describe
    name is renamed (same length, so the component stays valid) to database-cfgNNN."""
    d = base / f"plugins-{count}{'-' + '-'.join(extra) if extra else ''}"
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    data = bins["guests"]["database-config"].read_bytes()
    name = b"database-config"
    if count >= 1:
        (d / "database_config.wasm").write_bytes(data)
    for i in range(1, count):
        new = f"database-cfg{i:03d}".encode()
        assert len(new) == len(name)
        (d / f"database_cfg{i:03d}.wasm").write_bytes(data.replace(name, new))
    for e in extra:
        shutil.copy(bins["guests"][e], d / bins["guests"][e].name)
    return d


def wasmop_config(path, plugins=None):
    lines = ["namespace: wasmop-system", "logFormat: json"]
    if plugins:
        lines.append("plugins:")
        for name, settings in plugins.items():
            lines.append(f"  {name}:")
            for k, v in settings.items():
                lines.append(f"    {k}: {v}")
    path.write_text("\n".join(lines) + "\n")
    return path


def converge_once(kind, bins, cp, run_dir, n, ns, wasmop_plugins, label=None, cache_dir=None):
    """One convergence run of `kind`'s process; `label` names the contender in the results
    (section 8 runs wasmop with the Python plugin as `wasmop-python`, as the same user)."""
    c = Controller(kind, bins, cp, run_dir, plugins_dir=wasmop_plugins,
                   cache_dir=cache_dir or run_dir / "cache", tag=f"-{ns}")
    ready = c.wait_ready()
    time.sleep(1)
    before_metrics = c.scrape() if kind == "wasmop" else None
    cpu0 = c.cpu()
    offset = cp.audit_offset()
    out = subprocess.run([str(bins["load"]), "converge", ns, str(n), "--timeout-s",
                          str(CONVERGE_TIMEOUT_S)], capture_output=True, text=True,
                         env={**os.environ, "KUBECONFIG": cp.kubeconfig})
    if out.returncode != 0:
        # Reported as not converged (kopf on a loaded machine), not as a crash of the run.
        log(f"{kind}: {out.stderr.strip()}")
        result = {"controller": label or kind, "ns": ns, "objects": n, "converge_s": None,
                  "error": out.stderr.strip(), "cpu_s": round(c.cpu() - cpu0, 3),
                  "peak_rss_mib": round(c.hwm_mib(), 1),
                  "api_requests": cp.requests_since(offset, USERS[kind])[0]}
        c.stop()
        cp.delete_namespace(ns)
        return result
    figures = json.loads(out.stdout)
    cpu_at_convergence = c.cpu() - cpu0
    # Trailing work (Events) is the controller's too: count it, 2 s after convergence.
    time.sleep(2)
    cpu = c.cpu() - cpu0
    requests, by_verb = cp.requests_since(offset, USERS[kind])
    result = {
        "controller": label or kind,
        "ns": ns,
        "objects": n,
        "ready_s": round(ready, 3),
        "create_s": round(figures["created_s"], 3),
        "converge_s": round(figures["converged_s"], 3),
        "cpu_s_at_convergence": round(cpu_at_convergence, 3),
        "cpu_s": round(cpu, 3),
        "peak_rss_mib": round(c.hwm_mib(), 1),
        **c.memory_split(),
        "api_requests": requests,
        "api_requests_by_verb": by_verb,
    }
    if kind == "wasmop":
        after = c.scrape()
        for key, series, labels in [
            ("event_to_reconcile", "wasmop_event_to_reconcile_seconds", {"name": "database-config"}),
            ("reconcile_time", "controller_runtime_reconcile_time_seconds",
             {"controller": "database-config"}),
        ]:
            b = diff_buckets(histogram(after, series, labels), histogram(before_metrics, series, labels))
            result[key + "_p50_ms"] = ms(quantile(b, 0.5))
            result[key + "_p99_ms"] = ms(quantile(b, 0.99))
    c.stop()
    cp.delete_namespace(ns)
    log(f"{label or kind}: {result}")
    return result


def wait_for_artefacts(cache_dir, count, timeout=600):
    """Waits until the artefact cache holds `count` artefacts, all with their checksum file."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = [a for a in cache_dir.glob("*/*.cwasm") if Path(f"{a}.crc32").exists()]
        if len(done) >= count:
            return
        time.sleep(0.2)
    raise SystemExit(f"bench: the cache {cache_dir} holds fewer than {count} artefacts after {timeout} s")


def settle_rss(c, seconds=20):
    """RSS once it has stopped growing (or after `seconds`)."""
    last, stable = c.rss_mib(), 0
    for _ in range(seconds * 2):
        time.sleep(0.5)
        now = c.rss_mib()
        stable = stable + 1 if abs(now - last) < 0.05 else 0
        last = now
        if stable >= 4:
            break
    return last


def log_fields(log_path, message_start):
    """The fields of the JSON log lines of `log_path` whose message starts `message_start`."""
    found = []
    for line in Path(log_path).read_text(errors="replace").splitlines():
        try:
            e = json.loads(line)
        except json.JSONDecodeError:
            continue
        fields = e.get("fields", e)
        if str(fields.get("message", "")).startswith(message_start):
            found.append(fields)
    return found


def artefact_mib(cache_dir):
    return round(sum(a.stat().st_size for a in cache_dir.glob("*/*.cwasm")) / 2**20, 1)


def reconciles(c, name):
    b = histogram(c.scrape(), "controller_runtime_reconcile_time_seconds", {"controller": name})
    return b[-1][1] if b else 0



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


