//! Compile-cost benchmark (prints figures; not a test):
//!
//! ```text
//! cargo bench -p wasmop-runtime --bench compile
//! ```
//!
//! Where the time of a cold plugin load goes, per guest: compiling the component (wasmtime,
//! Cranelift) under the host's engine settings and under the alternatives considered for the
//! cold-reload goal (among them Winch, the baseline compiler, also through a whole
//! `Runtime::load` on a Winch runtime), serializing the artefact (what the cache writes), loading it back, and
//! the rest of a load (`Runtime::load`: checks, `InstancePre`, `describe`). Each figure is the
//! median of `WASMOP_BENCH_ROUNDS` rounds (default 5).

#![allow(clippy::unwrap_used, missing_docs)]

use std::time::{Duration, Instant};

use wasmop_runtime::{Compiler, LoadOptions, Runtime, RuntimeConfig};
use wasmtime::component::Component;
use wasmtime::{Config, Engine, OptLevel, Strategy};

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e3
}

fn engine(strategy: Strategy, opt: OptLevel, parallel: bool) -> Engine {
    let mut c = Config::new();
    c.strategy(strategy)
        .wasm_component_model(true)
        .epoch_interruption(true)
        .concurrency_support(false)
        .cranelift_opt_level(opt)
        .parallel_compilation(parallel);
    Engine::new(&c).unwrap()
}

/// The benchmark.
///
/// Long on purpose: a benchmark's procedure is one linear script of set-up, measurements and
/// the lines it prints, in the order they are printed; split into pieces it would have to pass
/// its handful of shared locals (runtime, cluster, samples) around and be read out of order.
fn main() {
    let rounds: usize = std::env::var("WASMOP_BENCH_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5);
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let runtime = tokio
        .block_on(async { Runtime::new(RuntimeConfig::default().concurrency(4)) })
        .unwrap();
    // The host's engine, allocator and load path with Winch as the compiler.
    let winch_runtime = tokio
        .block_on(async {
            Runtime::new(
                RuntimeConfig::default()
                    .concurrency(4)
                    .compiler(Compiler::Winch),
            )
        })
        .unwrap();
    let variants = [
        (
            "speed, parallel (host)",
            Strategy::Cranelift,
            OptLevel::Speed,
            true,
        ),
        (
            "speed, one thread",
            Strategy::Cranelift,
            OptLevel::Speed,
            false,
        ),
        ("none, parallel", Strategy::Cranelift, OptLevel::None, true),
        ("winch, parallel", Strategy::Winch, OptLevel::Speed, true),
        ("winch, one thread", Strategy::Winch, OptLevel::Speed, false),
    ];
    println!("cold load cost, median of {rounds} rounds");
    for guest in [
        "reload-v1",
        "reload-sdk",
        "configmap-mirror",
        "database-config",
    ] {
        let bytes = std::fs::read(wasmop_test_guests::component(guest)).unwrap();
        println!("{guest} ({} KB)", bytes.len() / 1000);
        for (label, strategy, opt, parallel) in variants {
            let engine = engine(strategy, opt, parallel);
            let times = (0..rounds)
                .map(|_| {
                    let t = Instant::now();
                    let _ = Component::new(&engine, &bytes).unwrap();
                    t.elapsed()
                })
                .collect();
            println!("  compile, {label:<26} {:>8.1} ms", median(times));
        }
        let engine = engine(Strategy::Cranelift, OptLevel::Speed, true);
        let component = Component::new(&engine, &bytes).unwrap();
        let mut size = 0;
        let times = (0..rounds)
            .map(|_| {
                let t = Instant::now();
                size = component.serialize().unwrap().len();
                t.elapsed()
            })
            .collect();
        println!(
            "  serialize ({} KB)               {:>8.1} ms",
            size / 1000,
            median(times)
        );
        // Full loads through the runtime (compile + checks + InstancePre + describe), less the
        // compile time it reports: what a load costs besides compiling.
        let mut rest = Vec::new();
        let mut whole = Vec::new();
        for _ in 0..rounds {
            let t = Instant::now();
            let plugin = tokio
                .block_on(runtime.load(bytes.clone(), LoadOptions::default()))
                .unwrap();
            let all = t.elapsed();
            whole.push(all);
            rest.push(all.saturating_sub(plugin.load_stats().compile_time));
        }
        println!(
            "  Runtime::load, whole                {:>8.1} ms",
            median(whole)
        );
        println!(
            "  Runtime::load, besides compiling    {:>8.1} ms",
            median(rest)
        );
        let times = (0..rounds)
            .map(|_| {
                let t = Instant::now();
                let plugin = tokio
                    .block_on(winch_runtime.load(bytes.clone(), LoadOptions::default()))
                    .unwrap();
                assert!(!plugin.load_stats().from_cache);
                t.elapsed()
            })
            .collect();
        println!(
            "  Runtime::load on Winch, whole       {:>8.1} ms",
            median(times)
        );
    }
}
