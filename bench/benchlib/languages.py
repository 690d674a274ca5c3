"""Sections 8 and 9 of bench/run: a plugin written in another language than Rust, against the
operator framework its authors would otherwise use, running the same logic.

  8 python  the Python database-config (guest-sdk/python/build) against kopf (bench/kopf), which
            imports the plugin's own database_logic.py
  9 go      the Go database-config (guest-sdk/go/build) against controller-runtime
            (bench/controller-runtime), the same logic written as a controller-runtime author
            would

Each converges N Databases as in section 1, with the Rust plugin in wasmop as the third
contender, and measures per plugin: cold reload to first reconcile (Winch), Winch and Cranelift
compile times, component and artefact sizes, the component compressed for the ConfigMap route,
the host's peak RSS while compiling, the same reload from a precompiled artefact (`wasmop
compile`) and the host's peak RSS then, cached start and RSS with 1 and 10 distinct plugins (3
with --quick), and the dispatch cost per reconcile against the Rust plugin and the native twin."""

import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

from .common import CONVERGE_TIMEOUT_S, ROOT, TARGET, goal, log, run
from .convergence import converge_once, plugin_dir, wait_for_artefacts, wasmop_config
from .processes import Controller, settle_rss
from .reloads import cold_reload, precompiled_reload

# The largest object the API server stores (etcd's default request limit is 1.5 MiB; a
# ConfigMap's data is limited to 1 MiB): what a compressed component must fit in to ship as a
# ConfigMap key.
CONFIGMAP_LIMIT = 1 << 20
# Reconciles of one plugin at once when its host config does not say (host/src/config.rs,
# DEFAULT_PLUGIN_CONCURRENCY): what the wasmop contenders run with unless raised.
WASMOP_DEFAULT_CONCURRENCY = 4


@dataclass
class Language:
    key: str            # results key; the wasmop contender is `wasmop-<key>`
    section: int
    title: str
    builder: str        # the SDK's build script, relative to the workspace
    source_file: str    # the file of the plugin's source that names it
    name_pattern: str   # how that file names the plugin, with {} for the name
    baseline: str       # the other framework's contender kind (section 1's names)
    baseline_label: str
    bench_env: str      # the dispatch bench's variable for this language's component
    dispatch_calls: tuple  # WASMOP_BENCH_CALLS (quick, full): the bench calls this language
                           # a fraction of them
    intro: list = field(default_factory=list)
    # A fourth contender: the same plugin with its `concurrency` raised to this (0: none),
    # for a baseline that runs more reconciles at once than WASMOP_DEFAULT_CONCURRENCY.
    raised_concurrency: int = 0

    @property
    def label(self):
        return f"wasmop-{self.key}"

    @property
    def raised_label(self):
        return f"{self.label}-c{self.raised_concurrency}" if self.raised_concurrency else None

    @property
    def source(self):
        return ROOT / "plugins" / self.key / "database-config"

    @property
    def out(self):
        # The test suite's and the dispatch bench's build directory: builds are shared and
        # skipped when unchanged.
        return TARGET / f"{self.key}-plugins"

    @property
    def contenders(self):
        raised = [self.raised_label] if self.raised_label else []
        return [self.label, self.baseline, "wasmop", *raised]


PYTHON = Language(
    key="python", section=8, title="Python", builder="guest-sdk/python/build",
    source_file="app.py", name_pattern='Info("{}",', baseline="kopf",
    baseline_label="kopf (same logic)", bench_env="WASMOP_BENCH_PYTHON",
    dispatch_calls=(2000, 20000),
    intro=[
        "The Python `database-config` (`plugins/python/database-config`, built from source by",
        "`guest-sdk/python/build`) in wasmop, against the kopf operator of 1 (`bench/kopf`), which",
        "imports the plugin's own `database_logic.py`: both run the same function bodies for the",
        "desired ConfigMap, the Ready condition and whether the status changed.",
    ],
    # kopf starts every object's handler at once (its default sets no worker limit).
    raised_concurrency=8)

GO = Language(
    key="go", section=9, title="Go", builder="guest-sdk/go/build",
    source_file="plugin.go", name_pattern='wasmop.NewInfo("{}",', baseline="controller-runtime",
    baseline_label="controller-runtime (same logic)", bench_env="WASMOP_BENCH_GO",
    dispatch_calls=(1000, 5000),
    intro=[
        "The Go `database-config` (`plugins/go/database-config`, built from source with stock Go by",
        "`guest-sdk/go/build`, pre-initialised) in wasmop, against the controller-runtime controller of",
        "1 (`bench/controller-runtime`, controller-runtime v0.23, `k8s.io/api` types), which does the",
        "same work as a controller-runtime author writes it: the desired ConfigMap applied, the Ready",
        "condition, the status written when it changed, an Event.",
    ])

