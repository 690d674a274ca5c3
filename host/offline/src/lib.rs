//! Running a plugin offline: load a component, seed an in-memory cluster from YAML, run one
//! reconcile (or cleanup), and get a [`Report`] of the writes it made and how it ended. This
//! is `wasmop test`, and the API plugin crates use in their own `cargo test`:
//!
//! ```no_run
//! use wasmop_offline::{Harness, Scenario};
//!
//! let harness = Harness::load_blocking("target/wasm32-wasip2/wasm/database_config.wasm")?;
//! let scenario = Scenario::from_yaml(&std::fs::read_to_string("tests/db.yaml")?)?
//!     .with_state_yaml(&std::fs::read_to_string("tests/state.yaml")?)?;
//! let report = harness.run_blocking(&scenario)?;
//! report.assert_golden("tests/golden/db.yaml"); // WASMOP_BLESS=1 rewrites the file
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Report format
//! YAML, deterministic (no timestamps but the ones the plugin computed from its clock, which
//! is stopped, see below; keys of objects sorted):
//! ```yaml
//! plugin: database-config
//! call: reconcile
//! object: {apiVersion: example.com/v1, kind: Database, namespace: default, name: orders}
//! writes:            # in the order the plugin made them
//! - op: apply        # create | apply | patch | patch-status | delete | event
//!   fieldManager: wasmop/database-config
//!   object: {...}
//! - op: patch-status
//!   target: {apiVersion: ..., kind: ..., namespace: ..., name: ...}
//!   patchType: merge # merge | json | strategic | apply
//!   patch: {...}
//! - op: event
//!   regarding: {...}
//!   type: Normal
//!   reason: ConfigApplied
//!   action: Apply
//!   note: ...
//! logs:              # the plugin's log lines, in order, cut and escaped as the host logs them
//! - level: info      # trace | debug | info | warn | error
//!   message: ...
//! outcome:
//!   result: done     # done | requeue | retryable-error | permanent-error | trap | timeout
//!                    # | out-of-memory | denied | limit-exceeded
//!   requeueAfterMs: 30000  # for requeue
//!   message: ...           # for every failure
//! ```
//! A failed write carries an `error:` field with the cluster's message.
//!
//! # The clock
//! The guest's wall clock is stopped at the scenario's time ([`Scenario::at`]), by default
//! [`OFFLINE_CLOCK`] (2025-01-01T00:00:00Z), so a plugin that stamps a condition's
//! `lastTransitionTime` gives the same report every run, and "a minute later" is a scenario
//! at another time. Timestamps the harness writes itself (the `deletionTimestamp` of a
//! [`Scenario::cleanup`] object that has none) are that time too.

mod admission;
mod case;
mod journal;
pub mod memory;
mod report;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use serde::Deserialize;
use serde_json::Value;

pub use self::admission::{ReviewScenario, ReviewedReport, ReviewedRequest};
pub use self::case::{CaseError, CaseSettings, TimeError, format_time, parse_time};
pub use self::memory::MemoryCluster;
pub use self::report::{GoldenError, Report, ReportLog, ReportOutcome};
use wasmop_core::cluster::{ClusterError, IdentityError};
/// Which admission export a review calls (re-exported: plugin crates depend on this crate
/// alone).
pub use wasmop_runtime::ReviewKind;
use wasmop_runtime::{
    AllocatorChoice, Call, LoadError, LoadOptions, Plugin, Request, Runtime, RuntimeConfig,
    RuntimeError,
};

/// Why an offline run could not happen (the plugin's own failures are in the [`Report`]).
#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    /// The runtime could not start.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The plugin could not be loaded.
    #[error("cannot load the plugin {path}")]
    Load {
        /// The component file.
        path: PathBuf,
        /// Why.
        #[source]
        source: LoadError,
    },
    /// A YAML document does not parse.
    #[error("invalid YAML in {what}")]
    Yaml {
        /// Which input.
        what: String,
        /// The parse error.
        #[source]
        source: serde_yaml::Error,
    },
    /// The input holds no object, or several where one is needed.
    #[error("{what} must hold exactly one object, it holds {count}")]
    ObjectCount {
        /// Which input.
        what: String,
        /// How many it holds.
        count: usize,
    },
    /// An object cannot be identified.
    #[error("an object in {what} cannot be identified")]
    Identity {
        /// Which input.
        what: String,
        /// Why.
        #[source]
        source: IdentityError,
    },
    /// The state could not be seeded.
    #[error("cannot seed the in-memory cluster")]
    Seed(#[source] ClusterError),
    /// An AdmissionReview cannot be reviewed.
    #[error("cannot review the AdmissionReview")]
    Review(#[source] wasmop_runtime::ReviewError),
    /// A blocking helper could not start its async runtime.
    #[error("cannot start an async runtime")]
    AsyncRuntime(#[source] std::io::Error),
    /// A reconcile was asked of a plugin that only serves admission.
    #[error(
        "plugin `{0}` has no reconciler (it exports `admission` only): review an \
         AdmissionReview with `--validate` or `--mutate` instead"
    )]
    NoReconciler(String),
}

