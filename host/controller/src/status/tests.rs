//! The status: readiness, leadership, errors, refusals, and what the table shows.

use super::*;

#[test]
fn ready_only_after_plugins_are_loaded_and_every_cache_synced() {
    let s = Status::new(Leadership::Disabled);
    assert!(!s.ready());
    s.loaded("a", "1.0.0", "sha256:aaaa");
    s.loaded("b", "1.0.0", "sha256:bbbb");
    s.plugins_loaded();
    assert!(!s.ready(), "plugins not started yet");
    s.record("a", State::Syncing, None);
    s.record("b", State::WaitingForKinds, None);
    assert!(!s.ready(), "a is syncing");
    s.record("a", State::Running, None);
    assert!(s.ready(), "a waiting CRD does not hold readiness up");
}

#[test]
fn last_error_and_counts_are_kept_per_plugin() {
    let s = Status::new(Leadership::Disabled);
    s.loaded("a", "1.0.0", "sha256:aaaa");
    s.reconciled("a", None);
    s.reconciled("a", Some("the plugin trapped: boom".into()));
    s.reconciled("unknown", None);
    let snap = s.snapshot();
    let a = &snap.plugins["a"];
    assert_eq!((a.reconciles, a.errors), (1, 1));
    assert_eq!(a.last_error.as_deref(), Some("the plugin trapped: boom"));
    assert!(a.last_error_at.is_some());
    assert_eq!(snap.plugins.len(), 1);
}

#[test]
fn a_huge_error_is_capped() {
    let s = Status::new(Leadership::Disabled);
    s.loaded("a", "1", "d");
    s.record("a", State::Failed, Some("é".repeat(5000)));
    let e = s.snapshot().plugins["a"].last_error.clone().expect("error");
    assert!(e.len() <= MAX_ERROR_LEN + '…'.len_utf8());
}

#[test]
fn losing_leadership_turns_running_plugins_to_standby_and_back() {
    let s = Status::new(Leadership::Standby);
    s.loaded("a", "1", "d");
    s.record("a", State::Running, None);
    s.set_leadership(Leadership::Standby);
    assert_eq!(s.snapshot().plugins["a"].state, State::Standby);
    s.set_leadership(Leadership::Leader);
    assert_eq!(s.snapshot().plugins["a"].state, State::Running);
}

#[test]
fn the_rendered_table_shows_every_plugin_and_its_last_error() {
    let s = Status::new(Leadership::Leader);
    s.loaded("database-config", "0.1.0", "sha256:1234");
    s.plugins_loaded();
    s.record("database-config", State::Running, Some("denied".into()));
    let text = render(&s.snapshot());
    assert!(text.starts_with("host: ready (leader)\n"), "{text}");
    assert!(text.contains("PLUGIN           VERSION  DIGEST"), "{text}");
    assert!(
        text.contains("database-config  0.1.0    sha256:1234  running"),
        "{text}"
    );
    assert!(text.contains("last error of database-config ("), "{text}");
    let json = serde_json::to_string(&s.snapshot()).expect("json");
    let back: Snapshot = serde_json::from_str(&json).expect("parse");
    assert_eq!(back, s.snapshot());
}

#[test]
fn the_table_shows_no_raw_control_character_from_a_plugin() {
    let s = Status::new(Leadership::Leader);
    s.loaded(
        "a",
        "1\nb  9.9  sha256:forged  running\u{1b}[2J",
        "sha256:1234",
    );
    s.record(
        "a",
        State::Failed,
        Some("boom\r\nlast error of b: \u{202e}x".into()),
    );
    let text = render(&s.snapshot());
    assert_eq!(text.lines().count(), 4, "{text}");
    assert!(
        !text
            .chars()
            .any(|c| (c.is_control() && c != '\n') || c == '\u{202e}'),
        "{text}"
    );
}

#[test]
fn a_refused_component_is_listed_until_it_runs_or_leaves() {
    let s = Status::new(Leadership::Disabled);
    s.refused("big.wasm in directory /p", "too big\n\u{1b}[2J".into());
    let snapshot = s.snapshot();
    assert_eq!(
        snapshot.refused["big.wasm in directory /p"].error,
        "too big\n\u{1b}[2J"
    );
    let text = render(&snapshot);
    assert!(
        text.contains("no plugins\nrefused big.wasm in directory /p ("),
        "{text}"
    );
    assert_eq!(
        text.lines().count(),
        3,
        "one line per refusal, escaped: {text}"
    );
    // The JSON of a host without refusals stays as it was; an older snapshot still reads.
    s.not_refused("big.wasm in directory /p");
    let json = serde_json::to_string(&s.snapshot()).expect("json");
    assert!(!json.contains("refused"), "{json}");
    let old: Snapshot =
        serde_json::from_str(r#"{"ready":true,"leadership":"disabled","plugins":{}}"#)
            .expect("a snapshot without `refused`");
    assert!(old.refused.is_empty());

    // Bounded: a source full of bad files cannot grow `/status` without end.
    for n in 0..MAX_REFUSED + 10 {
        s.refused(
            &format!("{n}.wasm in directory /p"),
            "x".repeat(MAX_ERROR_LEN * 2),
        );
    }
    let snapshot = s.snapshot();
    assert_eq!(snapshot.refused.len(), MAX_REFUSED);
    assert!(
        snapshot
            .refused
            .values()
            .all(|r| r.error.len() <= MAX_ERROR_LEN + 3)
    );
    // One already listed is still updated.
    s.refused("0.wasm in directory /p", "again".into());
    assert_eq!(
        s.snapshot().refused["0.wasm in directory /p"].error,
        "again"
    );
}
