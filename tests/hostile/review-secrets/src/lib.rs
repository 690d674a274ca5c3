//! Test plugin `review-secrets`: reconciles ConfigMaps (doing nothing) and registers a
//! validating webhook on Secrets. A review hands the plugin the whole object, so reviewing
//! Secrets would read their data: the host refuses this plugin unless the operator grants it
//! `get` on Secrets (the end-to-end suite's `admission` module).

use wasmop_guest::admission::{Admission, Allowed, Denied, Operation, Review, Webhook, Webhooks};
use wasmop_guest::k8s_openapi::api::core::v1::{ConfigMap, Secret};
use wasmop_guest::{Action, Context, Info, ReconcileError, Reconciler};

struct Plain;

impl Reconciler for Plain {
    type Object = ConfigMap;

    fn describe() -> Info {
        Info::new("review-secrets", "0.1.0")
    }

    fn reconcile(_cm: ConfigMap, _ctx: &Context) -> Result<Action, ReconcileError> {
        Ok(Action::Done)
    }
}

struct Peek;

impl Admission for Peek {
    type Object = Secret;

    fn webhooks() -> Webhooks {
        Webhooks::new().validating(Webhook::new([Operation::Create, Operation::Update]))
    }

    fn validate(_review: Review<Secret>, _ctx: &Context) -> Result<Allowed, Denied> {
        Ok(Allowed::new())
    }
}

wasmop_guest::export!(Plain, admission = Peek);
