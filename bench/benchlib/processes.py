"""The contenders' processes: one started and timed to ready, its CPU, memory and metrics,
and what it logged."""

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from .common import ROOT, free_port


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
                 user_kubeconfig=None, tag="", log_level="warn", precompiled_dir=None):
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
            if precompiled_dir:
                cmd += ["--precompiled-dir", str(precompiled_dir)]
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
