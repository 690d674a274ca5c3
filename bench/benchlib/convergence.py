"""The convergence run (one contender, N Databases created at once, timed to every one
converged) and the plugin directories and host configs the runs start from."""

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from .common import CONVERGE_TIMEOUT_S, USERS, log
from .processes import Controller
from .promtext import diff_buckets, histogram, ms, quantile


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


def converge_once(kind, bins, cp, run_dir, n, ns, wasmop_plugins, label=None, cache_dir=None,
                  config=None):
    """One convergence run of `kind`'s process; `label` names the contender in the results
    (section 8 runs wasmop with the Python plugin as `wasmop-python`, as the same user);
    `config` is a wasmop host configuration file (the defaults without one)."""
    c = Controller(kind, bins, cp, run_dir, plugins_dir=wasmop_plugins,
                   cache_dir=cache_dir or run_dir / "cache", config=config, tag=f"-{ns}")
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
            if key == "reconcile_time":
                # Calls per object: what each reconcile costs is multiplied by it.
                result["reconciles"] = b[-1][1] if b else 0
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


def artefact_mib(cache_dir):
    return round(sum(a.stat().st_size for a in cache_dir.glob("*/*.cwasm")) / 2**20, 1)


def reconciles(c, name):
    b = histogram(c.scrape(), "controller_runtime_reconcile_time_seconds", {"controller": name})
    return b[-1][1] if b else 0
