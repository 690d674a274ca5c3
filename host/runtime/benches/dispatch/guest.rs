//! The Python `database-config` (`plugins/python/database-config`, a CPython component) on the
//! same object, cluster and path as the Rust plugin, called interleaved with the Rust plugin
//! and the native twin so that machine noise hits the three alike: what a reconcile costs
//! when its logic is Python.
//!
//! The component is built by `guest-sdk/python/build` (componentize-py), which the Rust test
//! build cannot run, so it is taken from where the Python plugins' tests and `bench/run`
//! section 8 build it, `target/python-plugins/database-config.wasm` (or the path in
//! `WASMOP_BENCH_PYTHON`), and skipped with a message saying how to build it when missing.
//! It is compiled here with Cranelift into a fresh cache (tens of seconds: ~19 MB of
//! CPython), as the Rust plugin is.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use wasmop_core::cluster::Cluster;
use wasmop_runtime::{Call, LoadOptions, Outcome, Plugin, Request, Runtime, RuntimeConfig};

use super::{native_reconcile, stats, us};

/// Where the Python component is read from.
fn component() -> PathBuf {
    std::env::var_os("WASMOP_BENCH_PYTHON").map_or_else(
        || {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../target/python-plugins/database-config.wasm")
        },
        PathBuf::from,
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

/// Loads the Python plugin (compiled by Cranelift into the cache of `config`) and
/// measures `calls` reconciles of each of the three, interleaved, after a tenth as many
/// warm-up calls.
pub async fn run(config: RuntimeConfig, rust: Rust<'_>, calls: usize) -> anyhow::Result<()> {
    let path = component();
    if !path.is_file() {
        println!(
            "  python:            skipped: {} is not built (build it with \
             `guest-sdk/python/build plugins/python/database-config -o {}`, or run \
             `cargo test -p wasmop-python-plugins` or `bench/run --only 8`)",
            path.display(),
            path.display()
        );
        return Ok(());
    }
    let bytes = std::fs::read(&path)?;
    let runtime = Runtime::new(config)?;
    let started = Instant::now();
    let python = runtime.load(bytes.clone(), LoadOptions::default()).await?;
    let load = started.elapsed();
    let name = rust.plugin.info().name.clone();
    let call = |plugin| reconcile(plugin, &rust.cluster, rust.text_request);
    let first = call(&python).await;
    anyhow::ensure!(
        first == Outcome::Action(wasmop_runtime::Action::Done),
        "the Python database-config failed: {first}"
    );
    let warmup = calls / 10;
    let (mut py, mut rs, mut native) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..(warmup + calls) {
        let t = Instant::now();
        let outcome = call(&python).await;
        let p = t.elapsed();
        anyhow::ensure!(outcome.is_success(), "python: {outcome}");
        let t = Instant::now();
        let outcome = call(rust.plugin).await;
        let r = t.elapsed();
        anyhow::ensure!(outcome.is_success(), "rust: {outcome}");
        let t = Instant::now();
        native_reconcile(rust.cluster.as_ref(), &name, rust.value_request).await?;
        let n = t.elapsed();
        if i >= warmup {
            py.push(p);
            rs.push(r);
            native.push(n);
        }
    }
    let (p, r, n) = (stats(py), stats(rs), stats(native));
    println!(
        "python database-config: {calls} calls each after {warmup} warm-up calls, interleaved with the Rust plugin and the native twin"
    );
    println!(
        "  python component:  {} bytes ({})",
        bytes.len(),
        path.display()
    );
    println!(
        "  python compile:    {:.1} ms Cranelift (load incl. describe: {:.1} ms)",
        python.load_stats().compile_time.as_secs_f64() * 1e3,
        load.as_secs_f64() * 1e3
    );
    line("python reconcile:", &p);
    line("rust reconcile:", &r);
    line("native reconcile:", &n);
    println!(
        "  python ratio:      {:.2}x the Rust plugin, {:.2}x native (medians)",
        us(p.median) / us(r.median),
        us(p.median) / us(n.median)
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

fn line(label: &str, s: &super::Stats) {
    println!(
        "  {label:<18} median {:9.2} µs   p99 {:9.2} µs",
        us(s.median),
        us(s.p99)
    );
}
