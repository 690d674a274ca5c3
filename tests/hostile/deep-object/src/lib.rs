//! Hostile test plugin `deep-object`: makes its own target as deeply nested as the API server
//! allows, so that every host path an object takes (the apply reply, the watch, the cache,
//! the status patch's reply) meets it. Written against the WIT directly (no SDK, no JSON
//! library: the host must cope with the depth, this guest only counts brackets).
//!
//! The variant is the target's name: a Target named `deep-object-<N>` is applied with
//! `spec.nested` nested `N` objects deep (so the object is `N + 2` deep), e.g.
//! `deep-object-200` and `deep-object-9998` (10,000 levels in all, the API server's limit).
//! The guest checks that the apply's reply is the stored object at full depth, then (on the
//! reconcile its own change triggers) that the host's cached copy is too, and reports
//! `status.deepObject: "ok <depth>"`. Any other Target is left alone.

wit_bindgen::generate!({ path: "../../../wit", world: "plugin" });

use exports::wasmop::plugin::reconciler::{Action, Error, Guest, Request};
use wasmop::plugin::kube::{self, PatchBody};
use wasmop::plugin::plugin_info::{Info, Mapping, Permission, Verb, Watch};
use wasmop::plugin::types::{Gvk, ObjectRef};

struct Plugin;

/// What the innermost level holds: a test may look for it where the object must not go
/// (the host's log).
pub const MARKER: &str = "deep-object-content-marker";

fn gvk(group: &str, version: &str, kind: &str) -> Gvk {
    Gvk {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
    }
}

#[allow(dead_code)]
fn unused(_: Mapping, _: Verb, _: ObjectRef, _: Permission) {}

/// The deepest nesting of objects and arrays in `json`, strings skipped.
fn depth(json: &str) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in json.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                max = max.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// `{"x":{"x":…"marker"…}}`, `levels` objects deep.
fn nested(levels: usize) -> String {
    let mut text = String::with_capacity(levels * 6 + MARKER.len() + 2);
    for _ in 0..levels {
        text.push_str("{\"x\":");
    }
    text.push('"');
    text.push_str(MARKER);
    text.push('"');
    for _ in 0..levels {
        text.push('}');
    }
    text
}

impl Guest for Plugin {
    fn describe() -> Info {
        Info {
            name: "deep-object".into(),
            version: "0.1.0".into(),
            primary: gvk("wasmop.test", "v1", "Target"),
            primary_selector: None,
            owns: Vec::new(),
            watches: Vec::<Watch>::new(),
            finalizer: None,
            reconcile_on_metadata_change: false,
            permissions: Vec::new(),
        }
    }

    fn reconcile(req: Request) -> Result<Action, Error> {
        let Some(levels) = req
            .target
            .name
            .strip_prefix("deep-object-")
            .and_then(|n| n.parse::<usize>().ok())
        else {
            return Ok(Action::Done);
        };
        let want = levels + 2;
        let namespace = req.target.namespace.clone().unwrap_or_default();
        // The host's copy (its cache): once it is as deep as applied, report.
        let current =
            kube::get(&req.target).map_err(|e| Error::Retryable(format!("get: {e:?}")))?;
        if depth(&current) >= want && current.contains(MARKER) {
            let status = format!("{{\"status\":{{\"deepObject\":\"ok {want}\"}}}}");
            let reply = kube::patch_status(&req.target, &PatchBody::Merge(status), None)
                .map_err(|e| Error::Retryable(format!("status: {e:?}")))?;
            if depth(&reply) < want {
                return Err(Error::Permanent(format!(
                    "the status patch's reply is {} deep, not {want}",
                    depth(&reply)
                )));
            }
            return Ok(Action::Done);
        }
        let object = format!(
            "{{\"apiVersion\":\"wasmop.test/v1\",\"kind\":\"Target\",\"metadata\":{{\"name\":\"{}\",\
             \"namespace\":\"{namespace}\"}},\"spec\":{{\"value\":\"deep\",\"nested\":{}}}}}",
            req.target.name,
            nested(levels)
        );
        let stored = kube::apply(&object).map_err(|e| Error::Retryable(format!("apply: {e:?}")))?;
        if depth(&stored) < want || !stored.contains(MARKER) {
            return Err(Error::Permanent(format!(
                "the apply's reply is {} deep, not {want}",
                depth(&stored)
            )));
        }
        // The change comes back through the watch and calls this again.
        Ok(Action::Done)
    }

    fn cleanup(_req: Request) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

export!(Plugin);
