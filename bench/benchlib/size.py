"""Section 10 of bench/run: how big a Rust plugin that touches Jobs is, and what each cut of
issue 22 takes off it. No control plane: it builds the size probes of bench/size and counts
bytes.

The probes (their own workspaces, built into target/size-probes):
  jobs     lists the Jobs it owns and creates one (k8s-openapi's Job both ways)
  cronjob  kubebuilder's CronJob tutorial controller: a spec embedding a JobTemplateSpec, the
           owned Jobs listed, history pruned, the Job of a missed schedule created (cron crate)
Each is built with the release profile `wasmop new` used to write (opt-level "s", names kept:
the baseline), then with opt-level "z", then "z" with every symbol stripped (what `wasmop new`
writes now; bench/size/.cargo/config.toml adds, for both, the static relocation model
`wasmop new` writes in a project's .cargo/config.toml), each also with `--features light` (the
owned Jobs listed as a view of their metadata and status, not k8s-openapi's Job); and the stripped "z" build through binaryen's
wasm-opt -Oz (npm `binaryen`, on the core module, then `wasm-tools component new`). Every
build's zstd -19 size is beside it: what a compressed ConfigMap holds.
"""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .common import CACHE, ROOT, TARGET, goal, log, run

PROBES = {"jobs": "size_jobs", "cronjob": "size_cronjob"}
# (label, opt-level, strip)
PROFILES = [("s", "s", "debuginfo"), ("z", "z", "debuginfo"), ("z, stripped", "z", "true")]
BINARYEN = "132.0.0"
CONFIGMAP_LIMIT = 1024 * 1024
JOBS_GOAL = 700_000


def wasm_opt():
    """binaryen's wasm-opt from npm, installed once under the tools cache."""
    root = CACHE / "tools" / f"binaryen-{BINARYEN}"
    tool = root / "node_modules" / ".bin" / "wasm-opt"
    if not tool.exists():
        if shutil.which("npm") is None:
            return None
        run(["npm", "install", "--silent", "--prefix", str(root), f"binaryen@{BINARYEN}"])
    return tool


def wasm_tools():
    out = subprocess.run([str(ROOT / "guest-sdk" / "go" / "build"), "--tools"],
                         capture_output=True, text=True, check=True).stdout.split()
    tool = Path(out[1])
    return tool if tool.exists() else None


def cargo_build(probe, opt, strip, light, core=False):
    """Builds `probe` and returns the .wasm's path (a core module with `core`)."""
    env = dict(os.environ, CARGO_TARGET_DIR=str(TARGET / "size-probes"),
               CARGO_PROFILE_RELEASE_OPT_LEVEL=opt, CARGO_PROFILE_RELEASE_STRIP=strip)
    if core:
        # RUSTFLAGS replaces the .cargo/config.toml flags (what `wasmop new` writes):
        # repeat them.
        env["RUSTFLAGS"] = "-C relocation-model=static -C link-arg=--skip-wit-component"
    else:
        env.pop("RUSTFLAGS", None)
    cmd = ["cargo", "build", "--quiet", "--release", "--target", "wasm32-wasip2"]
    if light:
        cmd += ["--features", "light"]
    run(cmd, cwd=ROOT / "bench" / "size" / probe, env=env)
    return TARGET / "size-probes" / "wasm32-wasip2" / "release" / f"{PROBES[probe]}.wasm"


def zstd_size(path):
    if shutil.which("zstd") is None:
        return None
    data = subprocess.run(["zstd", "-19", "-q", "-c", str(path)], capture_output=True,
                          check=True).stdout
    return len(data)


def measure(run_dir):
    out = {"probes": {}}
    opt, tools = wasm_opt(), wasm_tools()
    for probe in PROBES:
        rows = []
        for light in (False, True):
            for label, level, strip in PROFILES:
                path = cargo_build(probe, level, strip, light)
                rows.append({"build": label, "light": light, "bytes": path.stat().st_size,
                             "zstd": zstd_size(path)})
        if opt and tools:
            core = cargo_build(probe, "z", "true", False, core=True)
            with tempfile.TemporaryDirectory() as tmp:
                optimised, component = Path(tmp) / "opt.wasm", Path(tmp) / "component.wasm"
                log(f"wasm-opt -Oz {probe}")
                run([str(opt), "-Oz", "--enable-bulk-memory", "--enable-nontrapping-float-to-int",
                     "--enable-sign-ext", "--enable-mutable-globals", str(core), "-o",
                     str(optimised)])
                run([str(tools), "component", "new", str(optimised), "-o", str(component)])
                rows.append({"build": f"z, stripped, wasm-opt -Oz (binaryen {BINARYEN})",
                             "light": False, "bytes": component.stat().st_size,
                             "zstd": zstd_size(component)})
        baseline = rows[0]["bytes"]
        for r in rows:
            r["vs_s"] = round(r["bytes"] / baseline, 3)
        out["probes"][probe] = rows
    return out


def report(results, out, goals):
    size = results.get("size")
    if not size:
        return
    out += [
        "## 10. Plugin size: a Rust plugin using k8s-openapi's Job",
        "",
        "Two probes in `bench/size`: `jobs` lists the Jobs it owns and creates one; `cronjob` is",
        "kubebuilder's CronJob tutorial controller (its spec embeds a JobTemplateSpec; `cron`",
        "crate). Built for wasm32-wasip2 with LTO, one codegen unit and static addresses",
        "(`bench/size/.cargo/config.toml`, as `wasmop new` writes it): opt-level \"s\" with",
        "function names kept (what `wasmop new` wrote before; the baseline), \"z\", and \"z\" with",
        "every symbol stripped (what `wasmop new` writes now); \"light\": the owned Jobs listed as a",
        "view of their metadata and status instead of k8s-openapi's Job; and the stripped \"z\" core",
        "module through binaryen's `wasm-opt -Oz` (npm) before `wasm-tools component new`. zstd -19:",
        "what a compressed ConfigMap holds (every source takes `.wasm.zst`). A ConfigMap holds",
        "1 MiB (1,048,576 bytes).",
        "",
        "| probe | build | list type | bytes | × s | zstd -19 | fits a ConfigMap as it is |",
        "| --- | --- | --- | ---: | ---: | ---: | --- |",
    ]
    for probe, rows in size["probes"].items():
        for r in rows:
            kind = "view (metadata, status)" if r["light"] else "k8s-openapi Job"
            z = f"{r['zstd']:,}" if r["zstd"] else "n/a"
            fits = "yes" if r["bytes"] <= CONFIGMAP_LIMIT else "no (compressed: yes)"
            out.append(f"| {probe} | {r['build']} | {kind} | {r['bytes']:,} | {r['vs_s']} | {z} | {fits} |")
    out.append("")
    jobs = size["probes"].get("jobs")
    if jobs:
        default = next(r for r in jobs if r["build"] == "z, stripped" and not r["light"])
        light = next(r for r in jobs if r["build"] == "z, stripped" and r["light"])
        goals.append(("Job list+create plugin ≤ 700 KB (`wasmop new`'s profile, k8s-openapi's Job)",
                      f"{default['bytes']:,} B (Jobs listed as a view: {light['bytes']:,} B)",
                      goal(default["bytes"] <= JOBS_GOAL)))
    cron = size["probes"].get("cronjob")
    if cron:
        default = next(r for r in cron if r["build"] == "z, stripped" and not r["light"])
        goals.append(("CronJob-style plugin < 1 MiB (`wasmop new`'s profile)",
                      f"{default['bytes']:,} B", goal(default["bytes"] < CONFIGMAP_LIMIT)))
