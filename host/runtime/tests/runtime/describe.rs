//! Runtime tests of `describe` as a boundary (issue 17, class 4 and the describe part of 6):
//! every hostile declaration from `tests/hostile/describe-*` is refused at load with an error
//! naming the field, huge ones without the error carrying them; a `describe` that loops ends
//! at describe's own deadline, and looping describes do not hold up a healthy plugin's load.
//! Outcomes only, never timings.

use std::time::{Duration, UNIX_EPOCH};

use wasmop_runtime::{
    Budget, DeclarationError, LoadError, LoadOptions, Outcome, Runtime, RuntimeConfig,
};

/// The variant a `describe-*` guest plays is its wall clock's seconds modulo its count: a
/// fixed clock at `variant` seconds picks it.
fn runtime(variant: u64, describe_deadline: Duration) -> Runtime {
    runtime_with(variant, describe_deadline, 16)
}

fn runtime_with(variant: u64, describe_deadline: Duration, concurrency: u32) -> Runtime {
    let config = RuntimeConfig {
        fixed_clock: Some(UNIX_EPOCH + Duration::from_secs(variant)),
        ..RuntimeConfig::default()
    };
    Runtime::new(
        config
            .concurrency(concurrency)
            .describe_deadline(describe_deadline),
    )
    .expect("runtime starts")
}

/// Generous: refusing a declaration must not depend on how busy the machine is.
const PATIENT: Duration = Duration::from_secs(60);

async fn refusal(guest: &str, variant: u64) -> (LoadError, String) {
    let rt = runtime(variant, PATIENT);
    match rt
        .load_file(wasmop_test_guests::component(guest), LoadOptions::default())
        .await
    {
        Ok(p) => panic!("{guest} ({variant}) loaded as {}", p.name()),
        Err(e) => {
            let text = chain(&e);
            (e, text)
        }
    }
}

/// The error and its causes, as the host logs them.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn declaration(e: &LoadError) -> &DeclarationError {
    match e {
        LoadError::Declaration(d) => d,
        other => panic!("expected a declaration error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_forged_version_is_refused_naming_the_version_escaped() {
    let _shared = crate::support::shared().await;
    let (e, text) = refusal("describe-forged-version", 0).await;
    assert!(
        matches!(declaration(&e), DeclarationError::Version { .. }),
        "{text}"
    );
    assert!(text.contains("version `1.0.0\""), "{text}");
    assert!(
        !text.chars().any(|c| c.is_control() || c == '\u{202e}'),
        "the error carries no raw control character: {text:?}"
    );
}

#[tokio::test]
async fn a_huge_version_or_name_is_refused_and_not_carried_in_the_error() {
    let _shared = crate::support::shared().await;
    for (variant, field) in [(0, "version `"), (1, "name `")] {
        let (_, text) = refusal("describe-huge", variant).await;
        assert!(text.contains(field), "{variant}: {text}");
        assert!(text.contains("(50331648 bytes)"), "{variant}: {text}");
        assert!(text.len() < 1000, "{variant}: {} bytes", text.len());
    }
}

#[tokio::test]
async fn two_hundred_thousand_duplicates_are_refused_by_the_cap() {
    let _shared = crate::support::shared().await;
    for (variant, field, max) in [(0, "owns", 32), (1, "watches", 32)] {
        let (e, text) = refusal("describe-duplicates", variant).await;
        match declaration(&e) {
            DeclarationError::TooMany {
                field: f,
                count,
                max: m,
            } => assert_eq!((f.as_str(), *count, *m), (field, 200_000, max), "{text}"),
            other => panic!("{variant}: {other}"),
        }
    }
}

#[tokio::test]
async fn every_bad_identifier_is_refused_naming_its_field() {
    let _shared = crate::support::shared().await;
    let attacks = [
        "primary.version `v1/namespaces/kube-system/secrets/token?x=`",
        "owns[1].kind `Secret?watch=true`",
        "watches[0].kind.group `../api/v1`",
        "primary-selector does not parse",
        "finalizer `example.com/cleanup\\u{a}forged log line`",
        "watches[0].mapping.annotation `example.com/a key`",
        "permissions[0].namespaces[0] `../kube-system`",
    ];
    for (variant, expected) in attacks.iter().enumerate() {
        let (e, text) = refusal("describe-bad-kinds", variant as u64).await;
        declaration(&e);
        assert!(text.contains(expected), "{variant}: {text}");
        assert!(!text.contains('\n'), "{variant}: {text:?}");
    }
}

#[tokio::test]
async fn a_looping_describe_ends_at_the_describe_deadline() {
    let _shared = crate::support::shared().await;
    let deadline = Duration::from_millis(300);
    let rt = runtime(0, deadline);
    let loaded = rt
        .load_file(
            wasmop_test_guests::component("describe-loop"),
            LoadOptions::default(),
        )
        .await;
    let Err(err) = loaded else {
        panic!("describe-loop loaded");
    };
    match err {
        LoadError::Describe(Outcome::Timeout(Budget::WallClock(d))) => assert_eq!(d, deadline),
        other => panic!("expected describe's timeout, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn looping_describes_do_not_hold_up_a_healthy_load() {
    let _shared = crate::support::shared().await;
    // Long enough that the loops are still running when the healthy load ends, however slow
    // the machine; they are cancelled at the end rather than waited for.
    // More loops than loads compile at once (one per CPU), and instance slots enough that
    // describes (which take at most half) leave one for the healthy plugin.
    let loops = std::thread::available_parallelism().map_or(1, usize::from) + 2;
    let rt = runtime_with(0, Duration::from_secs(600), 2 * (loops as u32 + 1));
    let looping: Vec<_> = (0..loops)
        .map(|_| {
            let rt = rt.clone();
            tokio::spawn(async move {
                rt.load_file(
                    wasmop_test_guests::component("describe-loop"),
                    LoadOptions::default(),
                )
                .await
                .map(|_| ())
            })
        })
        .collect();
    // A patience bound, not a timing claim: if describes held the compile permits, this load
    // would wait for the loops forever (600 s) instead of failing.
    let healthy = tokio::time::timeout(
        PATIENT,
        rt.load_file(
            wasmop_test_guests::component("well-behaved"),
            LoadOptions::default(),
        ),
    )
    .await
    .expect("the healthy plugin's load is not held up by looping describes")
    .expect("the healthy plugin loads");
    assert_eq!(healthy.name().as_str(), "well-behaved");
    let still_looping = looping.iter().filter(|l| !l.is_finished()).count();
    assert_eq!(
        still_looping, loops,
        "the healthy plugin loaded while every looping describe still ran"
    );
    for l in looping {
        l.abort();
    }
}
