"""Section 11 of bench/run: admission. database-config's validating webhook served by wasmop,
against the same rules as (a) a native Rust webhook (bench/native admission-native: hyper,
rustls, kube's admission types) and (b) a ValidatingAdmissionPolicy (CEL in the API server).

Three measurements, all on this machine in one run:
- in process: `cargo bench -p wasmop-runtime --bench review`, one review from its bytes to
  the answer's, sandboxed against native (the sandbox's own cost);
- straight to the webhook server: `bench-load post`, the same client POSTing AdmissionReviews
  over kept-alive TLS connections to wasmop's server and to the native one (reviews/s with
  16 connections, p50/p99 with one);
- end to end: `bench-load admit`, dry-run creates of valid Databases through the API server
  (every admission step runs, nothing is stored) with no policy, with the CEL policy, with
  wasmop's webhook and with the native webhook, the setups alternated round by round.
"""

import base64
import json
import os
import statistics
import subprocess
import time

from .common import ROOT, free_port, goal, log
from .processes import Controller

NS = "admit-bench"
BAD = """apiVersion: demo.wasmop.dev/v1
kind: Database
metadata: {name: refused, namespace: admit-bench}
spec: {engine: postgres, host: "not a host!", port: 5432, replicas: 1}
"""
POLICY = r"""apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: bench-database-config}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: [demo.wasmop.dev]
        apiVersions: [v1]
        operations: [CREATE, UPDATE]
        resources: [databases]
  validations:
    - expression: "object.spec.engine in ['postgres', 'mysql', 'mariadb']"
      message: "spec.engine: Unsupported value"
    - expression: "object.spec.port >= 1 && object.spec.port <= 65535"
      message: "spec.port: must be a TCP port, 1 to 65535"
    - expression: >-
        (size(object.spec.host) <= 253 &&
        object.spec.host.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'))
        || isIP(object.spec.host)
      message: "spec.host: must be a DNS name or an IP address"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: bench-database-config}
spec:
  policyName: bench-database-config
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: admit-bench}
"""
NATIVE_WEBHOOK = """apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: bench-native}
webhooks:
  - name: database-config.native.bench.wasmop.dev
    admissionReviewVersions: [v1]
    sideEffects: None
    failurePolicy: Fail
    timeoutSeconds: 5
    clientConfig:
      url: https://127.0.0.1:%d/validate/database-config
      caBundle: %s
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: admit-bench}
    rules:
      - apiGroups: [demo.wasmop.dev]
        apiVersions: [v1]
        operations: [CREATE, UPDATE]
        resources: [databases]
"""


def load(bins, cp, *args):
    out = subprocess.run([str(bins["load"]), *map(str, args)], check=True, capture_output=True,
                         text=True, env={**os.environ, "KUBECONFIG": cp.kubeconfig})
    return json.loads(out.stdout)


def refused(cp):
    """Whether a dry-run create of the bad Database is refused for its host."""
    p = subprocess.run([str(cp.cp), "kubectl", "apply", "--dry-run=server", "-f", "-"], input=BAD,
                       capture_output=True, text=True,
                       env={**os.environ, "KUBECONFIG": cp.kubeconfig})
    return p.returncode != 0 and "spec.host" in p.stderr


