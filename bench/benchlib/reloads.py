"""Sections 8 and 9's reloads: a plugin's component renamed into a running host, with an empty
artefact cache (it compiles the plugin: Winch, then Cranelift) or with a precompiled directory
holding its artefact (`wasmop compile`; it compiles nothing), one Database to reconcile; the
seconds to the first reconcile and the host's RSS before, at the peak and after."""

import os
import shutil
import subprocess
import time

from .convergence import artefact_mib, reconciles, wait_for_artefacts
from .processes import Controller, log_fields

DATABASE = """apiVersion: demo.wasmop.dev/v1
kind: Database
metadata:
  name: first
  namespace: %s
spec:
  engine: postgres
  host: first.example.svc
  port: 5432
  replicas: 1
"""


def compressed_bytes(component):
    """The component's size compressed as the ConfigMap route takes it (`zstd -19`), or None
    without the zstd CLI (./dev setup installs it)."""
    if not shutil.which("zstd"):
        return None
    p = subprocess.run(["zstd", "-19", "-q", "-c", str(component)], capture_output=True, check=True)
    return len(p.stdout)


def reload_into_host(bins, cp, run_dir, component, ns, cache, precompiled_dir=None,
                     settled=lambda: None):
    """A running host (empty plugin directory, artefact cache `cache`) and one Database in
    namespace `ns`; the plugin's file is renamed into the directory. Returns the seconds to its
    first reconcile, the host's VmHWM before the file arrived and at the end (after
    `settled()` returns, and a second more), its RSS then, and the `plugin loaded` line of the
    runtime."""
    plugins = run_dir / f"plugins-{ns}"
    shutil.rmtree(plugins, ignore_errors=True)
    plugins.mkdir(parents=True)
    cp.kubectl("create", "namespace", ns, check=False)
    manifest = run_dir / f"{ns}-database.yaml"
    manifest.write_text(DATABASE % ns)
    cp.kubectl("apply", "-f", str(manifest))
    c = Controller("wasmop", bins, cp, run_dir, plugins_dir=plugins, cache_dir=cache,
                   precompiled_dir=precompiled_dir, user_kubeconfig=cp.kubeconfig,
                   tag=f"-{ns}", log_level="info")
    try:
        c.wait_ready()
        time.sleep(1)
        hwm_before = c.hwm_mib()
        staged = run_dir / f"{component.name}.staged"
        shutil.copy(component, staged)
        started = time.monotonic()
        os.replace(staged, plugins / component.name.replace("-", "_"))
        first = None
        while time.monotonic() - started < 300:
            if reconciles(c, "database-config") >= 1:
                first = time.monotonic() - started
                break
            time.sleep(0.01)
        settled()
        time.sleep(1)
        hwm, rss = c.hwm_mib(), c.rss_mib()
    finally:
        c.stop()
    cp.delete_namespace(ns)
    loaded = [f for f in log_fields(c.log.name, "plugin loaded") if "compiler" in f]
    return {
        "first_reconcile_s": None if first is None else round(first, 3),
        "host_rss_before_mib": round(hwm_before, 1),
        "host_peak_rss_mib": round(hwm, 1),
        "host_rss_after_mib": round(rss, 1),
        "log": c.log.name,
        "loaded": loaded[0] if loaded else {},
    }


def cold_reload(bins, cp, run_dir, lang, component, cache):
    """The plugin renamed into a running host with an empty artefact cache (`reload_into_host`):
    seconds to its first reconcile (on Winch code: tiered loading), then the Cranelift artefact
    is awaited. The host's VmHWM at the end is its peak while compiling the plugin twice
    (Winch, then Cranelift)."""
    r = reload_into_host(bins, cp, run_dir, component, f"{lang.key}-reload", cache,
                         settled=lambda: wait_for_artefacts(cache, 1))
    promoted = log_fields(r.pop("log"), "plugin now runs on Cranelift code")
    return {
        "first_reconcile_s": r["first_reconcile_s"],
        "loaded_by": r.pop("loaded").get("compiler"),
        "winch_compile_ms": promoted[0].get("winch_ms") if promoted else None,
        "cranelift_compile_ms": promoted[0].get("cranelift_ms") if promoted else None,
        "artefact_mib": artefact_mib(cache),
        "component_bytes": component.stat().st_size,
        "component_mib": round(component.stat().st_size / 2**20, 1),
        "zstd19_bytes": compressed_bytes(component),
        **{k: r[k] for k in ("host_rss_before_mib", "host_peak_rss_mib", "host_rss_after_mib")},
    }


def precompiled_reload(bins, cp, run_dir, lang, component):
    """The same reload, into a host with a precompiled directory holding the plugin's artefact
    (`wasmop compile`, as a small node gets it: deploy/README.md, "Python plugins on a small
    node") and an empty artefact cache: seconds to its first reconcile, and the host's VmHWM a
    second after it, when nothing was compiled."""
    pre = run_dir / f"precompiled-{lang.key}"
    shutil.rmtree(pre, ignore_errors=True)
    started = time.monotonic()
    subprocess.run([str(bins["wasmop"]), "compile", "--out", str(pre), str(component)],
                   check=True, capture_output=True, text=True)
    compile_s = time.monotonic() - started
    cache = run_dir / f"cache-{lang.key}-pre"
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    r = reload_into_host(bins, cp, run_dir, component, f"{lang.key}-pre", cache,
                         precompiled_dir=pre)
    loaded = r.pop("loaded")
    r.pop("log")
    # `precompiled` is in the line since 2026-12-07; before, a load from the cache when the
    # cache started empty could only be one.
    return {"wasmop_compile_s": round(compile_s, 1),
            "loaded_precompiled": loaded.get("precompiled", loaded.get("from_cache")) is True,
            **r}
