//! `namespace-defaults`: every Namespace labelled `demo.wasmop.dev/defaults=enabled` gets a
//! ResourceQuota, a LimitRange with container defaults and a default-deny NetworkPolicy, all
//! named `namespace-defaults` and owned by the Namespace. The values come from the plugin's
//! configuration (see [`Config`]); the defaults suit a small team namespace.

use std::collections::BTreeMap;

use serde::Deserialize;
use wasmop_guest::k8s_openapi::api::core::v1::{
    LimitRange, LimitRangeItem, LimitRangeSpec, Namespace, ResourceQuota, ResourceQuotaSpec,
};
use wasmop_guest::k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicySpec};
use wasmop_guest::k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use wasmop_guest::k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use wasmop_guest::{Action, Context, Info, Object, ReconcileError, Reconciler, owned_meta};

/// The name of every object the plugin creates.
const NAME: &str = "namespace-defaults";

/// The plugin's configuration. Each field left out takes its default; a field given replaces
/// the default as a whole (a `quota` with only `pods` sets only `pods`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
struct Config {
    /// The ResourceQuota's `spec.hard`.
    quota: BTreeMap<String, Quantity>,
    /// Default container limits in the LimitRange (`default`).
    container_limits: BTreeMap<String, Quantity>,
    /// Default container requests in the LimitRange (`defaultRequest`).
    container_requests: BTreeMap<String, Quantity>,
    /// The traffic the NetworkPolicy denies to every pod by default: `Ingress`, `Egress` or
    /// both. Empty means no NetworkPolicy (an existing one is deleted).
    deny: Vec<Direction>,
}

#[derive(Deserialize, Clone, Copy)]
enum Direction {
    Ingress,
    Egress,
}

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
        .collect()
}

impl Default for Config {
    /// Sized for a small team: a few CPUs, some GiB, tens of pods. Containers that state
    /// nothing get modest requests so the quota can account for them (a quota on requests
    /// rejects pods without requests otherwise). Ingress is denied; egress stays open so
    /// workloads keep reaching DNS and the API server.
    fn default() -> Self {
        Self {
            quota: quantities(&[
                ("requests.cpu", "4"),
                ("requests.memory", "8Gi"),
                ("limits.cpu", "8"),
                ("limits.memory", "16Gi"),
                ("pods", "50"),
            ]),
            container_limits: quantities(&[("cpu", "500m"), ("memory", "512Mi")]),
            container_requests: quantities(&[("cpu", "100m"), ("memory", "128Mi")]),
            deny: vec![Direction::Ingress],
        }
    }
}

struct NamespaceDefaults;

impl Reconciler for NamespaceDefaults {
    type Object = Namespace;

    fn describe() -> Info {
        Info::new(NAME, env!("CARGO_PKG_VERSION"))
            .selector("demo.wasmop.dev/defaults=enabled")
            .owns::<ResourceQuota>()
            .owns::<LimitRange>()
            .owns::<NetworkPolicy>()
    }

    fn reconcile(ns: Namespace, ctx: &Context) -> Result<Action, ReconcileError> {
        let terminating =
            ns.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating");
        if terminating || ns.is_being_deleted() {
            // The API server refuses new objects in a terminating namespace, and the
            // garbage collector removes the ones there are.
            return Ok(Action::Done);
        }
        let config: Config = ctx.config()?;
        let metadata = ObjectMeta {
            namespace: Some(ns.name().to_owned()),
            ..owned_meta(&ns, NAME)?
        };

        ctx.apply(&ResourceQuota {
            metadata: metadata.clone(),
            spec: Some(ResourceQuotaSpec {
                hard: Some(config.quota),
                ..ResourceQuotaSpec::default()
            }),
            ..ResourceQuota::default()
        })?;

        ctx.apply(&LimitRange {
            metadata: metadata.clone(),
            spec: Some(LimitRangeSpec {
                limits: vec![LimitRangeItem {
                    type_: "Container".to_owned(),
                    default: Some(config.container_limits),
                    default_request: Some(config.container_requests),
                    ..LimitRangeItem::default()
                }],
            }),
        })?;

        if config.deny.is_empty() {
            ctx.delete::<NetworkPolicy>(Some(ns.name()), NAME)?;
        } else {
            let policy_types = config.deny.iter().map(|d| match d {
                Direction::Ingress => "Ingress".to_owned(),
                Direction::Egress => "Egress".to_owned(),
            });
            ctx.apply(&NetworkPolicy {
                metadata,
                spec: Some(NetworkPolicySpec {
                    // An empty selector selects every pod; no rules means nothing is allowed.
                    pod_selector: Some(LabelSelector::default()),
                    policy_types: Some(policy_types.collect()),
                    ..NetworkPolicySpec::default()
                }),
            })?;
        }
        Ok(Action::Done)
    }
}

wasmop_guest::export!(NamespaceDefaults);
