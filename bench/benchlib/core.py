"""Sections 1-7 of bench/run: wasmop against the native kube-rs controller, controller-runtime
and kopf, and wasmop's own latency, start-up, memory, isolation and micro-benchmarks."""

import json
import os
import statistics
import subprocess
import time

from .common import CONTENDERS, CONVERGE_TIMEOUT_S, ROOT, goal, log
from .convergence import converge_once, plugin_dir, wait_for_artefacts, wasmop_config
from .processes import Controller, settle_rss
from .promtext import diff_buckets, histogram, ms, quantile


def measure_convergence(bins, cp, run_dir, n, repeats):
    plugins = plugin_dir(run_dir, bins, 1)
    # Fill the artefact cache first, so that no run's peak memory is Cranelift's.
    warm = Controller("wasmop", bins, cp, run_dir, plugins_dir=plugins, cache_dir=run_dir / "cache",
                      tag="-warm-up")
    warm.wait_ready()
    # Tiered loading is ready on Winch code before Cranelift's artefact is written.
    wait_for_artefacts(run_dir / "cache", 1)
    warm.stop()
    runs = []
    for rep in range(repeats):
        order = CONTENDERS[rep % 4:] + CONTENDERS[:rep % 4]
        for kind in order:
            runs.append(converge_once(kind, bins, cp, run_dir, n, f"conv-{kind}-{rep}", plugins))
    summary = {}
    for kind in CONTENDERS:
        mine = [r for r in runs if r["controller"] == kind and r["converge_s"] is not None]
        if not mine:
            summary[kind] = None
            continue
        summary[kind] = {k: statistics.median(r[k] for r in mine)
                         for k in ["converge_s", "cpu_s", "peak_rss_mib", "api_requests"]}
        summary[kind]["throughput_per_s"] = round(n / summary[kind]["converge_s"], 1)
        summary[kind]["converged_runs"] = len(mine)
    base = summary["native"]
    for kind in CONTENDERS:
        s = summary[kind]
        if s is None:
            continue
        s["throughput_vs_native"] = round(s["throughput_per_s"] / base["throughput_per_s"], 3)
        s["cpu_vs_native"] = round(s["cpu_s"] / base["cpu_s"], 3) if base["cpu_s"] else None
        s["rss_vs_native"] = round(s["peak_rss_mib"] / base["peak_rss_mib"], 3)
        s["requests_vs_native"] = round(s["api_requests"] / base["api_requests"], 3)
    return {"objects": n, "repeats": repeats, "runs": runs, "median": summary}


def measure_latency(bins, cp, run_dir, convergence):
    plugins = plugin_dir(run_dir, bins, 1)
    c = Controller("wasmop", bins, cp, run_dir, plugins_dir=plugins, cache_dir=run_dir / "cache",
                   tag="-latency")
    c.wait_ready()
    before = c.scrape()
    ns = "latency-idle"
    count = 200
    subprocess.run([str(bins["load"]), "trickle", ns, str(count), "--interval-ms", "50"],
                   check=True, capture_output=True, env={**os.environ, "KUBECONFIG": cp.kubeconfig})
    time.sleep(2)
    after = c.scrape()
    c.stop()
    cp.delete_namespace(ns)
    b = diff_buckets(histogram(after, "wasmop_event_to_reconcile_seconds", {"name": "database-config"}),
                     histogram(before, "wasmop_event_to_reconcile_seconds", {"name": "database-config"}))
    storm = [r for r in (convergence or {}).get("runs", []) if r["controller"] == "wasmop"]
    return {
        "idle": {"objects": count, "interval_ms": 50, "samples": b[-1][1] if b else 0,
                 "p50_ms": ms(quantile(b, 0.5)), "p99_ms": ms(quantile(b, 0.99))},
        "storm": {"runs": len(storm),
                  "p50_ms": statistics.median([r["event_to_reconcile_p50_ms"] for r in storm]) if storm else None,
                  "p99_ms": statistics.median([r["event_to_reconcile_p99_ms"] for r in storm]) if storm else None},
    }


