//! Every hostile plugin ends in its typed outcome while a healthy plugin keeps working, on
//! Cranelift and on Winch code; the helpers here start and check them for the tiering and
//! demotion tests too.

use tokio::task::JoinHandle;

use wasmop_runtime::{
    AllocatorChoice, Budget, Call, CallReport, Compiler, LimitKind, Limits, Outcome,
    PluginErrorKind, Runtime, RuntimeConfig,
};

use crate::support::{
    database_config_call, healthy_call, load, request, runtime, seeded, target, test_limits,
};

pub(crate) fn expect_outcome(name: &str, outcome: &Outcome) {
    let text = outcome.to_string();
    let ok = match name {
        "infinite-loop" => {
            matches!(outcome, Outcome::Timeout(Budget::WallClock(_)))
                && text.contains("did not finish within its deadline of 3000 ms")
        }
        "memory-bomb" => {
            matches!(outcome, Outcome::OutOfMemory { limit } if *limit == 64 << 20)
                && text.contains("ran out of memory")
                && text.contains("64 MiB")
        }
        "unbounded-recursion" => {
            matches!(outcome, Outcome::Trap { .. }) && text.contains("wasm stack overflow")
        }
        "panic" => {
            matches!(outcome, Outcome::Trap { backtrace, .. } if !backtrace.is_empty())
                && text.contains("hostile plugin panicked on purpose")
        }
        "log-flood" => {
            matches!(outcome, Outcome::LimitExceeded(LimitKind::HostBytes(_)))
                && text.contains("passed more than 16 MiB to the host")
        }
        "host-call-flood" => {
            matches!(outcome, Outcome::LimitExceeded(LimitKind::HostCalls(1000)))
                && text.contains("more than 1000 host calls")
        }
        "invalid-json" => {
            matches!(
                outcome,
                Outcome::PluginError {
                    kind: PluginErrorKind::Permanent,
                    ..
                }
            ) && text.contains("not valid JSON")
        }
        "oversized-output" => matches!(outcome, Outcome::LimitExceeded(LimitKind::HostBytes(_))),
        "undeclared-kind" => {
            matches!(outcome, Outcome::Denied(_))
                && text.contains("get on core/Secret in namespace `default` is not granted")
        }
        other => panic!("no expectation for {other}"),
    };
    assert!(
        ok,
        "{name} ended in an unexpected outcome: {outcome:?} ({text})"
    );
}

pub(crate) const HOSTILE: [&str; 9] = [
    "infinite-loop",
    "memory-bomb",
    "unbounded-recursion",
    "panic",
    "log-flood",
    "host-call-flood",
    "invalid-json",
    "oversized-output",
    "undeclared-kind",
];

/// Loads every hostile guest on `rt` and starts one reconcile of each, all at once.
pub(crate) async fn start_hostile(rt: &Runtime) -> Vec<(&'static str, JoinHandle<CallReport>)> {
    let mut hostile = Vec::new();
    for name in HOSTILE {
        let plugin = load(rt, name).await;
        let object = target("victim", "1");
        let cluster = seeded(vec![object.clone()]);
        hostile.push((
            name,
            tokio::spawn(
                async move { plugin.call(cluster, Call::reconcile(request(object))).await },
            ),
        ));
    }
    hostile
}

/// Waits for the reconciles [`start_hostile`] started; each must end in its typed outcome
/// (and on `compiler`'s code, when given).
pub(crate) async fn expect_hostile(
    hostile: Vec<(&'static str, JoinHandle<CallReport>)>,
    compiler: Option<Compiler>,
    context: &str,
) {
    for (name, handle) in hostile {
        let report = handle
            .await
            .unwrap_or_else(|e| panic!("{name}'s task failed ({context}): {e}"));
        if let Some(compiler) = compiler {
            assert_eq!(
                report.compiler(),
                compiler,
                "{name} ran on {compiler:?} code"
            );
        }
        expect_outcome(name, &report.outcome);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_plugins_end_in_their_typed_outcomes_while_a_healthy_plugin_keeps_working() {
    let _shared = crate::support::shared().await;
    let rt = runtime();
    let healthy = load(&rt, "well-behaved").await;
    let example = load(&rt, "database-config").await;
    let hostile = start_hostile(&rt).await;
    // The healthy plugin keeps producing correct results while the hostile ones run.
    let mut healthy_calls = 0u32;
    while hostile.iter().any(|(_, h)| !h.is_finished()) || healthy_calls < 5 {
        healthy_calls += 1;
        healthy_call(
            &healthy,
            &format!("h{healthy_calls}"),
            &healthy_calls.to_string(),
        )
        .await;
    }
    expect_hostile(hostile, None, "beside a healthy plugin").await;
    // And afterwards.
    healthy_call(&healthy, "after", "done").await;
    database_config_call(&example, "after", 5432).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn winch_compiled_plugins_keep_every_guarantee_and_work_alike() {
    let _shared = crate::support::shared().await;
    // With both allocators: pooled memories (Auto, where the machine can reserve the pool)
    // have large reservations and guard pages, on-demand ones small reservations and
    // explicit bounds checks in the code Winch makes.
    for allocator in [AllocatorChoice::Auto, AllocatorChoice::OnDemand] {
        let rt = Runtime::new(
            RuntimeConfig::default()
                .concurrency(16)
                .limits(test_limits())
                .allocator(allocator)
                .compiler(Compiler::Winch),
        )
        .expect("a Winch runtime starts");
        healthy_call(&load(&rt, "well-behaved").await, "w", "1").await;
        database_config_call(&load(&rt, "database-config").await, "w", 5432).await;
        let hostile = start_hostile(&rt).await;
        expect_hostile(hostile, Some(Compiler::Winch), &format!("{allocator:?}")).await;
    }
    let limits = Limits {
        fuel: Some(50_000_000),
        ..test_limits()
    };
    let metered = Runtime::new(
        RuntimeConfig::default()
            .concurrency(2)
            .limits(limits)
            .compiler(Compiler::Winch),
    )
    .expect("a metered Winch runtime starts");
    let object = target("spin", "1");
    let outcome = load(&metered, "infinite-loop")
        .await
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object)),
        )
        .await
        .outcome;
    assert_eq!(
        outcome,
        Outcome::Timeout(Budget::Fuel(50_000_000)),
        "{outcome}"
    );
}
