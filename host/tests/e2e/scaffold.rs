//! `wasmop new` as a plugin author runs it: in a directory outside the checkout, the project
//! is written, builds with its own release profile, passes its own tests (`cargo test`
//! checks its CRD file, `wasmop test --expect` its golden case) and, as it is, reconciles its
//! sample on the real control plane.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use wasmop_testenv::TestEnv;

use crate::harness::{Host, PATIENCE, confined};

const WASMOP: &str = env!("CARGO_BIN_EXE_wasmop");

/// Runs `program` in `dir` and returns its stdout, failing with both outputs if it fails.
async fn run(dir: &Path, program: &str, args: &[&str], target_dir: &Path) -> String {
    let out = tokio::process::Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target_dir)
        .env_remove("WASMOP_LOG")
        .output()
        .await
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{program} {args:?} in {} failed ({}):\n{stdout}\n{}",
        dir.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Where the generated projects build: kept between runs (so a rerun is incremental) and
/// apart from the workspace's own builds, whose lock file and profiles differ.
fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("wasmop-new")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_rust_project_builds_passes_its_tests_and_reconciles_as_it_is() {
    let outside = tempfile::tempdir().unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let target = target_dir();

    // The SDK comes from the checkout this wasmop was built from (no --sdk-* flag).
    let said = run(
        outside.path(),
        WASMOP,
        &["new", "backup-policy", "--owns", "Job"],
        &target,
    )
    .await;
    assert!(said.contains("cd backup-policy"), "{said}");
    let project = outside.path().join("backup-policy");

    run(
        &project,
        &cargo,
        // One job: the other end-to-end tests run beside this build on a small machine.
        &[
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--jobs",
            "1",
        ],
        &target,
    )
    .await;
    let wasm = target.join("wasm32-wasip2/release/backup_policy.wasm");
    let size = std::fs::metadata(&wasm).unwrap().len();
    assert!(size < 1024 * 1024, "{size} bytes: too big for a ConfigMap");

    // Its own tests: the CRD file is what the types generate, and the golden case holds.
    // Natively, with the dependencies unoptimised: the check does not depend on it, and a cold
    // build of k8s-openapi for the host machine is then about half as long.
    run(
        &project,
        &cargo,
        &[
            "test",
            "--jobs",
            "1",
            "--config",
            "profile.dev.package.\"*\".opt-level=0",
        ],
        &target,
    )
    .await;
    let case = "tests/cases/backuppolicy-gets-its-configmap";
    let report = run(
        &project,
        WASMOP,
        &[
            "test",
            wasm.to_str().unwrap(),
            "--object",
            &format!("{case}/object.yaml"),
            "--state",
            &format!("{case}/state.yaml"),
            "--expect",
            &format!("{case}/expected.yaml"),
        ],
        &target,
    )
    .await;
    assert!(report.contains("result: done"), "{report}");
    let checked = run(
        &project,
        WASMOP,
        &["check", wasm.to_str().unwrap()],
        &target,
    )
    .await;
    assert!(
        checked.contains("batch/v1 Job"),
        "--owns Job is declared:\n{checked}"
    );

    // As it is, on the real control plane: the CRD and the sample the README applies.
    let env = TestEnv::start().await.unwrap();
    let crd = std::fs::read_to_string(project.join("crd.yaml")).unwrap();
    let sample = std::fs::read_to_string(project.join("samples/backuppolicy.yaml")).unwrap();
    env.apply_yaml(&crd).await.unwrap();
    let host = Host::start_broad(&env, &[], &confined(&env, &["backup-policy"], "")).await;
    // Copied in whole, then renamed, as a deployment would: the host never sees half a file.
    let staged = host.plugin_dir().join("backup-policy.partial");
    std::fs::copy(&wasm, &staged).unwrap();
    std::fs::rename(&staged, host.plugin_dir().join("backup-policy.wasm")).unwrap();
    env.apply_yaml(&sample).await.unwrap();

    let configmaps: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    env.wait_for(
        &configmaps,
        "sample-backup-policy",
        "to hold the sample's message",
        PATIENCE,
        |cm| {
            cm.and_then(|c| c.data.as_ref())
                .and_then(|d| d.get("message"))
                .is_some_and(|m| m == "Hello from the backup-policy plugin")
        },
    )
    .await
    .unwrap();
    let policies: Api<DynamicObject> = Api::namespaced_with(
        env.client(),
        env.namespace(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "BackupPolicy")),
    );
    wasmop_testenv::wait_for_dyn(&policies, "sample", "to be Ready", PATIENCE, |p| {
        p.and_then(|p| p.data["status"]["conditions"].as_array())
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
    })
    .await
    .unwrap();
    host.stop().await;
}
