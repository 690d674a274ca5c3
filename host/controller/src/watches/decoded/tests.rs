//! Tests of the stack-safe, trimming decoder.

use super::*;
use crate::watches::CachedObject;
use kube::api::TypeMeta;
use serde_json::json;

fn server_object() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "a",
            "namespace": "ns",
            "uid": "u-1",
            "resourceVersion": "42",
            "creationTimestamp": "2026-11-30T07:00:00Z",
            "labels": {"app": "x"},
            "annotations": {LAST_APPLIED: "{}", "keep": "me"},
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:data": {"f:k": {}}}}]
        },
        "data": {"k": "v"}
    })
}

fn fields(watched: &Watched) -> Value {
    serde_json::to_value(&watched.fields).expect("fields")
}

/// `{"x":{"x":…1…}}`, `depth` objects deep.
fn nested(depth: usize) -> String {
    let mut text = "{\"x\":".repeat(depth);
    text.push('1');
    text.push_str(&"}".repeat(depth));
    text
}

/// A Target whose `spec.deep` is nested `depth` objects deep, as the API server sends it.
fn deep_target(depth: usize) -> String {
    format!(
        r#"{{"apiVersion":"wasmop.test/v1","kind":"Target","metadata":{{"name":"deep","namespace":"ns","uid":"u-9","resourceVersion":"7","managedFields":[{{"manager":"m","fieldsV1":{{"f:spec":{{}}}}}}]}},"spec":{{"deep":{},"size":3}},"status":{{"ready":true}}}}"#,
        nested(depth)
    )
}

/// Runs `f` on a thread with a 256 KiB stack: a decoder that recursed once per level would
/// overflow it long before 10,000 levels (and the test process would abort).
fn on_a_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(f)
        .expect("thread")
        .join()
        .expect("no overflow, no panic")
}

#[test]
fn decoding_drops_managed_fields_and_last_applied_and_keeps_the_rest_as_sent() {
    let watched = decode(&server_object().to_string()).expect("decodes");
    let mut expected = server_object();
    let meta = expected["metadata"].as_object_mut().expect("metadata");
    meta.remove("managedFields");
    meta["annotations"]
        .as_object_mut()
        .expect("annotations")
        .remove(LAST_APPLIED);
    assert_eq!(fields(&watched), expected);
    assert_eq!(watched.identity().resource_version.as_deref(), Some("42"));
    assert_eq!(watched.display_name(), "ns/a");
}

#[test]
fn annotations_that_held_only_last_applied_are_dropped() {
    let mut object = server_object();
    object["metadata"]["annotations"] = json!({LAST_APPLIED: "{}"});
    let watched = decode(&object.to_string()).expect("decodes");
    assert!(fields(&watched)["metadata"].get("annotations").is_none());
}