LANGUAGES = {"8": PYTHON, "9": GO}


def build_plugins(lang, count):
    """The language's database-config built from source by its SDK's build script, and
    `count - 1` distinct copies: its source with the plugin's name changed to database-cfgNNN,
    each its own build, so no two components are alike."""
    builder = ROOT / lang.builder

    def build_one(src, name):
        out = lang.out / f"{name}.wasm"
        run([sys.executable, str(builder), str(src), "-o", str(out)], cwd=ROOT)
        return out

    built = [build_one(lang.source, "database-config")]
    for i in range(1, count):
        name = f"database-cfg{i:03d}"
        src = lang.out / "variants" / name
        shutil.rmtree(src, ignore_errors=True)
        shutil.copytree(lang.source, src, ignore=shutil.ignore_patterns("__pycache__", ".*"))
        named = src / lang.source_file
        text = named.read_text()
        renamed = text.replace(lang.name_pattern.format("database-config"),
                               lang.name_pattern.format(name))
        if renamed == text:
            raise SystemExit(f"bench: cannot rename the plugin of {lang.source / lang.source_file} "
                             f"(no `{lang.name_pattern.format('database-config')}`)")
        named.write_text(renamed)
        gomod = src / "go.mod"
        if gomod.exists():
            # Relative `replace` paths point from the source's directory, not the copy's.
            gomod.write_text(re.sub(r"=> (\.\.?/\S+)",
                                    lambda m: f"=> {(lang.source / m.group(1)).resolve()}",
                                    gomod.read_text()))
        built.append(build_one(src, name))
    return built


def component_dir(run_dir, components, tag):
    d = run_dir / f"plugins-{tag}"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    for c in components:
        shutil.copy(c, d / c.name.replace("-", "_"))
    return d


def cached_starts(bins, cp, run_dir, plugins, cache, repeats, tag):
    times, rss = [], []
    for rep in range(repeats):
        c = Controller("wasmop", bins, cp, run_dir, plugins_dir=plugins, cache_dir=cache,
                       user_kubeconfig=cp.kubeconfig, tag=f"-start-{tag}-{rep}")
        try:
            times.append(c.wait_ready())
            rss.append(settle_rss(c, 10))
        finally:
            c.stop()
    return {"ready_ms": round(statistics.median(times) * 1000, 1),
            "ready_ms_runs": [round(t * 1000, 1) for t in times],
            "rss_mib": round(statistics.median(rss), 1)}


def measure_dispatch(run_dir, lang, calls):
    """`cargo bench -p wasmop-runtime --bench dispatch` (the language's database-config is built
    by now; the other languages' skipped), its lines for this language parsed."""
    others = {lang_.bench_env: "/nonexistent" for lang_ in LANGUAGES.values() if lang_ is not lang}
    env = {**os.environ, "WASMOP_BENCH_CALLS": str(calls), **others}
    log(f"WASMOP_BENCH_CALLS={calls} cargo bench -p wasmop-runtime --bench dispatch")
    p = subprocess.run(["cargo", "bench", "-p", "wasmop-runtime", "--bench", "dispatch"], cwd=ROOT,
                       capture_output=True, text=True, env=env)
    (run_dir / f"cargo-bench-dispatch-{lang.key}.log").write_text(p.stdout + p.stderr)
    lines = p.stdout.strip().splitlines()
    # The language's block: from its header through its ratio line (or the skip message).
    block, inside = [], False
    for line in lines:
        inside = inside or line.startswith(f"{lang.key} database-config:") or f"{lang.key}:" in line
        if inside:
            block.append(line)
            if f"{lang.key} ratio:" in line or f"{lang.key}:" in line:
                break
    figures = {}
    k = re.escape(lang.key)
    for line in block:
        # `<key> reconcile`, and the Rust plugin's and the native twin's interleaved with it.
        m = re.match(rf"\s*({k}|rust|native) (\S+):\s+median\s+([\d.]+) µs\s+p99\s+([\d.]+) µs", line)
        if m:
            who = m.group(2) if m.group(1) == lang.key else f"{m.group(1)}_{m.group(2)}"
            figures[who] = {"median_us": float(m.group(3)), "p99_us": float(m.group(4))}
        m = re.match(rf"\s*{k} ratio:\s+([\d.]+)x the Rust plugin, ([\d.]+)x native", line)
        if m:
            figures["vs_rust"], figures["vs_native"] = float(m.group(1)), float(m.group(2))
    if p.returncode != 0:
        # What went wrong, so that the report says more than an exit code.
        block += p.stderr.strip().splitlines()[-15:]
    return {"exit": p.returncode, "calls": calls, "figures": figures, "output": block}