def measure_startup_and_idle(bins, cp, run_dir, counts, repeats):
    startup = {}
    idle = {}
    for count in counts:
        plugins = plugin_dir(run_dir, bins, count)
        cold, cached, rss = [], [], []
        for rep in range(repeats):
            cache = run_dir / f"cache-start-{count}-{rep}"
            for phase in ("cold", "cached"):
                c = Controller("wasmop", bins, cp, run_dir, plugins_dir=plugins, cache_dir=cache,
                               user_kubeconfig=cp.kubeconfig, tag=f"-start-{count}-{rep}-{phase}")
                t = c.wait_ready()
                if phase == "cold":
                    # Tiered loading is ready on Winch code and writes Cranelift's artefacts
                    # in the background: the cached phase needs all of them.
                    wait_for_artefacts(cache, count)
                if phase == "cached":
                    time.sleep(3)
                    rss.append(c.rss_mib())
                c.stop()
                (cold if phase == "cold" else cached).append(t)
        startup[str(count)] = {"cold_ms": round(statistics.median(cold) * 1000, 1),
                               "cached_ms": round(statistics.median(cached) * 1000, 1)}
        idle[str(count)] = {"rss_mib": round(statistics.median(rss), 2)}
    others = {}
    for kind in ["native", "controller-runtime", "kopf"]:
        times = []
        for rep in range(repeats):
            c = Controller(kind, bins, cp, run_dir, tag=f"-start-{rep}")
            times.append(c.wait_ready())
            c.stop()
        others[kind] = {"ready_ms": round(statistics.median(times) * 1000, 1)}
    per_plugin = {}
    if "1" in idle and "0" in idle:
        per_plugin["first"] = round(idle["1"]["rss_mib"] - idle["0"]["rss_mib"], 3)
    for lo, hi in [("1", "10"), ("10", "50")]:
        if lo in idle and hi in idle:
            per_plugin[f"{lo}_to_{hi}"] = round(
                (idle[hi]["rss_mib"] - idle[lo]["rss_mib"]) / (int(hi) - int(lo)), 3)
    return ({"wasmop": startup, "others": others, "repeats": repeats},
            {"rss": idle, "per_plugin_mib": per_plugin})
def measure_cache(bins, cp, run_dir, count):
    plugins = plugin_dir(run_dir, bins, 0, extra=("noop",))
    c = Controller("wasmop", bins, cp, run_dir, plugins_dir=plugins, cache_dir=run_dir / "cache",
                   user_kubeconfig=cp.kubeconfig, tag="-cache")
    c.wait_ready()
    before = settle_rss(c, 10)
    ns = "cache-memory"
    out = subprocess.run([str(bins["load"]), "configmaps", ns, str(count)], check=True,
                         capture_output=True, text=True,
                         env={**os.environ, "KUBECONFIG": cp.kubeconfig})
    sizes = json.loads(out.stdout)
    after = settle_rss(c, 30)
    c.stop()
    cp.delete_namespace(ns)
    delta = after - before
    trimmed = sizes["trimmed_json_bytes"] / 2**20
    return {"objects": count, "rss_before_mib": round(before, 2), "rss_after_mib": round(after, 2),
            "rss_delta_mib": round(delta, 2), "trimmed_json_mib": round(trimmed, 2),
            "full_json_mib": round(sizes["full_json_bytes"] / 2**20, 2),
            "ratio": round(delta / trimmed, 3)}


