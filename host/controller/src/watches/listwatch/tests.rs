//! Tests of list pages and watch events read item by item.

use std::sync::{Arc, Mutex};

use super::*;
use crate::events::{EventSink, Record};
use crate::metrics::Metrics;

fn types() -> TypeMeta {
    TypeMeta {
        api_version: "wasmop.test/v1".into(),
        kind: "Target".into(),
    }
}

/// `{"x":{"x":…1…}}`, `depth` objects deep.
fn nested(depth: usize) -> String {
    let mut text = "{\"x\":".repeat(depth);
    text.push('1');
    text.push_str(&"}".repeat(depth));
    text
}

fn item(name: &str, rv: &str, spec: &str) -> String {
    format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns","uid":"u-{name}","resourceVersion":"{rv}"}},"spec":{spec}}}"#
    )
}

/// An item no decoder takes: its labels nested past any depth the API server allows.
fn undecodable(name: &str, rv: &str) -> String {
    format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns","uid":"u-{name}","resourceVersion":"{rv}","labels":{}}},"spec":{{"secret":"do-not-log-me"}}}}"#,
        nested(300)
    )
}

/// A reporter whose Events are kept in a list instead of written.
fn reporter() -> (Skipped, Metrics, Arc<Mutex<Vec<Record>>>) {
    let metrics = Metrics::new();
    let written = Arc::new(Mutex::new(Vec::new()));
    let log = written.clone();
    let sink = EventSink::with_writer(metrics.clone(), move |_plugin, record: Record, _series| {
        log.lock().expect("log").push(record);
        async { Ok(()) }
    });
    let skipped = Skipped::new(metrics.clone(), Some(Arc::new(sink)));
    (skipped, metrics, written)
}

fn names(objects: &[CachedObject]) -> Vec<String> {
    objects.iter().map(|o| o.name().into_owned()).collect()
}