def measure(lang, bins, cp, run_dir, n, repeats, quick):
    count = 3 if quick else 10
    components = build_plugins(lang, count)
    one = component_dir(run_dir, components[:1], f"{lang.key}-1")
    many = component_dir(run_dir, components, f"{lang.key}-{count}")
    cache = run_dir / f"cache-{lang.key}"
    out = {"objects": n, "repeats": repeats, "plugins": count}
    # Cold: a new plugin into a running host, with an empty cache.
    out["cold"] = cold_reload(bins, cp, run_dir, lang, components[0], cache)
    # The same plugin from a precompiled artefact: what a small node runs (no compile at all).
    out["precompiled"] = precompiled_reload(bins, cp, run_dir, lang, components[0])
    # Fill the cache with every plugin's Cranelift artefact, so that no later figure is a
    # compile's.
    warm = Controller("wasmop", bins, cp, run_dir, plugins_dir=many, cache_dir=cache,
                      user_kubeconfig=cp.kubeconfig, tag=f"-{lang.key}-warm-up")
    try:
        warm_ready = warm.wait_ready(timeout=900)
        wait_for_artefacts(cache, count, timeout=1800)
        out["warm_up"] = {"plugins": count, "ready_on_winch_s": round(warm_ready, 2),
                          "all_artefacts_s": round(time.monotonic() - warm.started, 1),
                          "peak_rss_mib": round(warm.hwm_mib(), 1)}
    finally:
        warm.stop()
    out["cached"] = {"1": cached_starts(bins, cp, run_dir, one, cache, repeats, f"{lang.key}-1"),
                     str(count): cached_starts(bins, cp, run_dir, many, cache, repeats,
                                               f"{lang.key}-{count}")}
    c1, cn = out["cached"]["1"], out["cached"][str(count)]
    out["rss_per_further_plugin_mib"] = round((cn["rss_mib"] - c1["rss_mib"]) / (count - 1), 1)
    out["cached_ready_ms_per_plugin"] = round(cn["ready_ms"] / count, 1)
    # Convergence: this language's plugin, the other framework and the Rust plugin, alternated;
    # the Rust one's artefact is cached first too.
    rust = plugin_dir(run_dir, bins, 1)
    rust_cache = run_dir / "cache"
    warm = Controller("wasmop", bins, cp, run_dir, plugins_dir=rust, cache_dir=rust_cache,
                      tag=f"-{lang.key}-rust-warm-up")
    try:
        warm.wait_ready()
        wait_for_artefacts(rust_cache, 1)
    finally:
        warm.stop()
    raised = None
    if lang.raised_label:
        raised = wasmop_config(run_dir / f"{lang.key}-concurrency.yaml",
                               {"database-config": {"concurrency": lang.raised_concurrency}})
    runs = []
    for rep in range(repeats):
        k = rep % len(lang.contenders)
        for label in lang.contenders[k:] + lang.contenders[:k]:
            kind = "wasmop" if label.startswith("wasmop") else label
            mine = label in (lang.label, lang.raised_label)
            plugins, c = (one, cache) if mine else (rust, rust_cache)
            runs.append(converge_once(kind, bins, cp, run_dir, n, f"{lang.key}-{label}-{rep}",
                                      plugins, label=label, cache_dir=c,
                                      config=raised if label == lang.raised_label else None))
    summary = {}
    for label in lang.contenders:
        mine = [r for r in runs if r["controller"] == label and r["converge_s"] is not None]
        summary[label] = None if not mine else {
            **{k: statistics.median(r[k] for r in mine)
               for k in ["converge_s", "cpu_s", "peak_rss_mib", "api_requests"]},
            **{k: statistics.median(r[k] for r in mine)
               for k in MEMORY_SPLIT if all(k in r for r in mine)},
            "converged_runs": len(mine)}
        if summary[label]:
            summary[label]["throughput_per_s"] = round(n / summary[label]["converge_s"], 1)
    base = summary[lang.baseline]
    for label in lang.contenders:
        s = summary[label]
        if s is None or base is None:
            continue
        s["throughput_vs_baseline"] = round(s["throughput_per_s"] / base["throughput_per_s"], 3)
        s["cpu_vs_baseline"] = round(s["cpu_s"] / base["cpu_s"], 3) if base["cpu_s"] else None
        s["rss_vs_baseline"] = round(s["peak_rss_mib"] / base["peak_rss_mib"], 3)
    out["convergence"] = {"baseline": lang.baseline, "runs": runs, "median": summary}
    out["dispatch"] = measure_dispatch(run_dir, lang, lang.dispatch_calls[0 if quick else 1])
    return out


