//! The probe server: `/healthz` (the process and its async runtime answer), `/readyz` (every
//! plugin is loaded and its caches are synced; the leadership state is in the body) and
//! `/status` (the [`Snapshot`](wasmop_controller::status::Snapshot) as JSON, which `wasmop status` reads).
//! It has its own address (`healthAddress`, default `0.0.0.0:8081`, as controller-runtime
//! keeps probes apart from metrics), so a probe never depends on a metrics scrape.
//!
//! A standby host is ready: its caches are warm and it can take over at once; Kubernetes must
//! not restart it for not leading.

use hyper::StatusCode;

use crate::http::Reply;
use wasmop_controller::status::{Leadership, Status};

fn leadership(l: Leadership) -> &'static str {
    match l {
        Leadership::Disabled => "disabled",
        Leadership::Leader => "leader",
        Leadership::Standby => "standby",
    }
}

/// Answers one probe request from `status`.
pub(crate) fn route(status: &Status, path: &str) -> Reply {
    match path {
        "/healthz" | "/livez" => Reply::text(StatusCode::OK, "ok\n"),
        "/readyz" => {
            let snapshot = status.snapshot();
            let lead = leadership(snapshot.leadership);
            if snapshot.ready {
                Reply::text(StatusCode::OK, format!("ready\nleadership: {lead}\n"))
            } else {
                let pending: Vec<&str> = snapshot
                    .plugins
                    .iter()
                    .filter(|(_, p)| {
                        matches!(
                            p.state,
                            wasmop_controller::status::State::Loaded
                                | wasmop_controller::status::State::Syncing
                        )
                    })
                    .map(|(n, _)| n.as_str())
                    .collect();
                let why = if pending.is_empty() {
                    "plugins are still loading".to_owned()
                } else {
                    format!("caches not synced for: {}", pending.join(", "))
                };
                Reply::text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("not ready: {why}\nleadership: {lead}\n"),
                )
            }
        }
        "/status" => match serde_json::to_string_pretty(&status.snapshot()) {
            Ok(body) => Reply {
                status: StatusCode::OK,
                body,
                content_type: "application/json",
            },
            Err(error) => Reply::text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot encode the status: {error}\n"),
            ),
        },
        _ => Reply::text(
            StatusCode::NOT_FOUND,
            "not found: try /healthz, /readyz or /status\n",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmop_controller::status::State;

    #[test]
    fn readyz_names_the_plugins_whose_caches_are_not_synced() {
        let s = Status::new(Leadership::Standby);
        assert_eq!(route(&s, "/healthz").status, StatusCode::OK);
        let r = route(&s, "/readyz");
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            r.body,
            "not ready: plugins are still loading\nleadership: standby\n"
        );
        s.loaded("a", "1", "d");
        s.plugins_loaded();
        s.record("a", State::Syncing, None);
        let r = route(&s, "/readyz");
        assert_eq!(
            r.body,
            "not ready: caches not synced for: a\nleadership: standby\n"
        );
        s.record("a", State::Standby, None);
        let r = route(&s, "/readyz");
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.body, "ready\nleadership: standby\n");
    }

    #[test]
    fn status_is_json_and_unknown_paths_are_not_found() {
        let s = Status::new(Leadership::Disabled);
        let r = route(&s, "/status");
        assert_eq!(r.content_type, "application/json");
        let v: serde_json::Value = serde_json::from_str(&r.body).expect("json");
        assert_eq!(v["leadership"], "disabled");
        assert_eq!(route(&s, "/nope").status, StatusCode::NOT_FOUND);
    }
}
