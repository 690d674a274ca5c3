//! `reload-probe`, version `sdk`: the plugin of `reload-v1`/`reload-v2` written with the guest
//! SDK and k8s-openapi's typed `ConfigMap`, as a plugin author would write it, for the reload
//! benchmark. It is about the smallest plugin the SDK makes (~450 KB: serde_json, the SDK,
//! `ObjectMeta` with its timestamps), between the hand-written probes (under 100 KB) and
//! the example plugins (500-650 KB); the hot-reload goal is stated for about 300 KB.
//!
//! It reconciles ConfigMaps labelled `wasmop.test/reload=input` and applies `<name>-out` with
//! `data.version` = `sdk` and `data.inputs` = how many data keys the input has.

use std::collections::BTreeMap;

use wasmop_guest::k8s_openapi::api::core::v1::ConfigMap;
use wasmop_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use wasmop_guest::log::{self, Level};
use wasmop_guest::{Action, Context, Info, Object, ReconcileError, Reconciler};

/// The version this plugin writes and logs.
const VERSION: &str = "sdk";

struct ReloadProbe;

impl Reconciler for ReloadProbe {
    type Object = ConfigMap;

    fn describe() -> Info {
        Info::new("reload-probe", VERSION).selector("wasmop.test/reload=input")
    }

    fn reconcile(input: ConfigMap, ctx: &Context) -> Result<Action, ReconcileError> {
        let name = format!("{}-out", input.name());
        let inputs = input.data.as_ref().map_or(0, BTreeMap::len);
        ctx.apply(&ConfigMap {
            // No owner reference: like the other versions, it declares no owned kinds, so a
            // swap between them keeps the controller.
            metadata: ObjectMeta {
                name: Some(name),
                namespace: input.namespace().map(str::to_owned),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([
                ("version".to_owned(), VERSION.to_owned()),
                ("inputs".to_owned(), inputs.to_string()),
            ])),
            ..ConfigMap::default()
        })?;
        log::write(
            Level::Info,
            &format!("version {VERSION} reconciled {}", input.name()),
        );
        Ok(Action::Done)
    }
}

wasmop_guest::export!(ReloadProbe);
