//! `wasmop new` as a plugin author runs it: in a directory outside the checkout, the project
//! is written, builds with its own release profile, passes its own tests (`cargo test`
//! checks its CRD file, `wasmop test --expect` its golden case); then `wasmop dev` runs it on
//! the real control plane until its sample is reconciled, reloads a saved edit, keeps the last
//! good version through a failed build, and stops on Ctrl-C. The same for a Python project,
//! built by its own venv's componentize-py, and a Go project, built by the checkout's Go SDK.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use wasmop_testenv::{Identity, TestEnv};

use crate::harness::{PATIENCE, broad_user};

const WASMOP: &str = env!("CARGO_BIN_EXE_wasmop");

/// Runs `program` in `dir` and returns its stdout, failing with both outputs if it fails.
async fn run(dir: &Path, program: &str, args: &[&str], target_dir: &Path) -> String {
    run_in(dir, program, args, Some(target_dir)).await
}

/// [`run`], with cargo's target directory left as the test's environment has it when
/// `target_dir` is `None` (a Go plugin's build finds the workspace's pre-initialiser there).
async fn run_in(dir: &Path, program: &str, args: &[&str], target_dir: Option<&Path>) -> String {
    let mut command = tokio::process::Command::new(program);
    if let Some(target_dir) = target_dir {
        command.env("CARGO_TARGET_DIR", target_dir);
    }
    let out = command
        .args(args)
        .current_dir(dir)
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

/// Waits until the log at `path` has `text`, failing with the log after [`PATIENCE`].
async fn wait_log(path: &Path, text: &str) {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let log = std::fs::read_to_string(path).unwrap_or_default();
        if log.contains(text) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no `{text}` in the log:\n{log}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// Runs the project's golden case `case` with `wasmop test --expect` and `wasmop check` on
/// `wasm`, which must declare the Job that `--owns Job` asked for. One artefact cache for
/// both: a CPython component takes Cranelift tens of seconds.
async fn golden_case_and_check(project: &Path, wasm: &Path, case: &str, target: &Path) {
    let artefacts = target.join("artefacts");
    let (wasm, artefacts) = (wasm.to_str().unwrap(), artefacts.to_str().unwrap());
    let report = run(
        project,
        WASMOP,
        &[
            "test",
            wasm,
            "--cache-dir",
            artefacts,
            "--object",
            &format!("{case}/object.yaml"),
            "--state",
            &format!("{case}/state.yaml"),
            "--expect",
            &format!("{case}/expected.yaml"),
        ],
        target,
    )
    .await;
    assert!(report.contains("result: done"), "{report}");
    let checked = run(
        project,
        WASMOP,
        &["check", wasm, "--cache-dir", artefacts],
        target,
    )
    .await;
    assert!(
        checked.contains("batch/v1 Job"),
        "--owns Job is declared:\n{checked}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_rust_project_builds_passes_its_tests_and_runs_under_wasmop_dev() {
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
    golden_case_and_check(&project, &wasm, case, &target).await;

    // `wasmop dev` on the real control plane: it builds the project (its dev profile),
    // installs the CRD and the sample, and runs the plugin as it is.
    let dev = Dev {
        project: &project,
        plugin: "backup-policy",
        kind: "BackupPolicy",
        source: "src/lib.rs",
        field: ("\"message\".to_owned(),", "\"said\".to_owned(),"),
        broken: &[("this is not Rust", &[FAILED_BUILD])],
        rebuild: PATIENCE,
    };
    dev.run(
        outside.path(),
        &[
            ("CARGO_TARGET_DIR", target.as_os_str()),
            ("CARGO_BUILD_JOBS", "1".as_ref()),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_python_project_builds_passes_its_test_and_runs_under_wasmop_dev() {
    let outside = tempfile::tempdir().unwrap();
    let target = target_dir();
    let said = run(
        outside.path(),
        WASMOP,
        &["new", "tide-watch", "--lang", "python", "--owns", "Job"],
        &target,
    )
    .await;
    assert!(
        said.contains("cd tide-watch") && said.contains("build.py"),
        "{said}"
    );
    let project = outside.path().join("tide-watch");

    // The README's build: a venv with the pinned toolchain and the SDK (from the checkout
    // this wasmop was built from), then build.py.
    run(&project, "python3", &["-m", "venv", ".venv"], &target).await;
    let venv = project.join(".venv/bin");
    run(
        &project,
        venv.join("pip").to_str().unwrap(),
        &[
            "install",
            "--disable-pip-version-check",
            "--quiet",
            "-r",
            "requirements.txt",
        ],
        &target,
    )
    .await;
    let built = run(
        &project,
        venv.join("python").to_str().unwrap(),
        &["build.py"],
        &target,
    )
    .await;
    let wasm = project.join("target/tide-watch.wasm");
    assert_eq!(
        built.trim(),
        wasm.to_str().unwrap(),
        "build.py prints the component"
    );

    // Its golden case holds, and it declares what it owns.
    let case = "tests/cases/tidewatch-gets-its-configmap";
    golden_case_and_check(&project, &wasm, case, &target).await;

    let dev = Dev {
        project: &project,
        plugin: "tide-watch",
        kind: "TideWatch",
        source: "app.py",
        field: ("\"data\": {\"message\":", "\"data\": {\"said\":"),
        broken: &[
            // A syntax error fails the dev build itself ...
            (
                "def broken(:\n",
                &["build: app.py:1: SyntaxError", FAILED_BUILD],
            ),
            // ... and a module that fails when imported fails the new version's `describe`,
            // which the host rejects, saying why, and keeps the last good version (a full
            // build would fail in componentize-py's pre-initialisation instead).
            (
                "this is not Python",
                &[
                    "the project's Reconciler.describe failed: NameError: name 'this' is not defined at app.py:1",
                ],
            ),
        ],
        // Generous: an edit ships only the sources (the runner is built once, at the start),
        // but the first edit may come while the runner's Cranelift compilation still runs.
        rebuild: std::time::Duration::from_secs(300),
    };
    dev.run(outside.path(), &[]).await;
    // Each edit shipped only the sources, to the runner built at the start.
    let log = std::fs::read_to_string(outside.path().join("dev.log")).unwrap();
    let shipped = log
        .matches("target/dev/tide-watch.wasm: the dev runner with 1 modules")
        .count();
    assert!(shipped >= 2, "{log}");
    assert_eq!(log.matches("building the dev runner").count(), 1, "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_go_project_builds_passes_its_tests_and_runs_under_wasmop_dev() {
    let outside = tempfile::tempdir().unwrap();
    let target = target_dir();
    let said = run(
        outside.path(),
        WASMOP,
        &["new", "kelp-farm", "--lang", "go", "--owns", "Job"],
        &target,
    )
    .await;
    assert!(
        said.contains("cd kelp-farm") && said.contains("./build"),
        "{said}"
    );
    let project = outside.path().join("kelp-farm");

    // The README's commands: its native test over the SDK's fake host, then its build (the
    // Go SDK of the checkout this wasmop was built from, which go.mod's replace names).
    let tested = run_in(&project, "go", &["test", "./..."], None).await;
    assert!(tested.contains("ok"), "{tested}");
    let built = run_in(&project, "./build", &[], None).await;
    assert_eq!(
        built.trim(),
        "target/kelp-farm.wasm",
        "./build prints the component"
    );
    let wasm = project.join("target/kelp-farm.wasm");
    // Unchanged, it is not built again.
    let modified = std::fs::metadata(&wasm).unwrap().modified().unwrap();
    run_in(&project, "./build", &[], None).await;
    assert_eq!(
        std::fs::metadata(&wasm).unwrap().modified().unwrap(),
        modified
    );

    let case = "tests/cases/kelpfarm-gets-its-configmap";
    golden_case_and_check(&project, &wasm, case, &target).await;

    let dev = Dev {
        project: &project,
        plugin: "kelp-farm",
        kind: "KelpFarm",
        source: "plugin.go",
        field: (
            "map[string]string{\"message\":",
            "map[string]string{\"said\":",
        ),
        broken: &[("this is not Go", &[FAILED_BUILD])],
        rebuild: PATIENCE,
    };
    dev.run(outside.path(), &[]).await;
}

/// `wasmop dev` on a project `wasmop new` wrote, run until its sample is reconciled, then
/// through a saved edit, a failed build and Ctrl-C.
/// What `wasmop dev` says when a build fails.
const FAILED_BUILD: &str = "the last good version keeps running";

struct Dev<'a> {
    project: &'a Path,
    /// The plugin's name (its ConfigMap is `sample-<plugin>`).
    plugin: &'a str,
    /// The custom kind, in group example.com/v1.
    kind: &'a str,
    /// The plugin's source file, relative to the project.
    source: &'a str,
    /// The text in the source that names the ConfigMap's key, and what the edit makes it.
    field: (&'a str, &'a str),
    /// What the source is replaced with to break it, one after the other, and what dev's
    /// log then says.
    broken: &'a [(&'a str, &'a [&'a str])],
    /// How long a rebuild and reload may take before the test gives up: a liveness bound,
    /// not a figure (the figure is printed).
    rebuild: std::time::Duration,
}

impl Dev<'_> {
    async fn run(&self, outside: &Path, env_vars: &[(&str, &std::ffi::OsStr)]) {
        let env = TestEnv::start().await.unwrap();
        let kubeconfig = env
            .kubeconfig_for(&Identity::user(broad_user(&env), &["system:masters"]))
            .await
            .unwrap();
        let log = outside.join("dev.log");
        let mut dev = tokio::process::Command::new(WASMOP);
        dev.args(["dev", "--namespace", env.namespace(), "--kubeconfig"])
            .arg(&kubeconfig)
            .current_dir(self.project)
            .env_remove("WASMOP_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .kill_on_drop(true);
        for (key, value) in env_vars {
            dev.env(key, value);
        }
        let mut dev = dev.spawn().unwrap();
        let dev_log = || std::fs::read_to_string(&log).unwrap_or_default();
        // The first dev build of a Rust project compiles the dependencies in the dev profile:
        // minutes on one core.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(900);
        while !dev_log().contains("running the plugin") {
            assert!(
                std::time::Instant::now() < deadline,
                "dev never ran the plugin:\n{}",
                dev_log()
            );
            assert!(
                dev.try_wait().unwrap().is_none(),
                "dev stopped:\n{}",
                dev_log()
            );
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
        let configmaps: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
        let message = format!("Hello from the {} plugin", self.plugin);
        let holds = |key: &'static str| {
            let message = message.clone();
            move |cm: Option<&ConfigMap>| {
                cm.and_then(|c| c.data.as_ref())
                    .and_then(|d| d.get(key))
                    .is_some_and(|m| *m == message)
            }
        };
        let configmap = format!("sample-{}", self.plugin);
        let waited = env
            .wait_for(
                &configmaps,
                &configmap,
                "to hold the sample's message",
                PATIENCE,
                holds("message"),
            )
            .await;
        assert!(
            waited.is_ok(),
            "{waited:?}; wasmop dev's log:\n{}",
            dev_log()
        );
        let objects: Api<DynamicObject> = Api::namespaced_with(
            env.client(),
            env.namespace(),
            &ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", self.kind)),
        );
        wasmop_testenv::wait_for_dyn(&objects, "sample", "to be Ready", PATIENCE, |p| {
            p.and_then(|p| p.data["status"]["conditions"].as_array())
                .is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
        })
        .await
        .unwrap();
        // Each reconcile's writes and outcome are shown as they happen (the outcome's line
        // comes after the writes the test saw).
        wait_log(&log, "apply v1 ConfigMap").await;
        wait_log(&log, "reconcile succeeded").await;

        // A saved edit: rebuilt, hot-reloaded, and the object reconciled again by the new
        // version.
        let file = self.project.join(self.source);
        let source = std::fs::read_to_string(&file).unwrap();
        assert!(source.contains(self.field.0), "{source}");
        let saved = std::time::Instant::now();
        std::fs::write(&file, source.replace(self.field.0, self.field.1)).unwrap();
        let waited = env
            .wait_for(
                &configmaps,
                &configmap,
                "to be written by the edited plugin",
                self.rebuild,
                holds("said"),
            )
            .await;
        assert!(
            waited.is_ok(),
            "{waited:?}; wasmop dev's log:\n{}",
            dev_log()
        );
        // A figure, not a limit (shared machines): the README states the goals.
        eprintln!(
            "wasmop dev ({}): saved edit to the new version's write in {:.2} s",
            self.source,
            saved.elapsed().as_secs_f64()
        );

        // A build that fails, or a version the host rejects, is shown, and the last good
        // version keeps running.
        for (broken, shown) in self.broken {
            std::fs::write(&file, broken).unwrap();
            for text in *shown {
                wait_log(&log, text).await;
            }
            assert!(
                dev.try_wait().unwrap().is_none(),
                "dev stopped:\n{}",
                dev_log()
            );
        }

        // Ctrl-C stops it cleanly.
        let pid = dev.id().unwrap().to_string();
        let sent = std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap();
        assert!(sent.success());
        let status = tokio::time::timeout(PATIENCE, dev.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "{status}; log:\n{}", dev_log());
    }
}