def measure_isolation(bins, cp, run_dir, n, repeats):
    """Alone and beside the spinning plugin, alternated round by round (the order flips each
    round), so that the machine's drift does not fall on one mode; the p99 of a ~3 s storm
    moves between runs by more than the spinner's effect, so every round is kept."""
    results = {}
    samples = {"alone": [], "with-hostile": []}
    for rep in range(repeats):
        modes = ("alone", "with-hostile") if rep % 2 == 0 else ("with-hostile", "alone")
        for mode in modes:
            extra = ("infinite-loop",) if mode == "with-hostile" else ()
            plugins = plugin_dir(run_dir, bins, 1, extra=extra)
            config = wasmop_config(run_dir / f"isolation-{mode}.yaml",
                                   {"infinite-loop": {"deadline": "1s", "failureThreshold": 0}})
            hostile_ns = f"hostile-{rep}"
            if extra:
                subprocess.run([str(bins["load"]), "targets", hostile_ns, "64"], check=True,
                               capture_output=True, env={**os.environ, "KUBECONFIG": cp.kubeconfig})
            c = Controller("wasmop", bins, cp, run_dir, plugins_dir=plugins, config=config,
                           cache_dir=run_dir / "cache", user_kubeconfig=cp.kubeconfig,
                           tag=f"-isolation-{mode}-{rep}")
            c.wait_ready()
            time.sleep(3)  # the hostile plugin is spinning at its deadline by now
            before = c.scrape()
            ns = f"iso-{mode}-{rep}"
            out = subprocess.run([str(bins["load"]), "converge", ns, str(n)], check=True,
                                 capture_output=True, text=True,
                                 env={**os.environ, "KUBECONFIG": cp.kubeconfig})
            after = c.scrape()
            labels = {"controller": "database-config"}
            b = diff_buckets(histogram(after, "controller_runtime_reconcile_time_seconds", labels),
                             histogram(before, "controller_runtime_reconcile_time_seconds", labels))
            samples[mode].append({"p50_ms": ms(quantile(b, 0.5)), "p99_ms": ms(quantile(b, 0.99)),
                                  "converge_s": json.loads(out.stdout)["converged_s"]})
            if extra:
                aborts = [l for l in after.splitlines()
                          if l.startswith("wasmop_") and "infinite-loop" in l and "abort" in l]
                results.setdefault("hostile_abort_series", aborts[:5])
            c.stop()
            cp.delete_namespace(ns)
            if extra:
                cp.delete_namespace(hostile_ns)
    for mode, runs in samples.items():
        results[mode] = {"reconcile_p50_ms": round(statistics.median(r["p50_ms"] for r in runs), 3),
                         "reconcile_p99_ms": round(statistics.median(r["p99_ms"] for r in runs), 3),
                         "converge_s": round(statistics.median(r["converge_s"] for r in runs), 3),
                         "runs": runs}
    results["p99_ratio"] = round(results["with-hostile"]["reconcile_p99_ms"]
                                 / results["alone"]["reconcile_p99_ms"], 3)
    results["p99_ratio_per_round"] = [round(h["p99_ms"] / a["p99_ms"], 3) for a, h in
                                      zip(samples["alone"], samples["with-hostile"])]
    results["objects"] = n
    results["hostile"] = "tests/hostile/infinite-loop, deadline 1s, 64 Targets, concurrency 4"
    return results


def measure_micro(run_dir):
    out = {}
    for package, bench in (("wasmop-runtime", "dispatch"), ("wasmop", "reload")):
        log(f"cargo bench -p {package} --bench {bench}")
        p = subprocess.run(["cargo", "bench", "-p", package, "--bench", bench], cwd=ROOT,
                           capture_output=True, text=True)
        (run_dir / f"cargo-bench-{bench}.log").write_text(p.stdout + p.stderr)
        out[bench] = {"exit": p.returncode, "output": p.stdout.strip().splitlines()}
    return out




