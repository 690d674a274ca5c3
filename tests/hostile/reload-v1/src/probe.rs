// The body shared by the reload test guests (`reload-v1`, `reload-v2`, `reload-kinds`): each
// crate sets `VERSION`, `OWNS` and `TRAPS` and includes this file, so the versions differ only in what
// they declare and what they write.
//
// The plugin `reload-probe` reconciles ConfigMaps labelled `wasmop.test/reload=input` and
// applies `<name>-out` with `data.version` = the version that ran, so a test sees which
// version served a reconcile. An input with `data.slowMs` makes the reconcile spin that long
// first (to keep a reconcile in flight across a swap); it logs `slow reconcile started`.
// With `TRAPS` every reconcile traps (a broken version, for rollback).

wit_bindgen::generate!({ path: "../../../wit", world: "plugin" });

use exports::wasmop::plugin::reconciler::{Action, Error, Guest, Request};
use wasmop::plugin::kube;
use wasmop::plugin::log;
use wasmop::plugin::plugin_info::Info;
use wasmop::plugin::types::Gvk;

struct Plugin;

fn gvk(group: &str, version: &str, kind: &str) -> Gvk {
    Gvk {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
    }
}

/// Pulls `"key":"<string>"` out of flat JSON without a JSON library.
fn field<'a>(json: &'a str, key: &str) -> Option<&'a str> {
    let start = json.find(&format!("\"{key}\":\""))? + key.len() + 4;
    json[start..].split('"').next()
}

impl Guest for Plugin {
    fn describe() -> Info {
        Info {
            name: "reload-probe".into(),
            version: VERSION.into(),
            primary: gvk("", "v1", "ConfigMap"),
            primary_selector: Some("wasmop.test/reload=input".into()),
            owns: OWNS.iter().map(|(g, v, k)| gvk(g, v, k)).collect(),
            watches: Vec::new(),
            finalizer: None,
            reconcile_on_metadata_change: false,
            permissions: Vec::new(),
        }
    }

    fn reconcile(req: Request) -> Result<Action, Error> {
        if TRAPS {
            panic!("version {VERSION} is broken");
        }
        if let Some(ms) = field(&req.object, "slowMs").and_then(|n| n.parse::<u64>().ok()) {
            log::log(log::Level::Info, "slow reconcile started");
            let until = std::time::Instant::now() + std::time::Duration::from_millis(ms);
            while std::time::Instant::now() < until {
                std::hint::spin_loop();
            }
        }
        let name = &req.target.name;
        let namespace = req.target.namespace.clone().unwrap_or_default();
        let out = format!(
            "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"{name}-out\",\
             \"namespace\":\"{namespace}\"}},\"data\":{{\"version\":\"{VERSION}\"}}}}"
        );
        kube::apply(&out).map_err(|e| Error::Retryable(format!("apply: {e:?}")))?;
        log::log(log::Level::Info, &format!("version {VERSION} reconciled {name}"));
        Ok(Action::Done)
    }

    fn cleanup(_req: Request) -> Result<Action, Error> {
        Ok(Action::Done)
    }
}

export!(Plugin);