/// Parses YAML that holds objects: several documents, each an object or a `List` (`items`).
pub fn objects_from_yaml(yaml: &str, what: &str) -> Result<Vec<Value>, OfflineError> {
    let mut objects = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(yaml) {
        let value = Value::deserialize(doc).map_err(|source| OfflineError::Yaml {
            what: what.to_owned(),
            source,
        })?;
        match value {
            Value::Null => {}
            Value::Object(ref m) if m.get("kind").and_then(Value::as_str) == Some("List") => {
                if let Some(Value::Array(items)) = m.get("items") {
                    objects.extend(items.iter().cloned());
                }
            }
            other => objects.push(other),
        }
    }
    for o in &objects {
        wasmop_core::cluster::ObjectRef::of(o).map_err(|source| OfflineError::Identity {
            what: what.to_owned(),
            source,
        })?;
    }
    Ok(objects)
}

/// One offline call: the object to reconcile and the cluster state around it.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    object: Value,
    state: Vec<Value>,
    cleanup: bool,
    now: Option<SystemTime>,
}

impl Scenario {
    /// A scenario for `object` (which is also stored in the cluster). Like the host, it
    /// calls `cleanup` when the object is being deleted (`metadata.deletionTimestamp` is set)
    /// and `reconcile` otherwise.
    pub fn new(object: Value) -> Result<Self, OfflineError> {
        wasmop_core::cluster::ObjectRef::of(&object).map_err(|source| OfflineError::Identity {
            what: "the object to reconcile".into(),
            source,
        })?;
        let cleanup = object
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null());
        Ok(Self {
            object,
            state: Vec::new(),
            cleanup,
            now: None,
        })
    }

    /// A scenario from YAML holding exactly one object.
    pub fn from_yaml(yaml: &str) -> Result<Self, OfflineError> {
        let what = "the object to reconcile";
        let mut objects = objects_from_yaml(yaml, what)?;
        if objects.len() != 1 {
            return Err(OfflineError::ObjectCount {
                what: what.into(),
                count: objects.len(),
            });
        }
        Self::new(objects.remove(0))
    }

    /// Adds objects to the cluster state.
    #[must_use]
    pub fn with_state(mut self, objects: impl IntoIterator<Item = Value>) -> Self {
        self.state.extend(objects);
        self
    }

    /// Adds the objects in YAML (several documents and `List`s allowed) to the state.
    pub fn with_state_yaml(self, yaml: &str) -> Result<Self, OfflineError> {
        let objects = objects_from_yaml(yaml, "the cluster state")?;
        Ok(self.with_state(objects))
    }

    /// Calls `cleanup` instead of `reconcile`, as for an object being deleted. An object
    /// without `metadata.deletionTimestamp` gets one (the scenario's time), as the host only
    /// calls `cleanup` for an object that has it.
    #[must_use]
    pub fn cleanup(mut self) -> Self {
        self.cleanup = true;
        self
    }

    /// Runs the scenario at `now`: the guest's wall clock stands there, and so do the
    /// timestamps the harness writes. Without it, [`OFFLINE_CLOCK`].
    #[must_use]
    pub fn at(mut self, now: SystemTime) -> Self {
        self.now = Some(now);
        self
    }

    /// The time the scenario runs at.
    pub fn now(&self) -> SystemTime {
        self.now.unwrap_or(std::time::UNIX_EPOCH + OFFLINE_CLOCK)
    }

    /// The object to reconcile as it is stored: with a `deletionTimestamp` (the scenario's
    /// time) when `cleanup` is called for an object that has none.
    fn stored_object(&self) -> Value {
        let mut object = self.object.clone();
        if self.cleanup
            && object
                .pointer("/metadata/deletionTimestamp")
                .is_none_or(Value::is_null)
            && let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.insert(
                "deletionTimestamp".into(),
                Value::String(format_time(self.now())),
            );
        }
        object
    }
}