def report(results, out, goals):
    """Sections 1-7 of BENCHMARKS.md, appended to `out`; their goals to `goals`."""
    conv = results.get("convergence")
    if conv:
        med = conv["median"]
        out += [
            f"## 1. Convergence: {conv['objects']} Databases created at once",
            "",
            "Time from the first create to every `<name>-config` ConfigMap existing and every Database",
            "Ready for its generation (watched by `bench-load`, the creator, 32 creates in flight).",
            "CPU: the controller process's utime+stime from just before the first create to 2 s after",
            "convergence. Peak RSS: VmHWM. API requests: the apiserver's audit log, counted by the",
            "controller's own user (each contender has its own client certificate).",
            f"Medians of {conv['repeats']} alternated runs per controller.",
            "",
            "| controller | converge (s) | objects/s | × native | CPU (s) | × native | peak RSS (MiB) | × native | API requests | × native |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        names = {"wasmop": "(a) wasmop + database-config", "native": "(b) native kube-rs",
                 "controller-runtime": "(c) controller-runtime (Go)", "kopf": "(d) kopf (Python)"}
        for k in CONTENDERS:
            s = med[k]
            if s is None:
                out.append(f"| {names[k]} | did not converge within {CONVERGE_TIMEOUT_S} s | | | | | | | | |")
                continue
            out.append(f"| {names[k]} | {s['converge_s']:.2f} | {s['throughput_per_s']} | "
                       f"{s['throughput_vs_native']} | {s['cpu_s']:.2f} | {s['cpu_vs_native']} | "
                       f"{s['peak_rss_mib']:.1f} | {s['rss_vs_native']} | {s['api_requests']:.0f} | "
                       f"{s['requests_vs_native']} |")
        out += ["", "Every run:", "", "| controller | run | converge (s) | CPU (s) | peak RSS (MiB) | requests | by verb |",
                "| --- | --- | ---: | ---: | ---: | ---: | --- |"]
        for r in conv["runs"]:
            out.append(f"| {r['controller']} | {r.get('ns', '')} | {r['converge_s'] or 'not converged'} | "
                       f"{r['cpu_s']} | {r['peak_rss_mib']} | {r['api_requests']} | "
                       f"{r.get('api_requests_by_verb', r.get('error', ''))} |")
        out.append("")
        w = med["wasmop"]
        goals.append(("throughput ≥ 0.97× native", f"{w['throughput_vs_native']}×",
                      goal(w["throughput_vs_native"] >= 0.97)))
        goals.append(("CPU ≤ 1.15× native", f"{w['cpu_vs_native']}×", goal(w["cpu_vs_native"] <= 1.15)))
        for other in ("controller-runtime", "kopf"):
            o = med[other]
            if o is None:
                goals.append((f"ahead of {other} on throughput, CPU and memory",
                              f"{other} did not converge within {CONVERGE_TIMEOUT_S} s", "met"))
                continue
            ahead = (w["throughput_per_s"] > o["throughput_per_s"] and w["cpu_s"] < o["cpu_s"]
                     and w["peak_rss_mib"] < o["peak_rss_mib"])
            goals.append((f"ahead of {other} on throughput, CPU and memory",
                          f"{w['throughput_per_s']} vs {o['throughput_per_s']} /s, "
                          f"{w['cpu_s']:.2f} vs {o['cpu_s']:.2f} s, {w['peak_rss_mib']:.1f} vs {o['peak_rss_mib']:.1f} MiB",
                          goal(ahead)))
    lat = results.get("latency")
    if lat:
        i, s = lat["idle"], lat["storm"]
        out += [
            "## 2. Event → plugin call latency (wasmop)",
            "",
            "`wasmop_event_to_reconcile_seconds` (watch event received by the plugin's controller → the",
            "plugin called, permits held), p50/p99 interpolated in its buckets (100 µs × 2^k).",
            f"Idle: {i['objects']} Databases created one every {i['interval_ms']} ms. Storm: during the",
            "convergence runs of 1 (median over the runs).",
            "",
            "| | p50 (ms) | p99 (ms) |",
            "| --- | ---: | ---: |",
            f"| idle | {i['p50_ms']} | {i['p99_ms']} |",
            f"| storm | {s['p50_ms']} | {s['p99_ms']} |",
            "",
        ]
        goals.append(("event→invocation p50 ≤ 2 ms (idle / storm)", f"{i['p50_ms']} / {s['p50_ms']} ms",
                      goal(i["p50_ms"] is not None and i["p50_ms"] <= 2)
                      + " / " + goal(s["p50_ms"] is not None and s["p50_ms"] <= 2)))
        goals.append(("event→invocation p99 ≤ 20 ms (idle / storm)", f"{i['p99_ms']} / {s['p99_ms']} ms",
                      goal(i["p99_ms"] is not None and i["p99_ms"] <= 20)
                      + " / " + goal(s["p99_ms"] is not None and s["p99_ms"] <= 20)))
    st = results.get("startup")
    if st:
        out += [
            "## 3. Start-up: process start → ready",
            "",
            "wasmop: until `/readyz` answers 200 (every plugin loaded, its caches synced), polled every",
            "2 ms. Cold: an empty artefact cache (every plugin compiled by Cranelift); cached: the second",
            "start with the same cache directory. The copies of database-config are the same component",
            "with its `describe` name rewritten (`database-cfgNNN`), so each is a distinct plugin with its",
            "own digest, compile and artefact. Others: until they print `ready` (native: Database store",
            "filled; controller-runtime: informers synced; kopf: start-up handlers done).",
            f"Medians of {st['repeats']} runs.",
            "",
            "| plugins | cold (ms) | cached (ms) |",
            "| ---: | ---: | ---: |",
        ]
        for k, v in st["wasmop"].items():
            out.append(f"| {k} | {v['cold_ms']} | {v['cached_ms']} |")
        out += ["", "| controller | ready (ms) |", "| --- | ---: |"]
        for k, v in st["others"].items():
            out.append(f"| {k} | {v['ready_ms']} |")
        out.append("")
        if "10" in st["wasmop"]:
            c10 = st["wasmop"]["10"]["cached_ms"]
            goals.append(("start-up with 10 cached plugins ≤ 50 ms", f"{c10} ms", goal(c10 <= 50)))
    idle = results.get("idle_memory")
    if idle:
        out += ["## 4. Idle memory (wasmop, cached artefacts, 3 s after ready)", "",
                "| plugins | RSS (MiB) |", "| ---: | ---: |"]
        for k, v in idle["rss"].items():
            out.append(f"| {k} | {v['rss_mib']} |")
        out += ["", f"Increment per plugin (MiB): {idle['per_plugin_mib']}", ""]
        if "10" in idle["rss"]:
            r10 = idle["rss"]["10"]["rss_mib"]
            goals.append(("idle RSS, host + 10 plugins ≤ 30 MiB", f"{r10} MiB", goal(r10 <= 30)))
        inc = idle["per_plugin_mib"].get("10_to_50")
        if inc is not None:
            goals.append(("≤ 1 MiB per further plugin", f"{inc} MiB", goal(inc <= 1)))
    cache = results.get("cache_memory")
    if cache:
        out += [
            f"## 5. Cache memory: {cache['objects']} watched ConfigMaps",
            "",
            "wasmop with the `noop` test plugin (it owns ConfigMaps, so the host caches every",
            "ConfigMap); RSS once stable before and after creating the ConfigMaps, against the sum of",
            "their JSON sizes trimmed as host/src/watches.rs trims (no managedFields, no last-applied",
            "annotation).",
            "",
            "| RSS before | RSS after | growth | trimmed JSON | untrimmed JSON | growth / trimmed |",
            "| ---: | ---: | ---: | ---: | ---: | ---: |",
            f"| {cache['rss_before_mib']} MiB | {cache['rss_after_mib']} MiB | {cache['rss_delta_mib']} MiB | "
            f"{cache['trimmed_json_mib']} MiB | {cache['full_json_mib']} MiB | {cache['ratio']}× |",
            "",
        ]
        goals.append(("cache ≤ 1.2× trimmed JSON", f"{cache['ratio']}×", goal(cache["ratio"] <= 1.2)))
    iso = results.get("isolation")
    if iso:
        out += [
            "## 6. Isolation",
            "",
            f"database-config converging {iso['objects']} Databases alone, and while {iso['hostile']}",
            "spins (each of its calls runs until the deadline aborts it). Reconcile time of",
            "database-config from `controller_runtime_reconcile_time_seconds` (host calls included).",
            "",
            "| | reconcile p50 (ms) | reconcile p99 (ms) | converge (s) |",
            "| --- | ---: | ---: | ---: |",
            f"| alone | {iso['alone']['reconcile_p50_ms']} | {iso['alone']['reconcile_p99_ms']} | {iso['alone']['converge_s']} |",
            f"| with the hostile plugin | {iso['with-hostile']['reconcile_p50_ms']} | "
            f"{iso['with-hostile']['reconcile_p99_ms']} | {iso['with-hostile']['converge_s']} |",
            "",
            f"p99 ratio: {iso['p99_ratio']}× (medians of {len(iso['alone'].get('runs', [])) or 'the'} "
            "rounds; alone and beside the spinner alternated)",
            "",
        ]
        if iso.get("p99_ratio_per_round"):
            out += ["Per round (with / alone p99): "
                    + ", ".join(f"{r}×" for r in iso["p99_ratio_per_round"])
                    + "; alone p99 per round (ms): "
                    + ", ".join(str(r["p99_ms"]) for r in iso["alone"]["runs"]), ""]
        goals.append(("isolation p99 ≤ 1.1× alone", f"{iso['p99_ratio']}×", goal(iso["p99_ratio"] <= 1.1)))
    micro = results.get("micro")
    if micro:
        out += ["## 7. Micro-benchmarks (`cargo bench -p wasmop-runtime --bench dispatch`, `-p wasmop --bench reload`)", ""]
        for k, v in micro.items():
            out += [f"`--bench {k}` (exit {v['exit']}):", "", "```text", *v["output"], "```", ""]