# Read at convergence by `converge_once` (runs of results.json before 2026-12-05 lack them).
MEMORY_SPLIT = ["rss_anon_mib", "rss_file_mib", "pss_mib"]


def vs_baseline(s, what):
    """A ratio against the baseline; results.json of runs before section 9 named it `_vs_kopf`."""
    return s.get(f"{what}_vs_baseline", s.get(f"{what}_vs_kopf"))


def report(lang, res, out, goals):
    """Section `lang.section` of BENCHMARKS.md, appended to `out`; its goals to `goals`."""
    cold, cached, conv = res["cold"], res["cached"], res["convergence"]["median"]
    count = res["plugins"]
    base = lang.baseline
    # Results of runs before a contender was added lack it.
    contenders = [k for k in lang.contenders if k in conv]
    raised_note = [] if lang.raised_label not in conv else [
        f"wasmop runs at most `concurrency` reconciles of a plugin at once "
        f"({WASMOP_DEFAULT_CONCURRENCY} by default);",
        f"{base} starts every object's handler at once. The last row is the same plugin with",
        f"`concurrency: {lang.raised_concurrency}` (deploy/config/wasmop.yaml), in the same "
        "alternation; the goals are",
        "read from the first row, the default.",
        "",
    ]
    out += [
        f"## {lang.section}. {lang.title} plugins: {res['objects']} Databases against {base}, "
        f"and what a {lang.title} plugin costs",
        "",
        *lang.intro,
        "The Rust plugin in wasmop is the third contender, for reference. Measured as in 1 (every",
        "artefact cached before the runs, so no peak RSS is a compile's); medians of",
        f"{res['repeats']} alternated runs.",
        "",
        *raised_note,
        f"| controller | converge (s) | objects/s | × {base} | CPU (s) | × {base} | peak RSS (MiB) "
        f"| × {base} | API requests |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    names = {lang.label: f"wasmop + {lang.title} database-config", base: lang.baseline_label,
             "wasmop": "wasmop + Rust database-config",
             lang.raised_label: f"wasmop + {lang.title} database-config, `concurrency: "
                                f"{lang.raised_concurrency}`"}
    for k in contenders:
        s = conv.get(k)
        if s is None:
            out.append(f"| {names[k]} | did not converge within {CONVERGE_TIMEOUT_S} s | | | | | | | |")
            continue
        out.append(f"| {names[k]} | {s['converge_s']:.2f} | {s['throughput_per_s']} | "
                   f"{vs_baseline(s, 'throughput') or ''} | {s['cpu_s']:.2f} | "
                   f"{vs_baseline(s, 'cpu') or ''} | {s['peak_rss_mib']:.1f} | "
                   f"{vs_baseline(s, 'rss') or ''} | {s['api_requests']:.0f} |")
    if all(conv.get(k) and all(m in conv[k] for m in MEMORY_SPLIT) for k in contenders):
        out += ["", "What each process maps at convergence (medians; after the 2 s of trailing work, "
                "not at the peak). RSS counts a file page once for every address it is mapped at, "
                "so the artefact's code and memory image count once per instance slot that maps "
                "them; PSS counts each page once:", "",
                "| controller | RSS anonymous (MiB) | RSS file-backed (MiB) | PSS (MiB) |",
                "| --- | ---: | ---: | ---: |"]
        for k in contenders:
            s = conv[k]
            out.append(f"| {names[k]} | {s['rss_anon_mib']:.1f} | {s['rss_file_mib']:.1f} | "
                       f"{s['pss_mib']:.1f} |")
    out += ["", "Every run:", "",
            "| controller | run | converge (s) | CPU (s) | peak RSS (MiB) | requests |",
            "| --- | --- | ---: | ---: | ---: | ---: |"]
    for r in res["convergence"]["runs"]:
        out.append(f"| {r['controller']} | {r.get('ns', '')} | {r['converge_s'] or 'not converged'} | "
                   f"{r['cpu_s']} | {r['peak_rss_mib']} | {r['api_requests']} |")
    c1, cn = cached["1"], cached[str(count)]
    z = cold.get("zstd19_bytes")
    out += [
        "",
        f"Per plugin ({count} distinct {lang.title} components: the plugin and copies of its source",
        "with another plugin name, each built on its own). Cold reload: a host running with an",
        "empty plugin directory and artefact cache, one Database; the component renamed into the",
        "directory → its first reconcile (`controller_runtime_reconcile_time_seconds` counted), on",
        "the code tiered loading runs first; the same host then compiles it with Cranelift in the",
        "background: its compile times are the runtime's log line, its peak RSS the host's VmHWM",
        "after both. From a precompiled artefact: the same reload into a host whose",
        "`--precompiled-dir` holds the artefact `wasmop compile` made (what a small node runs:",
        "deploy/README.md), with an empty cache; its peak RSS a second after the first reconcile.",
        "Cached: process start → `/readyz` with every artefact in the cache; RSS once settled.",
        "",
        "| measure | figure |",
        "| --- | ---: |",
        f"| component size | {cold['component_mib']} MiB |",
    ]
    if "zstd19_bytes" in cold:
        out.append(f"| compressed (`zstd -19`, the ConfigMap route takes `.wasm.zst`) | "
                   f"{'zstd not installed' if z is None else f'{z:,} bytes'} |")
    out += [
        f"| cold reload → first reconcile (loaded by {cold['loaded_by']}) | {cold['first_reconcile_s']} s |",
        f"| Winch compile | {cold['winch_compile_ms']} ms |",
        f"| Cranelift compile (background) | {cold['cranelift_compile_ms']} ms |",
        f"| Cranelift artefact | {cold['artefact_mib']} MiB |",
        f"| host RSS: before / peak while compiling / after | {cold['host_rss_before_mib']} / "
        f"{cold['host_peak_rss_mib']} / {cold['host_rss_after_mib']} MiB |",
    ]
    pre = res.get("precompiled")
    if pre:
        out += [
            f"| from a precompiled artefact (`wasmop compile`: {pre['wasmop_compile_s']} s; "
            f"loaded without compiling: {'yes' if pre['loaded_precompiled'] else 'NO'}) → first "
            f"reconcile | {pre['first_reconcile_s']} s |",
            f"| host RSS with it: before / peak / after | {pre['host_rss_before_mib']} / "
            f"{pre['host_peak_rss_mib']} / {pre['host_rss_after_mib']} MiB |",
        ]
    out += [
        f"| cached start → ready, 1 plugin | {c1['ready_ms']} ms |",
        f"| cached start → ready, {count} plugins | {cn['ready_ms']} ms ({res['cached_ready_ms_per_plugin']} ms per plugin) |",
        f"| RSS, 1 plugin loaded | {c1['rss_mib']} MiB |",
        f"| RSS, {count} plugins loaded | {cn['rss_mib']} MiB ({res['rss_per_further_plugin_mib']} MiB per further plugin) |",
    ]
    if res.get("warm_up"):
        w = res["warm_up"]
        out.append(f"| warm-up: {w['plugins']} plugins from an empty cache, ready on Winch / all "
                   f"Cranelift artefacts / peak RSS | {w['ready_on_winch_s']} s / {w['all_artefacts_s']} s / "
                   f"{w['peak_rss_mib']} MiB |")
    d = res.get("dispatch", {})
    out += ["", f"Dispatch (`WASMOP_BENCH_CALLS={d.get('calls')} cargo bench -p wasmop-runtime --bench dispatch`, "
            f"exit {d.get('exit')}):", "", "```text", *d.get("output", []), "```", ""]
    GOALS[lang.key](lang, res, goals)


