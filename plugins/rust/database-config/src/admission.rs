//! The admission half of `database-config`: a mutating webhook that defaults `spec.replicas`
//! and a validating webhook that checks what a Database must be.
//!
//! Both review Databases through [`DatabaseReview`], a view of the kind whose spec takes any
//! value, so that a bad one gets this plugin's message (`spec.engine: Unsupported value`)
//! rather than a decoding error. In a cluster the CRD's schema refuses an unknown engine or
//! an out-of-range port before the validating webhook runs (the API server checks the schema
//! after mutating webhooks and before validating ones); the webhook checks them as well, so
//! that the rules hold wherever the plugin runs (`wasmop test`, a CRD without the bounds), and
//! adds what a schema cannot say: the host must be a DNS name or an IP address. Mutating
//! runs before the schema check, which is why defaulting can fill `replicas`, which the
//! schema requires.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use wasmop_guest::Context;
use wasmop_guest::admission::{
    Admission, Allowed, Denied, FailurePolicy, Mutated, Operation, Review, Webhook, Webhooks,
};
use wasmop_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The engines a Database can run, as the reconciler's `Engine` spells them.
const ENGINES: [&str; 3] = ["postgres", "mysql", "mariadb"];
/// What `replicas` is when a Database does not say.
pub(crate) const DEFAULT_REPLICAS: u64 = 1;

/// A Database as admission sees it: every spec field any JSON value, so nothing fails to
/// decode before the checks below have named it.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub(crate) struct DatabaseReview {
    metadata: ObjectMeta,
    #[serde(default)]
    spec: ReviewSpec,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default)]
struct ReviewSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    engine: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    host: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    port: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    replicas: Option<Value>,
}

wasmop_guest::custom_resource!(
    DatabaseReview,
    group = "demo.wasmop.dev",
    version = "v1",
    kind = "Database",
    plural = "databases",
    namespaced
);

pub(crate) struct DatabaseAdmission;

/// Whether `host` is a DNS-1123 subdomain: dot-separated labels of lowercase letters, digits
/// and `-`, each starting and ending with a letter or digit, 253 characters in all.
fn is_dns_name(host: &str) -> bool {
    host.len() <= 253
        && host.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b.len() <= 63
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

/// What is wrong with `spec`, one message per field, as the API server words field errors.
fn problems(spec: &ReviewSpec) -> Vec<String> {
    let mut problems = Vec::new();
    match &spec.engine {
        Some(Value::String(e)) if ENGINES.contains(&e.as_str()) => {}
        Some(other) => problems.push(format!(
            "spec.engine: Unsupported value: {other}: supported values: \"postgres\", \
             \"mysql\", \"mariadb\""
        )),
        None => problems.push("spec.engine: Required value".to_owned()),
    }
    match &spec.port {
        Some(Value::Number(n)) if n.as_u64().is_some_and(|p| (1..=65535).contains(&p)) => {}
        Some(other) => problems.push(format!(
            "spec.port: Invalid value: {other}: must be a TCP port, 1 to 65535"
        )),
        None => problems.push("spec.port: Required value".to_owned()),
    }
    match &spec.host {
        Some(Value::String(h)) if is_dns_name(h) || h.parse::<IpAddr>().is_ok() => {}
        Some(other) => problems.push(format!(
            "spec.host: Invalid value: {other}: must be a DNS name (lowercase letters, \
             digits, '-' and '.') or an IP address"
        )),
        None => problems.push("spec.host: Required value".to_owned()),
    }
    problems
}

impl Admission for DatabaseAdmission {
    type Object = DatabaseReview;

    fn webhooks() -> Webhooks {
        Webhooks::new()
            .mutating(
                Webhook::new([Operation::Create, Operation::Update])
                    .failure_policy(FailurePolicy::Ignore)
                    .timeout_seconds(5),
            )
            .validating(Webhook::new([Operation::Create, Operation::Update]).timeout_seconds(5))
    }

    fn mutate(
        review: Review<DatabaseReview>,
        _ctx: &Context,
    ) -> Result<Mutated<DatabaseReview>, Denied> {
        let Some(mut db) = review.object else {
            return Ok(Mutated::unchanged());
        };
        if db.spec.replicas.is_some() {
            return Ok(Mutated::unchanged());
        }
        db.spec.replicas = Some(Value::from(DEFAULT_REPLICAS));
        Ok(Mutated::to(db))
    }

    fn validate(review: Review<DatabaseReview>, _ctx: &Context) -> Result<Allowed, Denied> {
        let Some(db) = review.object else {
            return Ok(Allowed::new());
        };
        let problems = problems(&db.spec);
        if problems.is_empty() {
            return Ok(Allowed::new());
        }
        let name = db.metadata.name.as_deref().unwrap_or("(generated)");
        Err(Denied::invalid(format!(
            "Database {name} is invalid: {}",
            problems.join("; ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: Value) -> ReviewSpec {
        serde_json::from_value(v).expect("spec")
    }

    #[test]
    fn a_good_spec_has_no_problems() {
        for host in ["db.shop.svc", "10.0.0.7", "fd00::1", "a"] {
            let s = spec(json!({"engine": "postgres", "host": host, "port": 5432}));
            assert!(problems(&s).is_empty(), "{host}: {:?}", problems(&s));
        }
    }

    #[test]
    fn each_bad_field_is_named() {
        let s = spec(json!({"engine": "oracle", "host": "Bad_Host", "port": 70000}));
        let p = problems(&s);
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(
            p[0].starts_with("spec.engine: Unsupported value: \"oracle\""),
            "{p:?}"
        );
        assert!(p[1].starts_with("spec.port: Invalid value: 70000"), "{p:?}");
        assert!(
            p[2].starts_with("spec.host: Invalid value: \"Bad_Host\""),
            "{p:?}"
        );
        let p = problems(&spec(json!({})));
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(p.iter().all(|m| m.ends_with("Required value")), "{p:?}");
        let p = problems(&spec(json!({"engine": "mysql", "host": "h", "port": 0})));
        assert_eq!(
            p,
            ["spec.port: Invalid value: 0: must be a TCP port, 1 to 65535"]
        );
    }
}