#[test]
fn trimming_a_value_drops_the_same_fields_as_decoding() {
    let mut only_last_applied = server_object();
    only_last_applied["metadata"]["annotations"] = json!({LAST_APPLIED: "{}"});
    let mut no_annotations = server_object();
    no_annotations["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("annotations");
    for object in [server_object(), only_last_applied, no_annotations] {
        let text = object.to_string();
        let mut trimmed = object;
        crate::watches::trim_value(&mut trimmed);
        // Both ways of reading an object trim alike.
        let decoded = decode(&text).expect("decodes");
        assert_eq!(fields(&decoded), trimmed);
        let raw = decode_raw(&text).expect("decodes");
        assert_eq!(fields(&raw), trimmed);
    }
}

#[test]
fn trimming_a_value_keeps_other_annotations_and_drops_an_emptied_map() {
    let mut object = json!({"metadata": {
        "name": "a",
        "managedFields": [{"manager": "kubectl"}],
        "annotations": {LAST_APPLIED: "{}", "keep": "me"}
    }});
    crate::watches::trim_value(&mut object);
    assert_eq!(
        object,
        json!({"metadata": {"name": "a", "annotations": {"keep": "me"}}})
    );
    let mut only_last_applied = json!({"metadata": {"annotations": {LAST_APPLIED: "{}"}}});
    crate::watches::trim_value(&mut only_last_applied);
    assert_eq!(only_last_applied, json!({"metadata": {}}));
    let mut not_an_object = json!([1, 2]);
    crate::watches::trim_value(&mut not_an_object);
    assert_eq!(not_an_object, json!([1, 2]));
}

#[test]
fn something_that_is_not_an_object_is_refused() {
    let error = decode("[1, 2]").expect_err("refused");
    assert!(error.to_string().contains("a Kubernetes object"), "{error}");
}

#[test]
fn an_ordinary_object_is_written_exactly_as_a_value_writes_it() {
    // Keys out of order and an escape the API server writes (`\u003c`): the text is what
    // encoding the object as a `Value` gives, as it was before the decoder read raw fields.
    let text = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","uid":"u"},"data":{"z":"\u003ch1\u003e","a":"1"}}"#;
    let value: Value = serde_json::from_str(text).expect("json");
    let expected = serde_json::to_string(&value).expect("text");
    let types = TypeMeta {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
    };
    assert_eq!(
        CachedObject::decode(text, &types).expect("decodes").text(),
        expected
    );
    // The second way writes an ordinary field just as the first does.
    let raw = decode_raw(text).expect("decodes");
    assert_eq!(serde_json::to_string(&raw.fields).expect("text"), expected);
}

#[test]
fn objects_nested_200_and_10000_deep_decode_on_a_small_stack() {
    for depth in [200, 10_000] {
        let (text, cached) = on_a_small_stack(move || {
            let text = deep_target(depth);
            let types = TypeMeta {
                api_version: "wasmop.test/v1".into(),
                kind: "Target".into(),
            };
            let cached = CachedObject::decode(&text, &types).expect("decodes");
            // Everything the host reads from a cached object works at any depth.
            let meta = cached.meta();
            assert_eq!(meta.uid.as_deref(), Some("u-9"));
            assert_eq!(cached.to_string(), "ns/deep");
            assert!(cached.labels().expect("labels").is_empty());
            (text, cached.text().to_owned())
        });
        // The deep field is kept as sent, the trimmed metadata and the other fields as
        // values.
        assert!(
            cached.contains(&format!(r#""spec":{{"deep":{},"size":3}}"#, nested(depth))),
            "depth {depth}"
        );
        assert!(cached.contains(r#""status":{"ready":true}"#));
        assert!(!cached.contains("managedFields"));
        assert_eq!(
            cached.len(),
            text.len() - r#","managedFields":[{"manager":"m","fieldsV1":{"f:spec":{}}}]"#.len()
        );
    }
}

#[test]
fn a_field_just_within_the_recursion_limit_is_kept_as_a_value() {
    // 100 levels decode on the first way: the text is a `Value`'s.
    let text = format!(r#"{{"metadata":{{"name":"a"}},"spec":{}}}"#, nested(100));
    let watched = decode(&text).expect("decodes");
    assert!(matches!(watched.fields["spec"], Field::Value(_)));
    let deep = decode(&deep_target(200)).expect("decodes");
    assert!(matches!(deep.fields["spec"], Field::Raw(_)));
    assert!(matches!(deep.fields["status"], Field::Value(_)));
}

#[test]
fn an_undecodable_object_is_described_without_its_content_and_its_identity_is_read() {
    let types = TypeMeta {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
    };
    // A wrong type in a field the host reads: serde_json's message would quote the value.
    let secret = "s3cret-content-".repeat(100);
    let text = json!({"metadata": {"name": "bad", "namespace": "ns", "uid": "u-2",
        "resourceVersion": "5", "generation": secret}})
    .to_string();
    let error = CachedObject::decode(&text, &types).expect_err("refused");
    assert!(!error.to_string().contains("s3cret"), "{error}");
    assert!(error.to_string().contains("line 1 column"), "{error}");
    assert!(
        error.to_string().contains("invalid type: string …"),
        "{error}"
    );
    // Metadata nested past any depth the API server allows.
    let deep_labels = format!(
        r#"{{"metadata":{{"name":"deep-labels","uid":"u-3","resourceVersion":"6","labels":{}}}}}"#,
        nested(10_000)
    );
    let (error, identity) = on_a_small_stack(move || {
        (
            CachedObject::decode(&deep_labels, &types).expect_err("refused"),
            Identity::read(&deep_labels),
        )
    });
    assert!(error.to_string().contains("recursion limit"), "{error}");
    let identity = identity.expect("identity");
    assert_eq!(identity.name.as_deref(), Some("deep-labels"));
    assert_eq!(identity.uid.as_deref(), Some("u-3"));
    assert_eq!(identity.resource_version.as_deref(), Some("6"));
    assert_eq!(Identity::read("not json"), None);
}