/// The instant plugins see as "now" in offline runs unless a scenario says otherwise
/// ([`Scenario::at`], `wasmop test --now`, a golden case's `now:`), so reports (conditions'
/// `lastTransitionTime`) are reproducible: 2025-01-01T00:00:00Z.
pub const OFFLINE_CLOCK: std::time::Duration = std::time::Duration::from_secs(1_735_689_600);

/// The runtime configuration of offline runs: on-demand allocation (nothing to reserve for
/// one call), one call at a time, the wall clock stopped at [`OFFLINE_CLOCK`] (the harness's
/// calls run at their scenario's time instead, [`Scenario::at`]).
pub fn offline_runtime_config() -> RuntimeConfig {
    RuntimeConfig::default()
        .concurrency(1)
        .allocator(AllocatorChoice::OnDemand)
        .fixed_clock(std::time::UNIX_EPOCH + OFFLINE_CLOCK)
}

/// A loaded plugin plus the runtime it runs on.
pub struct Harness {
    plugin: Plugin,
}

impl Harness {
    /// Loads a component with a runtime suited to one-off runs (on-demand allocation, one
    /// call at a time, no artefact cache) and empty settings. Each run's wall clock is its
    /// scenario's ([`Scenario::now`]), whatever the runtime's.
    pub async fn load(path: impl AsRef<Path>) -> Result<Self, OfflineError> {
        Self::load_with_config(path, Value::Object(Default::default())).await
    }

    /// Like [`load`](Self::load), with the plugin's settings (what `config.get` returns).
    pub async fn load_with_config(
        path: impl AsRef<Path>,
        config: Value,
    ) -> Result<Self, OfflineError> {
        let runtime = Runtime::new(offline_runtime_config())?;
        let options = LoadOptions {
            config,
            policy: wasmop_core::policy::Policy::declared(),
            ..LoadOptions::default()
        };
        Self::load_on(&runtime, path, options).await
    }

    /// Loads on an existing runtime with explicit options.
    pub async fn load_on(
        runtime: &Runtime,
        path: impl AsRef<Path>,
        options: LoadOptions,
    ) -> Result<Self, OfflineError> {
        let path = path.as_ref();
        let plugin =
            runtime
                .load_file(path, options)
                .await
                .map_err(|source| OfflineError::Load {
                    path: path.to_owned(),
                    source,
                })?;
        Ok(Self { plugin })
    }

    /// The loaded plugin.
    pub fn plugin(&self) -> &Plugin {
        &self.plugin
    }

    /// Runs one call in a fresh in-memory cluster seeded with the scenario's state and
    /// object, at the scenario's time, capturing the plugin's log lines for the report.
    /// Returns the report and the cluster (to inspect the resulting objects).
    pub async fn run_with_cluster(
        &self,
        scenario: &Scenario,
    ) -> Result<(Report, Arc<MemoryCluster>), OfflineError> {
        if self.plugin.reconciler().is_none() {
            return Err(OfflineError::NoReconciler(self.plugin.name().to_string()));
        }
        let cluster = Arc::new(MemoryCluster::new());
        // One seeding, so that versions the harness assigns are above every given one.
        cluster
            .seed(
                scenario
                    .state
                    .iter()
                    .cloned()
                    .chain([scenario.stored_object()]),
            )
            .map_err(OfflineError::Seed)?;
        let target = wasmop_core::cluster::ObjectRef::of(&scenario.object).map_err(|source| {
            OfflineError::Identity {
                what: "the object to reconcile".into(),
                source,
            }
        })?;
        // The plugin sees the object as stored (with uid and resourceVersion), as it would
        // from a watch.
        let object = cluster
            .object(&target)
            .unwrap_or_else(|| scenario.stored_object());
        let request = Request {
            target,
            object: object.into(),
        };
        let (call, entry) = if scenario.cleanup {
            ("cleanup", Call::cleanup(request.clone()))
        } else {
            ("reconcile", Call::reconcile(request.clone()))
        };
        let done = self
            .plugin
            .call(cluster.clone(), entry.at(scenario.now()).capturing_logs())
            .await;
        let outcome = done.outcome;
        let report = Report {
            plugin: self.plugin.name().to_string(),
            call,
            object: (&request.target).into(),
            writes: cluster
                .writes()
                .into_iter()
                .map(report::canonical_write)
                .collect(),
            logs: done.logs.iter().map(ReportLog::from).collect(),
            outcome: (&outcome).into(),
            raw_outcome: outcome,
        };
        Ok((report, cluster))
    }