async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn a_page_keeps_every_item_that_decodes_and_reports_the_one_that_does_not_once() {
    let (skipped, metrics, written) = reporter();
    let text = format!(
        r#"{{"kind":"TargetList","apiVersion":"wasmop.test/v1","metadata":{{"resourceVersion":"99","continue":"next"}},"items":[{},{},{},{}]}}"#,
        item("first", "1", "{}"),
        undecodable("bad", "2"),
        item("deep", "3", &format!(r#"{{"deep":{}}}"#, nested(10_000))),
        item("last", "4", r#"{"size":1}"#),
    );
    let page = page(&text, &types(), Some(&skipped)).expect("page");
    assert_eq!(names(&page.objects), ["first", "deep", "last"]);
    assert_eq!(page.resource_version.as_deref(), Some("99"));
    assert_eq!(page.continue_token.as_deref(), Some("next"));
    // The same page again (a relist): counted again, reported once.
    let again = super::page(&text, &types(), Some(&skipped)).expect("page");
    assert_eq!(again.objects.len(), 3);
    settle().await;
    let rendered = metrics.render();
    assert!(
        rendered.contains(r#"wasmop_watch_objects_skipped_total{kind="wasmop.test/v1/Target"} 2"#),
        "{rendered}"
    );
    let written = written.lock().expect("log");
    assert_eq!(written.len(), 1, "one Event per object version");
    let event = &written[0];
    assert_eq!(event.regarding.name.as_deref(), Some("bad"));
    assert_eq!(event.regarding.namespace.as_deref(), Some("ns"));
    assert_eq!(event.regarding.uid.as_deref(), Some("u-bad"));
    assert_eq!(event.regarding.kind.as_deref(), Some("Target"));
    assert_eq!(event.event_type, wasmop_core::cluster::EventType::Warning);
    assert!(event.note.contains("recursion limit"), "{}", event.note);
    assert!(!event.note.contains("do-not-log-me"), "{}", event.note);
}

#[tokio::test]
async fn a_new_version_of_a_skipped_object_is_reported_again() {
    let (skipped, _, written) = reporter();
    let error = CachedObject::decode(&undecodable("bad", "2"), &types()).expect_err("bad");
    assert!(skipped.report(&types(), &undecodable("bad", "2"), &error));
    assert!(!skipped.report(&types(), &undecodable("bad", "2"), &error));
    assert!(skipped.report(&types(), &undecodable("bad", "3"), &error));
    settle().await;
    assert_eq!(written.lock().expect("log").len(), 2);
}

#[tokio::test]
async fn watch_events_are_read_one_by_one_and_a_bad_one_is_skipped() {
    let (skipped, metrics, _) = reporter();
    let mut rv = "1".to_owned();
    let line = |kind: &str, object: &str| format!(r#"{{"type":"{kind}","object":{object}}}"#);
    let deep = item("deep", "5", &format!(r#"{{"deep":{}}}"#, nested(10_000)));
    let Some(Event::Apply(obj)) =
        event(line("ADDED", &deep).as_str(), &mut rv, &types(), &skipped).expect("read")
    else {
        panic!("an apply");
    };
    assert_eq!(obj.name(), "deep");
    assert_eq!(rv, "5");
    // Skipped, but its resourceVersion is passed: a resumed watch does not see it again.
    let bad = event(
        line("MODIFIED", &undecodable("bad", "6")).as_str(),
        &mut rv,
        &types(),
        &skipped,
    )
    .expect("read");
    assert!(bad.is_none());
    assert_eq!(rv, "6");
    // Its deletion still removes it from the cache, by its key.
    let Some(Event::Delete(gone)) = event(
        line("DELETED", &undecodable("bad", "7")).as_str(),
        &mut rv,
        &types(),
        &skipped,
    )
    .expect("read") else {
        panic!("a delete");
    };
    assert_eq!(gone.namespace().as_deref(), Some("ns"));
    assert_eq!(gone.name(), "bad");
    let bookmark = line(
        "BOOKMARK",
        r#"{"kind":"Target","apiVersion":"wasmop.test/v1","metadata":{"resourceVersion":"12"}}"#,
    );
    assert!(
        event(bookmark.as_str(), &mut rv, &types(), &skipped)
            .expect("read")
            .is_none()
    );
    assert_eq!(rv, "12");
    let gone = line(
        "ERROR",
        r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 1 (12)","reason":"Expired","code":410}"#,
    );
    let error = event(gone.as_str(), &mut rv, &types(), &skipped).expect_err("gone");
    assert!(error.is_gone(), "{error}");
    let malformed = event("{\"type\":\"ADDED\"", &mut rv, &types(), &skipped).expect_err("bad");
    assert!(!malformed.is_gone());
    assert!(
        metrics
            .render()
            .contains(r#"wasmop_watch_objects_skipped_total{kind="wasmop.test/v1/Target"} 2"#)
    );
}

/// A fake API server answering the loop's requests in turn from `replies` (the body of each),
/// recording each request's path and query.
fn fake_client(replies: Vec<String>) -> (Client, Arc<Mutex<Vec<String>>>) {
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    let replies = Arc::new(Mutex::new(std::collections::VecDeque::from(replies)));
    let service = tower::service_fn(move |req: hyper::Request<kube::client::Body>| {
        let uri = req.uri().to_string();
        seen.lock().expect("requests").push(uri);
        let body = replies.lock().expect("replies").pop_front();
        async move {
            // Out of replies: a watch that never sends anything.
            let Some(body) = body else {
                std::future::pending::<()>().await;
                unreachable!()
            };
            Ok::<_, std::convert::Infallible>(hyper::Response::new(http_body_util::Full::new(
                bytes::Bytes::from(body),
            )))
        }
    });
    (Client::new(service, "default"), requests)
}

fn label(event: &Event<CachedObject>) -> String {
    match event {
        Event::Init => "Init".into(),
        Event::InitApply(o) => format!("InitApply {}", o.name()),
        Event::InitDone => "InitDone".into(),
        Event::Apply(o) => format!("Apply {}", o.name()),
        Event::Delete(o) => format!("Delete {}", o.name()),
    }
}

#[tokio::test(start_paused = true)]
async fn the_loop_pages_skips_a_bad_item_still_completes_the_list_and_relists_on_gone() {
    let page = |items: &[String], rv: &str, cont: &str| {
        format!(
            r#"{{"kind":"TargetList","apiVersion":"wasmop.test/v1","metadata":{{"resourceVersion":"{rv}","continue":"{cont}"}},"items":[{}]}}"#,
            items.join(",")
        )
    };
    let deep = item("deep", "11", &format!(r#"{{"deep":{}}}"#, nested(10_000)));
    let replies = vec![
        page(&[item("a", "1", "{}"), undecodable("bad", "2")], "", "c1"),
        page(&[item("b", "3", "{}")], "10", ""),
        format!(
            "{{\"type\":\"ADDED\",\"object\":{deep}}}\n{{\"type\":\"ERROR\",\"object\":{{\"kind\":\"Status\",\"code\":410,\"message\":\"too old\"}}}}\n"
        ),
        page(&[item("a", "1", "{}")], "20", ""),
    ];
    let (client, requests) = fake_client(replies);
    let (skipped, metrics, _) = reporter();
    let list_watch = ListWatch::new(
        client,
        "/apis/wasmop.test/v1/namespaces/ns/targets".into(),
        types(),
        ("wasmop.test/v1/targets".into(), "ns".into()),
        Arc::new(skipped),
    );
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let task = tokio::spawn(list_watch.run(move |event| {
        let _ = tx.send(label(&event));
    }));
    let mut seen = Vec::new();
    while seen.len() < 8 {
        seen.push(rx.recv().await.expect("the loop runs"));
    }
    task.abort();
    assert_eq!(
        seen,
        [
            "Init",
            "InitApply a",
            "InitApply b",
            // The bad item is skipped; the list still completes (readiness).
            "InitDone",
            "Apply deep",
            // 410 Gone: listed again.
            "Init",
            "InitApply a",
            "InitDone",
        ]
    );
    let requests = requests.lock().expect("requests").clone();
    // The first list: any state the API server's cache holds, paged for a server without one.
    assert!(
        requests[0].contains("limit=500") && requests[0].contains("resourceVersion=0"),
        "{requests:?}"
    );
    // Its next page: the continue token alone (it carries the resourceVersion).
    assert!(
        requests[1].contains("continue=c1") && !requests[1].contains("resourceVersion"),
        "{requests:?}"
    );
    assert!(
        requests[2].contains("watch=true")
            && requests[2].contains("resourceVersion=10")
            && requests[2].contains("allowWatchBookmarks=true")
            && requests[2].contains("timeoutSeconds=290"),
        "{requests:?}"
    );
    // The relist after 410 Gone: the most recent state (a consistent read), never an older one
    // than the cache has seen.
    assert!(
        !requests[3].contains("watch=true")
            && requests[3].contains("limit=500")
            && !requests[3].contains("resourceVersion"),
        "a relist: {requests:?}"
    );
    assert!(
        metrics
            .render()
            .contains(r#"wasmop_watch_objects_skipped_total{kind="wasmop.test/v1/Target"} 1"#)
    );
}
