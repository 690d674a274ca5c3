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
//! YAML, deterministic (no timestamps; keys of objects sorted):
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
//! outcome:
//!   result: done     # done | requeue | retryable-error | permanent-error | trap | timeout
//!                    # | out-of-memory | denied | limit-exceeded
//!   requeueAfterMs: 30000  # for requeue
//!   message: ...           # for every failure
//! ```
//! A failed write carries an `error:` field with the cluster's message.

mod journal;
pub mod memory;
mod report;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

pub use self::memory::MemoryCluster;
pub use self::report::{GoldenError, Report, ReportOutcome};
use wasmop_core::cluster::{ClusterError, IdentityError};
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
    /// A blocking helper could not start its async runtime.
    #[error("cannot start an async runtime")]
    AsyncRuntime(#[source] std::io::Error),
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

    /// Calls `cleanup` instead of `reconcile`, as for an object being deleted.
    #[must_use]
    pub fn cleanup(mut self) -> Self {
        self.cleanup = true;
        self
    }
}

/// The instant plugins see as "now" in offline runs, so reports (conditions'
/// `lastTransitionTime`) are reproducible: 2025-01-01T00:00:00Z.
pub const OFFLINE_CLOCK: std::time::Duration = std::time::Duration::from_secs(1_735_689_600);

/// The runtime configuration of offline runs: on-demand allocation (nothing to reserve for
/// one call), one call at a time, the wall clock stopped at [`OFFLINE_CLOCK`].
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
    /// call at a time, no artefact cache, the wall clock stopped at [`OFFLINE_CLOCK`]) and
    /// empty settings.
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
    /// object. Returns the report and the cluster (to inspect the resulting objects).
    pub async fn run_with_cluster(
        &self,
        scenario: &Scenario,
    ) -> Result<(Report, Arc<MemoryCluster>), OfflineError> {
        let cluster = Arc::new(MemoryCluster::new());
        cluster
            .seed(scenario.state.iter().cloned())
            .map_err(OfflineError::Seed)?;
        cluster
            .seed([scenario.object.clone()])
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
            .unwrap_or_else(|| scenario.object.clone());
        let request = Request {
            target,
            object: object.into(),
        };
        let (call, outcome) = if scenario.cleanup {
            (
                "cleanup",
                self.plugin
                    .call(cluster.clone(), Call::cleanup(request.clone()))
                    .await
                    .outcome,
            )
        } else {
            (
                "reconcile",
                self.plugin
                    .call(cluster.clone(), Call::reconcile(request.clone()))
                    .await
                    .outcome,
            )
        };
        let report = Report {
            plugin: self.plugin.info().name.to_string(),
            call,
            object: (&request.target).into(),
            writes: cluster
                .writes()
                .into_iter()
                .map(report::canonical_write)
                .collect(),
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

fn blocking_runtime() -> Result<tokio::runtime::Runtime, OfflineError> {
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