def conv_goals(lang, res, goals, throughput, cpu, rss):
    mine, other = res["convergence"]["median"].get(lang.label), res["convergence"]["median"].get(lang.baseline)
    t = lang.title
    if mine and other:
        for what, bound, op in [("throughput", throughput, "≥"), ("cpu", cpu, "≤"), ("rss", rss, "≤")]:
            ratio = vs_baseline(mine, what)
            ok = None if ratio is None else (ratio >= bound if op == "≥" else ratio <= bound)
            name = {"throughput": "throughput", "cpu": "CPU", "rss": "peak RSS"}[what]
            goals.append((f"{t} plugin: {name} {op} {bound}× {lang.baseline}", f"{ratio}×", goal(ok)))
    else:
        goals.append((f"{t} plugin against {lang.baseline}", "a contender did not converge", "MISSED"))


def python_goals(lang, res, goals):
    cold, cn, c1 = res["cold"], res["cached"][str(res["plugins"])], res["cached"]["1"]
    count = res["plugins"]
    conv_goals(lang, res, goals, throughput=2, cpu=0.5, rss=0.5)
    goals.append(("Python plugin: cached load ≤ 100 ms per plugin (1 / per plugin of "
                  f"{count})", f"{c1['ready_ms']} / {res['cached_ready_ms_per_plugin']} ms",
                  goal(c1["ready_ms"] <= 100) + " / " + goal(res["cached_ready_ms_per_plugin"] <= 100)))
    goals.append(("Python plugin: ≤ 20 MiB RSS per plugin beyond the first",
                  f"{res['rss_per_further_plugin_mib']} MiB", goal(res["rss_per_further_plugin_mib"] <= 20)))
    goals.append(("Python plugins: ≤ 150 MiB RSS for ten", f"{cn['rss_mib']} MiB for {count}",
                  goal(cn["rss_mib"] <= 150) if count == 10 else "n/a"))
    r = cold["first_reconcile_s"]
    goals.append(("Python plugin: cold reload → first reconcile ≤ 3 s on Winch",
                  f"{r} s ({cold['loaded_by']})",
                  goal(r is not None and r <= 3 and cold["loaded_by"] == "Winch")))
    # The issue's goal: ≤ 256 MiB while compiling, "or the K3s overlay documents precompiled
    # artefacts as the way, with the figure" (it does: deploy/overlays/k3s, deploy/README.md);
    # the figure is the host's peak with the plugin from a precompiled artefact.
    pre, peak = res.get("precompiled"), cold["host_peak_rss_mib"]
    if peak <= 256 or not pre:
        goals.append(("Python plugin: host peak RSS while compiling ≤ 256 MiB",
                      f"{peak} MiB", goal(peak <= 256)))
    else:
        ok = pre["loaded_precompiled"] and pre["host_peak_rss_mib"] <= 256
        goals.append(("Python plugin: host peak RSS while compiling ≤ 256 MiB, or precompiled "
                      "artefacts as the way (the K3s overlay), with the figure",
                      f"{peak} MiB compiling; {pre['host_peak_rss_mib']} MiB from a precompiled "
                      "artefact", "met (precompiled)" if ok else "MISSED"))
    dispatch_goal(res, goals, "Python plugin: dispatch ≤ 1 ms per reconcile", 1000)


