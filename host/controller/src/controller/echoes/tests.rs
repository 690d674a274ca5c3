//! The own-write memory and the recording cluster, alone and over the in-memory cluster.

use super::*;
use crate::watches::CachedObject;
use serde_json::json;
use wasmop_offline::memory::MemoryCluster;

fn config_map(name: &str, rv: &str) -> CachedObject {
    let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}});
    let types = kube::api::TypeMeta {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
    };
    CachedObject::new(serde_json::from_value(obj).expect("object"), &types).expect("cached")
}

fn changed(name: &str, rv: &str) -> Change {
    Change::Applied(config_map(name, rv))
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::new(Some("ns"), name)
}

fn target(name: &str) -> ObjectRef {
    ObjectRef::new(
        GroupVersionKind::gvk("", "v1", "ConfigMap"),
        Some("ns".into()),
        name,
    )
}

fn reply(name: &str, rv: &str) -> String {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}})
    .to_string()
}

fn fresh() -> (OwnWrites, Metrics) {
    let metrics = Metrics::new();
    let writes = OwnWrites::new(metrics.clone(), "p", "example.com", "Database");
    (writes, metrics)
}

fn skipped(metrics: &Metrics) -> String {
    let series = r#"wasmop_own_write_echoes_skipped_total{plugin="p"} "#;
    let text = metrics.render();
    text.lines()
        .find_map(|l| l.strip_prefix(series))
        .unwrap_or("0")
        .to_owned()
}

/// A write by the reconcile of `by` to `name`, replied with version `rv`.
fn wrote(writes: &OwnWrites, name: &str, rv: &str, by: &str) -> bool {
    let flight = writes.take_off(&target(name), &key(by));
    writes.land(&target(name), &flight, Some(&reply(name, rv)))
}

#[test]
fn the_echo_after_the_reply_skips_its_writer_only_and_only_once() {
    let (writes, metrics) = fresh();
    assert!(!wrote(&writes, "cm", "7", "db"));
    let owners = vec![key("db"), key("other")];
    let echo = changed("cm", "7");
    let triggered = writes.triggered("", "ConfigMap", &echo, owners.clone());
    assert_eq!(triggered, vec![key("other")]);
    assert_eq!(skipped(&metrics), "1");
    // Seen once: the same version again (a relist) triggers as any change does.
    let triggered = writes.triggered("", "ConfigMap", &echo, owners.clone());
    assert_eq!(triggered, owners);
    assert_eq!(skipped(&metrics), "1");
}

#[test]
fn the_echo_before_the_reply_is_held_and_dropped_when_the_reply_names_its_version() {
    let (writes, metrics) = fresh();
    let flight = writes.take_off(&target("cm"), &key("db"));
    let owners = vec![key("db"), key("other")];
    let triggered = writes.triggered("", "ConfigMap", &changed("cm", "7"), owners);
    assert_eq!(triggered, vec![key("other")], "held back from its writer");
    assert!(!writes.land(&target("cm"), &flight, Some(&reply("cm", "7"))));
    assert_eq!(skipped(&metrics), "1");
    assert_eq!(writes.len(), 0, "its echo came: nothing left to await");
}

#[test]
fn a_held_change_that_is_not_the_echo_or_held_over_a_failed_write_retriggers() {
    let (writes, metrics) = fresh();
    // Someone else's write came first (version 6), then ours (7).
    let flight = writes.take_off(&target("cm"), &key("db"));
    writes.triggered("", "ConfigMap", &changed("cm", "6"), vec![key("db")]);
    assert!(writes.land(&target("cm"), &flight, Some(&reply("cm", "7"))));
    // Ours still awaits its echo.
    let triggered = writes.triggered("", "ConfigMap", &changed("cm", "7"), vec![key("db")]);
    assert!(triggered.is_empty());
    // A failed write: whatever was held goes to the reconcile.
    let flight = writes.take_off(&target("cm"), &key("db"));
    writes.triggered("", "ConfigMap", &changed("cm", "8"), vec![key("db")]);
    assert!(writes.land(&target("cm"), &flight, None));
    assert_eq!(writes.len(), 0);
    assert_eq!(skipped(&metrics), "1");
}

#[test]
fn past_the_bound_of_held_changes_the_reconcile_runs_again_whatever_the_reply() {
    let (writes, metrics) = fresh();
    let flight = writes.take_off(&target("cm"), &key("db"));
    for v in 0..HELD + 1 {
        let held = writes.triggered(
            "",
            "ConfigMap",
            &changed("cm", &v.to_string()),
            vec![key("db")],
        );
        assert!(held.is_empty(), "held back while the write is in flight");
    }
    // The reply names the first one's version: that one was the echo, the rest were not.
    assert!(writes.land(&target("cm"), &flight, Some(&reply("cm", "0"))));
    assert_eq!(skipped(&metrics), "1");
    // Only more than the bound: all held were the echo's (a relist's repeat), none beyond.
    let flight = writes.take_off(&target("cm"), &key("db"));
    for _ in 0..HELD {
        writes.triggered("", "ConfigMap", &changed("cm", "9"), vec![key("db")]);
    }
    assert!(!writes.land(&target("cm"), &flight, Some(&reply("cm", "9"))));
    let flight = writes.take_off(&target("cm"), &key("db"));
    for _ in 0..=HELD {
        writes.triggered("", "ConfigMap", &changed("cm", "10"), vec![key("db")]);
    }
    assert!(
        writes.land(&target("cm"), &flight, Some(&reply("cm", "10"))),
        "overflowed"
    );
}

