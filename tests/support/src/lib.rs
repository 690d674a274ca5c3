//! Test support for wasmop end-to-end tests: a real control plane (kube-apiserver, etcd and
//! kube-controller-manager built from the upstream Go modules in `tests/control-plane`) shared
//! by every test of a test binary, a fresh namespace per test, YAML apply, waiting with readable
//! failures, and clients for restricted identities.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use wasmop_testenv::{Identity, TestEnv};
//! let env = TestEnv::start().await?;
//! env.apply_yaml("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n").await?;
//! let reader = env.client_for(&Identity::user("alice", &["readers"])).await?;
//! # drop(reader);
//! # Ok(())
//! # }
//! ```
//!
//! Environment: `WASMOP_CONTROL_PLANE_BIN` names a prebuilt binary (otherwise
//! `tests/control-plane/cp build` builds or finds the cached one); `WASMOP_TESTENV_KEEP` keeps
//! the run directory and test namespaces for debugging.

pub mod apply;
pub mod control_plane;
pub mod env;
pub mod identity;
pub mod wait;

pub use apply::{ApplyError, FIELD_MANAGER, apply_yaml};
pub use control_plane::{ComponentState, ControlPlane, ControlPlaneError, ControlPlaneState};
pub use env::{EnvError, TestEnv};
pub use identity::{Identity, IdentityError};
pub use wait::{WaitError, wait_for, wait_for_dyn};
