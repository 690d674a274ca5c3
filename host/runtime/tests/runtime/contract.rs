//! Contract versions: components built against the frozen 0.1 and 0.2 contracts load and run
//! unchanged beside a 0.3 one on the same runtime, and see their own version's answers
//! (`conflict` where 0.2 says `already-exists`); the loader names the version each was built
//! against.

use serde_json::json;
use wasmop_core::cluster::{GroupVersionKind, ObjectRef};
use wasmop_offline::memory::Write;
use wasmop_runtime::{Action, Call, Outcome};

use crate::support::{healthy_call, load, request, runtime, seeded, target};

fn copy_ref(name: &str) -> ObjectRef {
    ObjectRef::new(
        GroupVersionKind::gvk("", "v1", "ConfigMap"),
        Some("default".into()),
        format!("{name}-v01"),
    )
}

#[tokio::test]
async fn a_0_1_component_runs_unchanged_beside_a_0_3_one() {
    let _shared = crate::support::shared().await;
    let rt = runtime();
    let old = load(&rt, "contract-0-1").await;
    let new = load(&rt, "well-behaved").await;
    assert_eq!(old.contract().to_string(), "0.1.0");
    assert_eq!(new.contract().to_string(), "0.3.0");

    // Side by side on one runtime, interleaved.
    healthy_call(&new, "n1", "a").await;
    let object = target("t", "v");
    let cluster = seeded(vec![object.clone()]);
    let first = old
        .call(cluster.clone(), Call::reconcile(request(object.clone())))
        .await
        .outcome;
    assert_eq!(first, Outcome::Action(Action::Done), "{first}");
    healthy_call(&new, "n2", "b").await;
    let stored = || {
        cluster
            .object(&ObjectRef::of(&object).expect("ref"))
            .expect("target")
    };
    assert_eq!(
        stored()["status"],
        json!({"contract": "0.1", "create": "created", "mirrored": "v"})
    );
    let copy = cluster
        .object(&copy_ref("t"))
        .expect("created by the 0.1 create");
    assert_eq!(copy["data"]["value"], "v");

    // The ConfigMap exists now: the host's `already-exists` reaches a 0.1 plugin as 0.1's
    // `conflict`.
    let second = old
        .call(cluster.clone(), Call::reconcile(request(object.clone())))
        .await
        .outcome;
    assert_eq!(second, Outcome::Action(Action::Done), "{second}");
    assert_eq!(stored()["status"]["create"], "conflict");
    let writes = cluster.writes();
    assert!(
        writes.iter().any(
            |w| matches!(w, Write::Create { error: Some(e), .. } if e.starts_with("already exists"))
        ),
        "{writes:?}"
    );

    // A 0.1 delete: background propagation, no preconditions.
    let cleanup = old
        .call(cluster.clone(), Call::cleanup(request(object)))
        .await
        .outcome;
    assert_eq!(cleanup, Outcome::Action(Action::Done), "{cleanup}");
    assert!(cluster.object(&copy_ref("t")).is_none());
    let Some(Write::Delete { options, .. }) = cluster.writes().last().cloned() else {
        panic!("the cleanup deleted");
    };
    assert_eq!(options.propagation_policy.as_deref(), Some("Background"));
    assert_eq!((options.uid, options.resource_version), (None, None));
}

#[tokio::test]
async fn what_0_2_adds_reaches_the_plugin_typed() {
    let _shared = crate::support::shared().await;
    let rt = runtime();
    let plugin = load(&rt, "contract-0-2").await;
    assert_eq!(plugin.contract().to_string(), "0.2.0");
    let object = target("t", "v");
    let cm = |name: &str, owner: Option<&str>| {
        let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": name, "namespace": "default"}});
        if let Some(uid) = owner {
            cm["metadata"]["ownerReferences"] = json!([{"apiVersion": "wasmop.test/v1", "kind": "Target", "name": "t", "uid": uid}]);
        }
        cm
    };
    // The target last: the in-memory cluster numbers resourceVersions from 1 as it seeds,
    // and the plugin's deliberately stale guard is "1".
    let cluster = seeded(vec![
        cm("t-extra", Some("uid-t")),
        cm("t-gone", None),
        cm("someone-elses", Some("uid-other")),
        object.clone(),
    ]);
    for round in ["created", "already-exists"] {
        let outcome = plugin
            .call(cluster.clone(), Call::reconcile(request(object.clone())))
            .await
            .outcome;
        assert_eq!(outcome, Outcome::Action(Action::Done), "{outcome}");
        let status = cluster
            .object(&ObjectRef::of(&object).expect("ref"))
            .expect("target")["status"]
            .clone();
        assert_eq!(
            status,
            json!({"contract": "0.2", "create": round, "owned": "t-extra,t-v02",
                   "stale": "conflict", "precondition": "conflict"}),
            "round {round}"
        );
    }
    let gone = ObjectRef::new(
        GroupVersionKind::gvk("", "v1", "ConfigMap"),
        Some("default".into()),
        "t-gone",
    );
    assert!(
        cluster.object(&gone).is_some(),
        "a failed precondition deletes nothing"
    );
}