#[test]
fn any_other_version_kind_object_or_primary_triggers() {
    let (writes, metrics) = fresh();
    wrote(&writes, "cm", "7", "db");
    let owners = vec![key("other")];
    for (kind, change, owners) in [
        ("ConfigMap", changed("cm", "8"), vec![key("db")]),
        ("ConfigMap", changed("other", "7"), vec![key("db")]),
        ("Secret", changed("cm", "7"), vec![key("db")]),
        ("ConfigMap", changed("cm", "7"), owners),
    ] {
        let triggered = writes.triggered("", kind, &change, owners.clone());
        assert_eq!(triggered, owners, "{kind} {change:?}");
    }
    assert_eq!(writes.len(), 1, "still awaiting its echo");
    assert_eq!(skipped(&metrics), "0");
}

#[test]
fn a_deletion_triggers_and_forgets_the_write() {
    let (writes, _) = fresh();
    wrote(&writes, "cm", "7", "db");
    let gone = Change::Deleted(config_map("cm", "7"));
    let triggered = writes.triggered("", "ConfigMap", &gone, vec![key("db")]);
    assert_eq!(triggered, vec![key("db")]);
    assert_eq!(writes.len(), 0);
}

#[test]
fn a_later_write_replaces_the_earlier_and_the_memory_is_bounded() {
    let (writes, _) = fresh();
    wrote(&writes, "cm", "7", "db");
    wrote(&writes, "cm", "9", "db");
    let stale = changed("cm", "7");
    let triggered = writes.triggered("", "ConfigMap", &stale, vec![key("db")]);
    assert_eq!(
        triggered.len(),
        1,
        "the first write's version is not the last's"
    );
    for i in 0..REMEMBERED + 10 {
        wrote(&writes, &format!("cm-{i}"), "1", "db");
    }
    assert!(writes.len() <= REMEMBERED, "{} remembered", writes.len());
    // A reply without a version is not remembered.
    let (writes, _) = fresh();
    let flight = writes.take_off(&target("cm"), &key("db"));
    writes.land(&target("cm"), &flight, Some("{\"metadata\":{}}"));
    let flight = writes.take_off(&target("cm"), &key("db"));
    writes.land(&target("cm"), &flight, Some("not json"));
    assert_eq!(writes.len(), 0);
}

#[tokio::test]
async fn recording_remembers_writes_with_the_server_version_and_a_dropped_call_lands() {
    let (writes, metrics) = fresh();
    let writes = Arc::new(writes);
    let inner: Arc<dyn Cluster> = Arc::new(MemoryCluster::new());
    let cluster = Recording::new(inner, writes.clone(), key("db"));
    let plugin = PluginName::new("p").expect("name");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "cm", "namespace": "ns"}});
    let created = cluster
        .create(ObjectText::from_value(&cm).expect("object"), &plugin)
        .await
        .expect("created");
    cluster
        .create(ObjectText::from_value(&cm).expect("object"), &plugin)
        .await
        .expect_err("exists");
    assert_eq!(writes.len(), 0, "the failed write forgot the first");
    let applied = cluster
        .apply(ObjectText::from_value(&cm).expect("object"), &plugin)
        .await
        .expect("applied");
    assert_ne!(created, applied);
    let rv = resource_version(&applied).expect("the memory cluster gives versions");
    let triggered = writes.triggered("", "ConfigMap", &changed("cm", &rv), vec![key("db")]);
    assert!(triggered.is_empty());
    assert_eq!(skipped(&metrics), "1");
    assert!(!cluster.retrigger());

    // A write whose call is given up while a change is held: the change goes back.
    let pending = cluster.apply(ObjectText::from_value(&cm).expect("object"), &plugin);
    let mut pending = Box::pin(pending);
    // Not polled: the write is not in flight yet.
    assert_eq!(writes.len(), 0);
    let _ = futures::poll!(pending.as_mut());
    drop(pending);
    assert!(!cluster.retrigger(), "nothing was held");
    // Writes to the primary kind are not remembered.
    let before = writes.len();
    let db = json!({"apiVersion": "example.com/v1", "kind": "Database",
                    "metadata": {"name": "db", "namespace": "ns"}});
    cluster
        .create(ObjectText::from_value(&db).expect("object"), &plugin)
        .await
        .expect("created");
    assert_eq!(writes.len(), before);
    let flight = writes.take_off(&target("cm"), &key("db"));
    writes.triggered("", "ConfigMap", &changed("cm", "x"), vec![key("db")]);
    drop(Landing {
        recording: &cluster,
        target: &target("cm"),
        flight: Some(flight),
    });
    assert!(cluster.retrigger());
}