    /// Runs one call; see [`run_with_cluster`](Self::run_with_cluster).
    pub async fn run(&self, scenario: &Scenario) -> Result<Report, OfflineError> {
        Ok(self.run_with_cluster(scenario).await?.0)
    }

    /// [`load`](Self::load) for synchronous tests. Must not be called from async code.
    pub fn load_blocking(path: impl AsRef<Path>) -> Result<Self, OfflineError> {
        blocking_runtime()?.block_on(Self::load(path))
    }

    /// [`load_with_config`](Self::load_with_config) for synchronous tests.
    pub fn load_with_config_blocking(
        path: impl AsRef<Path>,
        config: Value,
    ) -> Result<Self, OfflineError> {
        blocking_runtime()?.block_on(Self::load_with_config(path, config))
    }

    /// [`run`](Self::run) for synchronous tests. Must not be called from async code.
    pub fn run_blocking(&self, scenario: &Scenario) -> Result<Report, OfflineError> {
        blocking_runtime()?.block_on(self.run(scenario))
    }
}

pub(crate) fn blocking_runtime() -> Result<tokio::runtime::Runtime, OfflineError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(OfflineError::AsyncRuntime)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_object_being_deleted_is_cleaned_up_not_reconciled() {
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        assert!(!Scenario::new(live.clone()).expect("valid").cleanup);
        let mut dying = live;
        dying["metadata"]["deletionTimestamp"] = json!("2025-01-01T00:00:00Z");
        assert!(Scenario::new(dying).expect("valid").cleanup);
    }

    #[test]
    fn a_scenario_runs_at_the_offline_clock_unless_set_and_cleanup_stamps_that_time() {
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        let scenario = Scenario::new(live.clone()).expect("valid");
        assert_eq!(scenario.now(), std::time::UNIX_EPOCH + OFFLINE_CLOCK);
        assert!(
            scenario
                .stored_object()
                .pointer("/metadata/deletionTimestamp")
                .is_none(),
            "a reconcile's object is stored as given"
        );
        let later = std::time::UNIX_EPOCH + OFFLINE_CLOCK + std::time::Duration::from_secs(60);
        let cleanup = Scenario::new(live).expect("valid").at(later).cleanup();
        assert_eq!(cleanup.now(), later);
        assert_eq!(
            cleanup.stored_object()["metadata"]["deletionTimestamp"],
            "2025-01-01T00:01:00Z"
        );
        let mut dying = cleanup.object.clone();
        dying["metadata"]["deletionTimestamp"] = json!("2024-12-31T00:00:00Z");
        let given = Scenario::new(dying).expect("valid").at(later);
        assert_eq!(
            given.stored_object()["metadata"]["deletionTimestamp"],
            "2024-12-31T00:00:00Z",
            "a given deletionTimestamp is kept"
        );
    }

    #[test]
    fn state_yaml_accepts_documents_and_lists() {
        let yaml = "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n\
                    apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Namespace, metadata: {name: b}}\n\
                    - {apiVersion: v1, kind: Namespace, metadata: {name: c}}\n---\n";
        let objects = objects_from_yaml(yaml, "state").expect("parses");
        let names: Vec<_> = objects
            .iter()
            .map(|o| o["metadata"]["name"].clone())
            .collect();
        assert_eq!(names, [json!("a"), json!("b"), json!("c")]);
    }

    #[test]
    fn object_file_with_two_objects_is_refused_with_the_count() {
        let yaml = "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n\
                    apiVersion: v1\nkind: Namespace\nmetadata: {name: b}\n";
        let err = Scenario::from_yaml(yaml).expect_err("two objects");
        assert_eq!(
            err.to_string(),
            "the object to reconcile must hold exactly one object, it holds 2"
        );
    }
}
