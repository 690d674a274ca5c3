//! database-config's validating webhook as native Rust over kube's admission types: the
//! contender the sandboxed plugin is measured against (section 11 of `bench/run`, and
//! `cargo bench -p wasmop-runtime --bench review`). The same rules and messages as
//! `plugins/rust/database-config/src/admission.rs`: the engine one of three, the port 1 to
//! 65535, the host a DNS name or an IP address.

use std::net::IpAddr;

use kube_core::DynamicObject;
use kube_core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use serde_json::Value;

const ENGINES: [&str; 3] = ["postgres", "mysql", "mariadb"];

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

/// What is wrong with a Database's `spec`, one message per field.
pub fn problems(spec: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    match spec.get("engine") {
        Some(Value::String(e)) if ENGINES.contains(&e.as_str()) => {}
        Some(other) => problems.push(format!(
            "spec.engine: Unsupported value: {other}: supported values: \"postgres\", \
             \"mysql\", \"mariadb\""
        )),
        None => problems.push("spec.engine: Required value".to_owned()),
    }
    match spec.get("port") {
        Some(Value::Number(n)) if n.as_u64().is_some_and(|p| (1..=65535).contains(&p)) => {}
        Some(other) => problems.push(format!(
            "spec.port: Invalid value: {other}: must be a TCP port, 1 to 65535"
        )),
        None => problems.push("spec.port: Required value".to_owned()),
    }
    match spec.get("host") {
        Some(Value::String(h)) if is_dns_name(h) || h.parse::<IpAddr>().is_ok() => {}
        Some(other) => problems.push(format!(
            "spec.host: Invalid value: {other}: must be a DNS name (lowercase letters, \
             digits, '-' and '.') or an IP address"
        )),
        None => problems.push("spec.host: Required value".to_owned()),
    }
    problems
}

/// Reviews one request: admitted, or refused with the plugin's message (422 Invalid).
pub fn validate(request: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
    let response = AdmissionResponse::from(request);
    let Some(object) = &request.object else {
        return response;
    };
    let empty = Value::Null;
    let spec = object.data.get("spec").unwrap_or(&empty);
    let problems = problems(spec);
    if problems.is_empty() {
        return response;
    }
    let name = object.metadata.name.as_deref().unwrap_or("(generated)");
    let mut denied = response.deny(format!(
        "Database {name} is invalid: {}",
        problems.join("; ")
    ));
    denied.result.reason = "Invalid".into();
    denied.result.code = 422;
    denied
}

/// The whole exchange as a webhook does it: AdmissionReview bytes in, AdmissionReview bytes
/// out. `Err` for a body that is not a review.
pub fn answer(body: &[u8]) -> Result<Vec<u8>, String> {
    let review: AdmissionReview<DynamicObject> =
        serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let request: AdmissionRequest<DynamicObject> =
        review.try_into().map_err(|_| "no request".to_owned())?;
    serde_json::to_vec(&validate(&request).into_review()).map_err(|e| e.to_string())
}
