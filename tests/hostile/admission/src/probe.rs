// The probe itself, shared by `hostile-admission` (version 0.1.0) and
// `hostile-admission-v2` (0.2.0), which differ only in `VERSION` (see their lib.rs).

use wasmop_guest::admission::{
    Admission, Allowed, Denied, FailurePolicy, Mutated, Operation, Review, Webhook, Webhooks,
};
use wasmop_guest::k8s_openapi::api::core::v1::ConfigMap;
use wasmop_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use wasmop_guest::{Action, Context, Event, Info, Permission, ReconcileError, Reconciler, Verb};

struct Probe;

impl Reconciler for Probe {
    type Object = ConfigMap;

    fn describe() -> Info {
        Info::new("admission-probe", VERSION)
            .selector("probe.wasmop.dev/reconcile=true")
            .permission(Permission::new::<ConfigMap>([Verb::Create]))
    }

    fn reconcile(_cm: ConfigMap, _ctx: &Context) -> Result<Action, ReconcileError> {
        Ok(Action::Done)
    }
}

fn what(cm: &ConfigMap, review: &str) -> String {
    let data = cm.data.as_ref();
    if data
        .and_then(|d| d.get("in"))
        .is_some_and(|only| only != review)
    {
        return "admit".to_owned();
    }
    data.and_then(|d| d.get("do").cloned())
        .unwrap_or_else(|| "admit".to_owned())
}

fn data(cm: &ConfigMap, key: &str) -> String {
    cm.data
        .as_ref()
        .and_then(|d| d.get(key).cloned())
        .unwrap_or_default()
}

/// What both exports do for the shared misbehaviours; `None` for the export's own answer.
fn common(cm: &ConfigMap, review: &str, ctx: &Context) -> Option<Result<Allowed, Denied>> {
    Some(match what(cm, review).as_str() {
        "deny" => Err(Denied::invalid(data(cm, "message"))),
        "loop" => {
            let mut n: u64 = 0;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        "bomb" => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1; 1 << 20]);
                std::hint::black_box(&hoard);
            }
        }
        "panic" => panic!("the admission probe panics"),
        "write" => {
            let created = ctx.create(&ConfigMap {
                metadata: ObjectMeta {
                    name: Some("probe-written".into()),
                    namespace: cm.metadata.namespace.clone(),
                    ..Default::default()
                },
                ..Default::default()
            });
            let emitted = ctx.event(cm, Event::normal("Probed", "Review", "written in a review"));
            Ok(Allowed::new()
                .warning(format!(
                    "create: {:?}",
                    created.err().map(|e| e.to_string())
                ))
                .warning(format!("event: {:?}", emitted.err().map(|e| e.to_string()))))
        }
        "read" => {
            let ns = cm.metadata.namespace.as_deref();
            match ctx.get::<ConfigMap>(ns, "probe-source") {
                Ok(Some(source)) => Ok(Allowed::new().warning(data(&source, "value"))),
                Ok(None) => Err(Denied::new("probe-source not found")),
                Err(e) => Err(Denied::new(format!("read failed: {e}"))),
            }
        }
        "bad-code" => Err(Denied::new("bad code").code(200)),
        "bad-reason" => Err(Denied::new("bad reason").reason("not a reason")),
        "warnings" => Ok((0..100).fold(Allowed::new(), |a, i| {
            a.warning(format!("{i}\u{1b}[31m{}", "w".repeat(10_000)))
        })),
        _ => return None,
    })
}

struct ProbeAdmission;

impl Admission for ProbeAdmission {
    type Object = ConfigMap;

    fn webhooks() -> Webhooks {
        let ops = [Operation::Create, Operation::Update];
        Webhooks::new()
            .validating(
                Webhook::new(ops)
                    .object_selector("probe.wasmop.dev/review=true")
                    .failure_policy(FailurePolicy::Fail)
                    .timeout_seconds(5),
            )
            .mutating(
                Webhook::new(ops)
                    .object_selector("probe.wasmop.dev/review=true")
                    .failure_policy(FailurePolicy::Ignore)
                    .timeout_seconds(5),
            )
    }

    fn validate(review: Review<ConfigMap>, ctx: &Context) -> Result<Allowed, Denied> {
        let Some(cm) = review.object else {
            return Ok(Allowed::new());
        };
        common(&cm, "validate", ctx).unwrap_or_else(|| Ok(Allowed::new()))
    }

    fn mutate(review: Review<ConfigMap>, ctx: &Context) -> Result<Mutated<ConfigMap>, Denied> {
        let Some(mut cm) = review.object else {
            return Ok(Mutated::unchanged());
        };
        if what(&cm, "mutate") == "rename" {
            cm.metadata.name = Some("renamed".into());
            return Ok(Mutated::to(cm));
        }
        if let Some(answer) = common(&cm, "mutate", ctx) {
            return answer.map(|allowed| {
                let _ = allowed;
                Mutated::unchanged()
            });
        }
        cm.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("probe.wasmop.dev/mutated".into(), VERSION.into());
        Ok(Mutated::to(cm))
    }
}

wasmop_guest::export!(Probe, admission = ProbeAdmission);
