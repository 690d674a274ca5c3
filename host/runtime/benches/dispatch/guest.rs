//! The `database-config` of another language (the Python one, a CPython component, and the Go
//! one, stock Go with wit-bindgen's Go bindings) on the same object, cluster and path as the
//! Rust plugin, called interleaved with the Rust plugin and the native twin so that machine
//! noise hits the three alike: what a reconcile costs when its logic is Python or Go.
//!
//! The components are built by their SDKs' build commands (`guest-sdk/python/build`,
//! `guest-sdk/go/build`), which the Rust test build cannot run, so each is taken from where
//! its plugins' tests and `bench/run` build it, `target/<lang>-plugins/database-config.wasm`
//! (or the path in `WASMOP_BENCH_PYTHON` / `WASMOP_BENCH_GO`), and skipped with a message
//! saying how to build it when missing. Each is compiled here with Cranelift into a fresh
//! cache, as the Rust plugin is (tens of seconds for ~19 MB of CPython, seconds for Go).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use wasmop_core::cluster::Cluster;
use wasmop_runtime::{Call, LoadOptions, Outcome, Plugin, Request, Runtime, RuntimeConfig};

use super::{native_reconcile, stats, us};

/// A language whose `database-config` is measured.
#[derive(Clone, Copy)]
pub struct Language {
    /// Lowercase, as the output's lines start (`python reconcile:`; `bench/run` parses them).
    pub label: &'static str,
    /// The variable that names another component to measure.
    pub env: &'static str,
    /// The SDK's build command and the directory of the plugins, relative to the workspace.
    pub build: &'static str,
    /// The plugins' directory, relative to the workspace.
    pub plugins: &'static str,
    /// What else builds it (tests, a `bench/run` section), for the skip message.
    pub also: &'static str,
}

/// The Python `database-config` (componentize-py).
pub const PYTHON: Language = Language {
    label: "python",
    env: "WASMOP_BENCH_PYTHON",
    build: "guest-sdk/python/build",
    plugins: "plugins/python",
    also: "`cargo test -p wasmop-python-plugins` or `bench/run --only 8`",
};

/// The Go `database-config` (stock Go, `GOOS=wasip1`).
pub const GO: Language = Language {
    label: "go",
    env: "WASMOP_BENCH_GO",
    build: "guest-sdk/go/build",
    plugins: "plugins/go",
    also: "`cargo test -p wasmop-go-plugins`",
};

/// The workspace root (this crate is `host/runtime`).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where the component of `lang` is read from: its variable's path, a relative one taken
/// from the workspace root (`cargo bench` runs the bench in this crate's directory, not where
/// the command was typed), or the test suite's build.
pub fn component(lang: Language) -> PathBuf {
    std::env::var_os(lang.env).map_or_else(
        || {
            workspace().join(format!(
                "target/{}-plugins/database-config.wasm",
                lang.label
            ))
        },
        |given| workspace().join(given),
    )
}

/// What the Rust side of the comparison needs: the Rust plugin, the cluster and the two
/// forms of the request (text for the plugins, a value for the native twin).
pub struct Rust<'a> {
    /// The Rust `database-config`, compiled by Cranelift.
    pub plugin: &'a Plugin,
    /// The echoing cluster all three talk to.
    pub cluster: Arc<dyn Cluster>,
    /// The object as JSON text, as the controller passes it to a plugin.
    pub text_request: &'a Request,
    /// The object as a value, as the native twin takes it.
    pub value_request: &'a Request,
}

/// Loads the `database-config` of `lang` (compiled by Cranelift into the cache of `config`)
/// and measures `calls` reconciles of each of the three, interleaved, after a tenth as many
/// warm-up calls.
pub async fn run(
    lang: Language,
    config: RuntimeConfig,
    rust: &Rust<'_>,
    calls: usize,
) -> anyhow::Result<()> {
    let label = lang.label;
    let path = component(lang);
    if !path.is_file() {
        println!(
            "  {label}:{:pad$}skipped: {} is not built (build it with `{} {}/database-config \
             -o {}`, or run {})",
            "",
            path.display(),
            lang.build,
            lang.plugins,
            path.display(),
            lang.also,
            pad = 18 - label.len(),
        );
        return Ok(());
    }
    let bytes = std::fs::read(&path)?;
    let runtime = Runtime::new(config)?;
    let started = Instant::now();
    let guest = runtime.load(bytes.clone(), LoadOptions::default()).await?;
    let load = started.elapsed();
    let name = rust.plugin.name().clone();
    let call = |plugin| reconcile(plugin, &rust.cluster, rust.text_request);
    let first = call(&guest).await;
    anyhow::ensure!(
        first == Outcome::Action(wasmop_runtime::Action::Done),
        "the {label} database-config failed: {first}"
    );
    let warmup = calls / 10;
    let (mut other, mut rs, mut native) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..(warmup + calls) {
        let t = Instant::now();
        let outcome = call(&guest).await;
        let g = t.elapsed();
        anyhow::ensure!(outcome.is_success(), "{label}: {outcome}");
        let t = Instant::now();
        let outcome = call(rust.plugin).await;
        let r = t.elapsed();
        anyhow::ensure!(outcome.is_success(), "rust: {outcome}");
        let t = Instant::now();
        native_reconcile(rust.cluster.as_ref(), &name, rust.value_request).await?;
        let n = t.elapsed();
        if i >= warmup {
            other.push(g);
            rs.push(r);
            native.push(n);
        }
    }
    let (g, r, n) = (stats(other), stats(rs), stats(native));
    println!(
        "{label} database-config: {calls} calls each after {warmup} warm-up calls, interleaved with the Rust plugin and the native twin"
    );
    line(
        &format!("{label} component:"),
        &format!("{} bytes ({})", bytes.len(), path.display()),
    );
    line(
        &format!("{label} compile:"),
        &format!(
            "{:.1} ms Cranelift (load incl. describe: {:.1} ms)",
            guest.load_stats().compile_time.as_secs_f64() * 1e3,
            load.as_secs_f64() * 1e3
        ),
    );
    timing(&format!("{label} reconcile:"), &g);
    timing("rust reconcile:", &r);
    timing("native reconcile:", &n);
    line(
        &format!("{label} ratio:"),
        &format!(
            "{:.2}x the Rust plugin, {:.2}x native (medians)",
            us(g.median) / us(r.median),
            us(g.median) / us(n.median)
        ),
    );
    Ok(())
}

/// One reconcile call of `plugin`, its outcome.
async fn reconcile(plugin: &Plugin, cluster: &Arc<dyn Cluster>, request: &Request) -> Outcome {
    plugin
        .call(cluster.clone(), Call::reconcile(request.clone()))
        .await
        .outcome
}

fn line(label: &str, text: &str) {
    println!("  {label:<18} {text}");
}

fn timing(label: &str, s: &super::Stats) {
    line(
        label,
        &format!("median {:9.2} µs   p99 {:9.2} µs", us(s.median), us(s.p99)),
    );
}