def go_goals(lang, res, goals):
    cold, c1 = res["cold"], res["cached"]["1"]
    count = res["plugins"]
    conv_goals(lang, res, goals, throughput=1.0, cpu=1.0, rss=0.5)
    dispatch_goal(res, goals, "Go plugin: dispatch ≤ 100 µs per reconcile", 100)
    goals.append((f"Go plugin: cached load ≤ 50 ms (1 / per plugin of {count})",
                  f"{c1['ready_ms']} / {res['cached_ready_ms_per_plugin']} ms",
                  goal(c1["ready_ms"] <= 50) + " / " + goal(res["cached_ready_ms_per_plugin"] <= 50)))
    goals.append(("Go plugin: ≤ 8 MiB RSS per loaded plugin (beyond the first)",
                  f"{res['rss_per_further_plugin_mib']} MiB", goal(res["rss_per_further_plugin_mib"] <= 8)))
    r = cold["first_reconcile_s"]
    goals.append(("Go plugin: cold reload → first reconcile ≤ 1 s on Winch",
                  f"{r} s ({cold['loaded_by']})",
                  goal(r is not None and r <= 1 and cold["loaded_by"] == "Winch")))
    z = cold.get("zstd19_bytes")
    goals.append(("Go plugin: ships through a ConfigMap (`zstd -19` ≤ 1 MiB)",
                  "zstd not installed" if z is None else f"{z:,} bytes",
                  goal(None if z is None else z <= CONFIGMAP_LIMIT)))


def dispatch_goal(res, goals, text, bound_us):
    pd = res.get("dispatch", {}).get("figures", {}).get("reconcile")
    goals.append((text, f"{pd['median_us']} µs median" if pd else "not measured",
                  goal(pd["median_us"] <= bound_us) if pd else "n/a"))


GOALS = {"python": python_goals, "go": go_goals}