def wait_refusing(cp, what, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if refused(cp):
            return
        time.sleep(0.25)
    raise SystemExit(f"bench: {what} never refused the bad Database")


def apply(cp, yaml):
    subprocess.run([str(cp.cp), "kubectl", "apply", "-f", "-"], input=yaml, check=True,
                   capture_output=True, text=True, env={**os.environ, "KUBECONFIG": cp.kubeconfig})


def delete(cp, *what):
    cp.kubectl("delete", "--ignore-not-found", *what, check=False)


class Setup:
    """One way of enforcing the rule, started and stopped around its rounds."""

    def __init__(self, name, bins, cp, run_dir):
        self.name, self.bins, self.cp, self.run_dir = name, bins, cp, run_dir
        self.proc = self.host = None
        self.port = free_port()
        self.ca_file = run_dir / f"{name}-ca.pem"

    def start(self):
        if self.name == "cel":
            apply(self.cp, POLICY)
            wait_refusing(self.cp, "the ValidatingAdmissionPolicy")
        elif self.name == "wasmop":
            config = self.run_dir / "admission-wasmop.yaml"
            config.write_text(
                "namespace: wasmop-system\nlogFormat: json\n"
                f"admission:\n  address: 127.0.0.1:{self.port}\n  url: https://127.0.0.1:{self.port}\n"
                "plugins:\n  database-config:\n    admission: {mutating: false}\n")
            plugins = self.run_dir / "admission-plugins"
            plugins.mkdir(exist_ok=True)
            (plugins / "database_config.wasm").write_bytes(
                self.bins["guests"]["database-config"].read_bytes())
            self.host = Controller("wasmop", self.bins, self.cp, self.run_dir, plugins_dir=plugins,
                                   config=config, cache_dir=self.run_dir / "cache",
                                   user_kubeconfig=self.cp.kubeconfig, tag="-admission")
            self.host.wait_ready()
            wait_refusing(self.cp, "wasmop's webhook")
            secret = json.loads(self.cp.kubectl("get", "secret", "-n", "wasmop-system",
                                                "wasmop-webhook-ca", "-o", "json").stdout)
            self.ca_file.write_bytes(base64.b64decode(secret["data"]["ca.crt"]))
        elif self.name == "native":
            self.proc = subprocess.Popen([str(self.bins["admission-native"]),
                                          f"127.0.0.1:{self.port}", str(self.ca_file)],
                                         stdout=subprocess.PIPE, text=True)
            if self.proc.stdout.readline().strip() != "ready":
                raise SystemExit("bench: admission-native did not start")
            bundle = base64.b64encode(self.ca_file.read_bytes()).decode()
            apply(self.cp, NATIVE_WEBHOOK % (self.port, bundle))
            wait_refusing(self.cp, "the native webhook")

    def stop(self):
        if self.name == "cel":
            delete(self.cp, "validatingadmissionpolicybinding,validatingadmissionpolicy",
                   "bench-database-config")
        elif self.name == "wasmop":
            self.host.stop()
            delete(self.cp, "validatingwebhookconfiguration,mutatingwebhookconfiguration",
                   "wasmop-wasmop-system")
        elif self.name == "native":
            delete(self.cp, "validatingwebhookconfiguration", "bench-native")
            self.proc.terminate()
            self.proc.wait()
        # The API server stops calling what was removed within a moment.
        time.sleep(2)


def micro():
    log("cargo bench -p wasmop-runtime --bench review")
    p = subprocess.run(["cargo", "bench", "-p", "wasmop-runtime", "--bench", "review"], cwd=ROOT,
                       capture_output=True, text=True, check=True)
    lines = [l for l in p.stdout.splitlines() if l.startswith("json: ")]
    return json.loads(lines[-1][len("json: "):])


def median_of(runs, key):
    return round(statistics.median(r[key] for r in runs), 3)


def measure(bins, cp, run_dir, n, repeats):
    results = {"micro": micro()}
    cp.kubectl("create", "namespace", NS, check=False)
    setups = ["none", "cel", "wasmop", "native"]
    e2e = {s: {"sequential": [], "parallel": []} for s in setups}
    direct = {s: {"sequential": [], "parallel": []} for s in ("wasmop", "native")}
    for rep in range(repeats):
        order = setups[rep % 4:] + setups[:rep % 4]
        for name in order:
            setup = Setup(name, bins, cp, run_dir)
            log(f"admission, round {rep + 1}: {name}")
            setup.start()
            try:
                e2e[name]["sequential"].append(load(bins, cp, "admit", NS, n, "--parallel", 1))
                e2e[name]["parallel"].append(load(bins, cp, "admit", NS, n, "--parallel", 16))
                if name in direct:
                    url = f"https://127.0.0.1:{setup.port}/validate/database-config"
                    direct[name]["sequential"].append(
                        load(bins, cp, "post", url, setup.ca_file, n, "--parallel", 1))
                    direct[name]["parallel"].append(
                        load(bins, cp, "post", url, setup.ca_file, 4 * n, "--parallel", 16))
            finally:
                setup.stop()
    results["end_to_end"] = {
        s: {"creates_per_s": median_of(r["parallel"], "per_s"),
            "p50_ms": median_of(r["sequential"], "p50_ms"),
            "p99_ms": median_of(r["sequential"], "p99_ms"),
            "failures": sum(x["failures"] for x in r["sequential"] + r["parallel"]),
            "runs": r}
        for s, r in e2e.items()}
    results["direct"] = {
        s: {"reviews_per_s": median_of(r["parallel"], "per_s"),
            "p50_ms": median_of(r["sequential"], "p50_ms"),
            "p99_ms": median_of(r["sequential"], "p99_ms"),
            "failures": sum(x["failures"] for x in r["sequential"] + r["parallel"]),
            "runs": r}
        for s, r in direct.items()}
    e = results["end_to_end"]
    results["create_p50_ratio_wasmop_to_cel"] = round(e["wasmop"]["p50_ms"] / e["cel"]["p50_ms"], 3)
    results["objects"] = n
    results["repeats"] = repeats
    return results


def report(results, out, goals):
    a = results.get("admission")
    if not a:
        return
    m = a["micro"]
    out += [
        "## 11. Admission: database-config's validator in the sandbox, native, and as CEL",
        "",
        "The same rule three ways: database-config's validating webhook served by `wasmop run`",
        "(its mutating webhook left unregistered, `plugins.database-config.admission.mutating:",
        "false`); the same checks in native Rust over kube's admission types behind the same",
        "HTTPS stack (`bench/native` `admission-native`); and a ValidatingAdmissionPolicy (CEL",
        "in the API server). Rounds alternate the setups.",
        "",
        f"**In process** (`cargo bench -p wasmop-runtime --bench review`, {m['calls']:,} reviews per",
        "case): one review from the AdmissionReview's bytes to the answer's.",
        "",
        "| case | review bytes | wasm p50 / p99 µs | native p50 / p99 µs | sandbox overhead p50 µs |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for case, c in m["cases"].items():
        out.append(f"| {case} | {c['review_bytes']:,} | {c['wasm_p50_us']} / {c['wasm_p99_us']} | "
                   f"{c['native_p50_us']} / {c['native_p99_us']} | {c['overhead_p50_us']} |")
    t = m["reviews_per_s_2_tasks"]
    out += ["", f"Two tasks back to back: wasm {t['wasm']:,.0f} reviews/s, native {t['native']:,.0f}.",
            "",
            f"**Straight to the webhook server** (`bench-load post`: {4 * a['objects']:,} reviews over 16",
            f"kept-alive TLS connections for reviews/s; {a['objects']:,} over one for latency; the",
            "client runs on the same 2 cores):",
            "",
            "| server | reviews/s | p50 ms | p99 ms | failures |",
            "| --- | ---: | ---: | ---: | ---: |"]
    for s, d in a["direct"].items():
        out.append(f"| {s} | {d['reviews_per_s']:,.0f} | {d['p50_ms']} | {d['p99_ms']} | {d['failures']} |")
    out += ["",
            f"**End to end through the API server** (`bench-load admit`: {a['objects']:,} dry-run",
            "creates of valid Databases, 16 at a time for creates/s, one at a time for latency;",
            "the API server, etcd and the webhook share the 2 cores):",
            "",
            "| setup | creates/s | p50 ms | p99 ms | p50 × CEL | failures |",
            "| --- | ---: | ---: | ---: | ---: | ---: |"]
    e = a["end_to_end"]
    for s, d in e.items():
        out.append(f"| {s} | {d['creates_per_s']:,.0f} | {d['p50_ms']} | {d['p99_ms']} | "
                   f"{round(d['p50_ms'] / e['cel']['p50_ms'], 2)} | {d['failures']} |")
    out.append("")
    overhead = max(c["overhead_p50_us"] for c in m["cases"].values())
    goals.append(("admission: sandbox overhead ≤ 50 µs per review over native (in process, p50)",
                  f"{overhead} µs", goal(overhead <= 50)))
    rps = a["direct"]["wasmop"]["reviews_per_s"]
    goals.append(("admission: ≥ 2,000 reviews/s on 2 cores (wasmop's webhook server, 16 connections)",
                  f"{rps:,.0f} reviews/s", goal(rps >= 2000)))
    ratio = a["create_p50_ratio_wasmop_to_cel"]
    goals.append(("admission: create latency with the webhook ≤ 1.5× the CEL policy's (p50, end to end)",
                  f"{ratio}×", goal(ratio <= 1.5)))
