//! The manifests in `deploy/` against the real control plane, as a user applies them: every
//! kustomization renders, and `kubectl apply -k` with a server-side dry run accepts every object
//! it holds (schema, defaults, admission); the host configurations they ship are valid for the
//! host that reads them. (The end-to-end tests run the host as the ServiceAccount of
//! `deploy/rbac`, so the RBAC is proven there.)

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Output;

use wasmop::config::Config;
use wasmop_testenv::ControlPlane;
use wasmop_testenv::TestEnv;

/// Every kustomization a user applies.
const KUSTOMIZATIONS: &[&str] = &["deploy/base", "deploy/overlays/k3s"];

/// Every host configuration file the deploy manifests and docs ship.
const HOST_CONFIGS: &[&str] = &[
    "deploy/config/wasmop.yaml",
    "deploy/base/wasmop.yaml",
    "deploy/overlays/k3s/wasmop.yaml",
    "deploy/demo/config.yaml",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

async fn kubectl(env: &TestEnv, args: &[&str]) -> Output {
    let binary = ControlPlane::binary().unwrap();
    tokio::process::Command::new(binary)
        .arg("kubectl")
        .arg("--kubeconfig")
        .arg(env.kubeconfig())
        .args(args)
        .current_dir(workspace())
        .output()
        .await
        .unwrap()
}

fn text(output: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn kustomizations_pass_a_server_side_dry_run() {
    let env = TestEnv::start().await.unwrap();
    // A dry run creates nothing, so the namespace the objects go into must exist already.
    env.apply_yaml("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: wasmop-system\n")
        .await
        .unwrap();
    for dir in KUSTOMIZATIONS {
        let rendered = kubectl(&env, &["kustomize", dir]).await;
        assert!(
            rendered.status.success(),
            "{dir} does not render:\n{}",
            text(&rendered)
        );
        let applied = kubectl(&env, &["apply", "-k", dir, "--dry-run=server"]).await;
        assert!(
            applied.status.success(),
            "`kubectl apply -k {dir} --dry-run=server` failed:\n{}",
            text(&applied)
        );
        let out = String::from_utf8_lossy(&applied.stdout);
        for object in [
            "deployment.apps/wasmop",
            "serviceaccount/wasmop",
            "service/wasmop-metrics",
            "service/wasmop-webhook",
        ] {
            assert!(out.contains(object), "{dir} does not hold {object}:\n{out}");
        }
    }
}

#[tokio::test]
async fn shipped_host_configs_are_valid() {
    for file in HOST_CONFIGS {
        let path = workspace().join(file);
        let raw = Config::read_raw(&path)
            .await
            .unwrap_or_else(|e| panic!("{file}: {}", wasmop_core::chain(&e)));
        Config::from_raw(raw, None).unwrap_or_else(|e| {
            panic!(
                "{file} is not a valid host config: {}",
                wasmop_core::chain(&e)
            )
        });
    }
}
