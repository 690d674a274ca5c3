"""Section 12: the plugin author's loop under `wasmop dev` (issue 22), in each language.

For Rust, Python and Go: `wasmop new` in a directory of the run, then `wasmop dev` on the
bundled control plane (its cargo target in the run directory), as the
README's "Write a plugin" says. Figures: from starting `wasmop dev` to the plugin's first write
(the first build included: for Rust a cold build of the dependencies), and from saving an edit
of the plugin's source (the ConfigMap's key, alternated) to the new version's write, read from
the timestamp of dev's own log line of that write.
"""

import datetime
import os
import signal
import statistics
import subprocess
import time

from .common import ROOT, goal, log

#: language, the source file edited, the text the edit swaps, the goal (s).
LANGUAGES = [
    ("rust", "src/lib.rs", ('"message".to_owned(),', '"said".to_owned(),'), 5.0),
    ("python", "app.py", ('"data": {"message":', '"data": {"said":'), 2.0),
    ("go", "plugin.go", ('map[string]string{"message":', 'map[string]string{"said":'), 5.0),
]
EDITS = 5
#: dev's own filter, with the loader's and tiering's lines: `_settle` counts Winch loads and
#: the Cranelift compilations that replace them.
DEV_LOG = ("warn,kube_client::client::builder=off,wasmop::cli::dev=info,"
           "wasmop_runtime::loader=info,wasmop_runtime::tiered=info,"
           "wasmop_controller::writes=debug")
WRITE = "apply v1 ConfigMap"
PROMOTED = "plugin now runs on Cranelift code"


def _stamp(line):
    return datetime.datetime.fromisoformat(line.split()[0].replace("Z", "+00:00"))


def _wait(text, until, what, proc, seconds):
    deadline = time.monotonic() + seconds
    while not until(text()):
        if proc.poll() is not None:
            raise RuntimeError(f"wasmop dev stopped while waiting for {what}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"wasmop dev: no {what} in {seconds} s")
        time.sleep(0.05)


def _settle(text, proc):
    """Waits (up to 2 min) until every Winch load's Cranelift compilation has ended: an author
    saves seconds apart, and a compilation still running would compete with the next edit."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        t = text()
        if t.count(PROMOTED) >= t.count("compiler=Winch"):
            return
        time.sleep(0.5)


def measure_one(bins, cp, work, lang, source, swap):
    name = f"loop-{lang}"
    subprocess.run([str(bins["wasmop"]), "new", name, "--lang", lang], cwd=work, check=True,
                   capture_output=True)
    project = work / name
    log_file = work / f"{name}.log"
    # WASMOP_CACHE_DIR stays: the Go build finds its toolchain there (dev's artefacts go
    # to its dev-artefacts). The Rust project builds in the run directory; the Go build's
    # pre-initialiser is the checkout's (see `measure`).
    env = dict(os.environ, WASMOP_LOG=DEV_LOG)
    if lang == "rust":
        env["CARGO_TARGET_DIR"] = str(work / "target")
    started = time.monotonic()
    with open(log_file, "w") as err:
        proc = subprocess.Popen(
            [str(bins["wasmop"]), "dev", "--kubeconfig", str(cp.kubeconfig)],
            cwd=project, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=err)
    text = log_file.read_text
    try:
        _wait(text, lambda t: WRITE in t, "first write", proc, 1800)
        first = time.monotonic() - started
        _settle(text, proc)
        path = project / source
        src = path.read_text()
        old, new = swap
        edits = []
        for _ in range(EDITS):
            before = text().count(WRITE)
            src = src.replace(old, new) if old in src else src.replace(new, old)
            saved = datetime.datetime.now(datetime.timezone.utc)
            path.write_text(src)
            _wait(text, lambda t, b=before: t.count(WRITE) > b, "write of the edit", proc, 600)
            line = [ln for ln in text().splitlines() if WRITE in ln][before]
            edits.append(round((_stamp(line) - saved).total_seconds(), 3))
            _settle(text, proc)
            time.sleep(1)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
    log(f"  {lang}: first write {first:.1f} s after start; edits {edits}")
    return {"first_write_s": round(first, 1), "edits_s": edits,
            "median_s": statistics.median(edits)}


def measure(bins, cp, run_dir):
    log("12 dev loop: wasmop new + wasmop dev, saved edits to the new version's write")
    work = run_dir / "dev-loop"
    work.mkdir()
    if not os.environ.get("WASMOP_GO_PREINIT"):
        # The Go build's pre-initialiser (a wasmtime, minutes to build once), before the clock.
        subprocess.run(["cargo", "build", "--quiet", "-p", "wasmop-go-preinit"], cwd=ROOT,
                       check=True)
    return {lang: measure_one(bins, cp, work, lang, source, swap)
            for lang, source, swap, _ in LANGUAGES}


def report(results, out, goals):
    loop = results.get("dev_loop")
    if not loop:
        return
    out += [
        "## 12. The author's loop: `wasmop dev`",
        "",
        "`wasmop new loop-LANG --lang LANG`, then `wasmop dev` on the control plane (the cargo",
        "target in the run directory: the first start builds the Rust project's dependencies;",
        "the Python runner is built at the first start too). Then 5 saved edits of the plugin's",
        "source, alternating the ConfigMap's key, each once the last version's background",
        "compilation has ended; from the save to the new version's write (dev's log line).",
        "A Python edit ships only its sources to the runner built at the start (README, \"In",
        "Python\"); a Rust or Go edit is a build of the dev profile and a Winch compile.",
        "",
        "| language | start to first write | save to the new version's write: median | min–max |",
        "| --- | ---: | ---: | ---: |",
    ]
    for lang, _, _, bound in LANGUAGES:
        r = loop.get(lang)
        if not r:
            continue
        out.append(f"| {lang} | {r['first_write_s']} s | {r['median_s']:.2f} s | "
                   f"{min(r['edits_s']):.2f}–{max(r['edits_s']):.2f} s |")
        goals.append((f"`wasmop dev`: {lang} edit live ≤ {bound:g} s",
                      f"{r['median_s']:.2f} s (median of {len(r['edits_s'])})",
                      goal(r["median_s"] <= bound)))
    out.append("")
