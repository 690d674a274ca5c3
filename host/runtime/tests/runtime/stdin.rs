//! A plugin reads no stdin, whatever its component carries; only a runtime with
//! `dev_sources` on (`wasmop dev`) gives a dev build's calls the sources it carries, each call
//! from the start, and compiles the component without them.

use wasmop_core::plugin::Digest;
use wasmop_runtime::{Call, LoadOptions, Runtime, RuntimeConfig};

use crate::support::{request, seeded, target, test_limits};

fn component(sources: &[u8]) -> Vec<u8> {
    let bytes = std::fs::read(wasmop_test_guests::component("stdin-read")).expect("guest built");
    wasmop_test_guests::with_custom_section(&bytes, "wasmop-dev-sources", sources)
}

/// What the guest logged about its stdin in one reconcile.
async fn stdin_of(plugin: &wasmop_runtime::Plugin) -> String {
    let object = target("reader", "1");
    let report = plugin
        .call(
            seeded(vec![object.clone()]),
            Call::reconcile(request(object)).capturing_logs(),
        )
        .await;
    report
        .logs
        .iter()
        .map(|l| l.message.clone())
        .find(|m| m.starts_with("stdin:"))
        .unwrap_or_else(|| panic!("no stdin line: {:?}", report.outcome))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_reads_no_stdin_even_when_its_component_carries_dev_sources() {
    let _shared = crate::support::shared().await;
    let rt = Runtime::new(
        RuntimeConfig::default()
            .concurrency(4)
            .limits(test_limits()),
    )
    .expect("runtime");
    let bytes = component(b"print('hello')");
    let plugin = rt
        .load(bytes.clone(), LoadOptions::default())
        .await
        .expect("loads");
    assert_eq!(plugin.digest(), Digest::of(&bytes));
    assert_eq!(stdin_of(&plugin).await, "stdin: 0 bytes (Ok(0)): ");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_wasmop_dev_each_call_reads_the_sources_and_the_runner_compiles_once() {
    let _shared = crate::support::shared().await;
    let cache = tempfile::tempdir().expect("tempdir");
    let rt = Runtime::new(
        RuntimeConfig::default()
            .concurrency(4)
            .limits(test_limits())
            .cache_dir(cache.path())
            .dev_sources(true),
    )
    .expect("runtime");
    let first = component(b"print('hello')");
    let plugin = rt
        .load(first.clone(), LoadOptions::default())
        .await
        .expect("loads");
    // The version is the whole component, sources included.
    assert_eq!(plugin.digest(), Digest::of(&first));
    assert!(!plugin.load_stats().from_cache);
    for _ in 0..2 {
        assert_eq!(
            stdin_of(&plugin).await,
            "stdin: 14 bytes (Ok(14)): print('hello')"
        );
    }
    // The next edit's sources: a new version, the same compiled runner.
    let second = component(b"print('edited')");
    let edited = rt
        .load(second.clone(), LoadOptions::default())
        .await
        .expect("loads");
    assert_eq!(edited.digest(), Digest::of(&second));
    assert!(edited.load_stats().from_cache, "{:?}", edited.load_stats());
    assert_eq!(
        stdin_of(&edited).await,
        "stdin: 15 bytes (Ok(15)): print('edited')"
    );
    // Sources over the bound are refused, naming them.
    let huge = component(&vec![b'#'; (8 << 20) + 1]);
    let Err(refused) = rt.load(huge, LoadOptions::default()).await else {
        panic!("sources over the bound were loaded");
    };
    assert!(
        refused.to_string().contains("bytes of sources"),
        "{refused}"
    );
}
