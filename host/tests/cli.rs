//! Tests of the `wasmop` binary: `check` output and exit codes for good and bad files, and
//! `test` with and without `--expect`: `--bless`, `--now`, plugin log lines in the report,
//! resourceVersions kept as given, and the exit codes each command's `--help` documents; and a
//! component compressed with zstd, which every command takes as the component it holds.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn wasmop(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(args)
        .env("WASMOP_LOG", "error")
        // No artefact cache unless a test asks for one: a developer's `WASMOP_CACHE_DIR`
        // (which also moves `./dev`'s tool cache) would make `check` load from it.
        .env_remove("WASMOP_CACHE_DIR")
        .output()
        .expect("wasmop runs")
}

fn run(args: &[&str]) -> Output {
    let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    wasmop(&args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn guest(name: &str) -> String {
    wasmop_test_guests::component(name).display().to_string()
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/well-behaved")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn check_prints_what_a_plugin_declares() {
    let out = run(&["check", &guest("well-behaved")]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for expected in [
        "name:        well-behaved",
        "version:     0.1.0",
        "primary:     wasmop.test/v1 Target",
        "owns:        v1 ConfigMap",
        "watches:     v1 Namespace (maps by all)",
        "finalizer:   wasmop.test/cleanup",
        "permissions: none",
        "load time:",
        "(compiled)",
        "digest:      sha256:",
        "contract:    wasmop:plugin@0.3.0",
    ] {
        assert!(
            stdout.contains(expected),
            "missing `{expected}` in:\n{stdout}"
        );
    }
    assert!(stdout.contains(&format!(
            "size:        {} bytes",
            std::fs::metadata(guest("well-behaved"))
                .expect("file")
                .len()
        )));
}

#[test]
fn check_names_the_contract_a_plugin_was_built_against() {
    let out = run(&["check", &guest("contract-0-1")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("contract:    wasmop:plugin@0.1.0"),
        "a 0.1 plugin still loads, and says so:\n{stdout}"
    );
}

#[test]
fn check_with_concurrency_probes_the_allocator_the_host_would_use() {
    let plain = run(&["check", &guest("noop")]);
    assert!(plain.status.success(), "{}", text(&plain.stderr));
    assert!(
        text(&plain.stdout).contains("engine:      on-demand allocator"),
        "{}",
        text(&plain.stdout)
    );
    // This machine (x86_64, 47-bit address space) can reserve a small pool.
    let probed = run(&["check", "--concurrency", "4", &guest("noop")]);
    assert!(probed.status.success(), "{}", text(&probed.stderr));
    assert!(
        text(&probed.stdout).contains("engine:      pooling allocator with 4 slots"),
        "{}",
        text(&probed.stdout)
    );
    let refused = run(&["check", "--concurrency", "0", &guest("noop")]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused.stderr));
}

#[test]
fn compiled_artefacts_load_and_a_bad_or_foreign_one_falls_back_to_compiling() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("here");
    let out_arg = out.display().to_string();
    let made = run(&["compile", "--out", &out_arg, &guest("noop")]);
    let stdout = text(&made.stdout);
    assert!(made.status.success(), "{}", text(&made.stderr));
    assert!(stdout.contains("plugin noop"), "{stdout}");
    assert!(stdout.contains("pooling allocator:"), "{stdout}");
    assert!(stdout.contains("on-demand allocator:"), "{stdout}");

    let check = |dir: &str| {
        let out = run(&["check", "--precompiled-dir", dir, &guest("noop")]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    // `check` uses on-demand allocation: its artefact is taken, nothing is compiled.
    assert!(
        check(&out_arg).contains("(precompiled by wasmop compile)"),
        "{}",
        check(&out_arg)
    );
    // A damaged artefact is skipped and the plugin compiled.
    let artefact = std::fs::read_dir(&out)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .find(|p| p.to_string_lossy().ends_with(".on-demand.cwasm"))
        .expect("an on-demand artefact");
    std::fs::write(&artefact, b"not an artefact").expect("damage");
    assert!(check(&out_arg).contains("(compiled)"));

    // Artefacts for another architecture do not fit this machine: compiled here instead.
    let other = if cfg!(target_arch = "aarch64") {
        "x86_64-unknown-linux-musl"
    } else {
        "aarch64-unknown-linux-musl"
    };
    let foreign = dir.path().join("foreign").display().to_string();
    let made = run(&[
        "compile",
        "--target",
        other,
        "--out",
        &foreign,
        &guest("noop"),
    ]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    assert!(text(&made.stdout).contains(other));
    assert!(check(&foreign).contains("(compiled)"));

    // A file that is not a plugin is refused, named, before anything is written.
    let bad = dir.path().join("bad.wasm");
    std::fs::write(&bad, b"garbage").expect("write");
    let refused = run(&["compile", "--out", &out_arg, &bad.display().to_string()]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stderr).contains(&bad.display().to_string()),
        "{}",
        text(&refused.stderr)
    );
}

/// `path` compressed with `zstd -19` (Debian's zstd, which `./dev setup` installs) into
/// `dir`, as `<file name>.zst`.
fn zstd(path: &str, dir: &Path) -> String {
    let out = dir.join(format!(
        "{}.zst",
        Path::new(path)
            .file_name()
            .expect("a file")
            .to_string_lossy()
    ));
    let status = Command::new("zstd")
        .args(["-19", "-q", "-f", path, "-o"])
        .arg(&out)
        .status()
        .expect("zstd runs (Debian's zstd; ./dev setup installs it)");
    assert!(status.success(), "zstd failed on {path}");
    out.display().to_string()
}

#[test]
fn a_compressed_component_is_the_same_plugin_version_as_the_component() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plain = guest("noop");
    let packed = zstd(&plain, dir.path());
    assert!(
        std::fs::metadata(&packed).expect("zst").len()
            < std::fs::metadata(&plain).expect("wasm").len()
    );
    let digest = |path: &str| {
        let out = run(&["check", path]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let stdout = text(&out.stdout);
        stdout
            .lines()
            .find(|l| l.starts_with("digest:"))
            .unwrap_or_else(|| panic!("no digest in:\n{stdout}"))
            .to_owned()
    };
    assert_eq!(digest(&packed), digest(&plain));

    // `wasmop compile` of the compressed file makes the artefacts the plain one loads.
    let out = dir.path().join("artefacts").display().to_string();
    let made = run(&["compile", "--out", &out, &packed]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let check = run(&["check", "--precompiled-dir", &out, &plain]);
    assert!(
        text(&check.stdout).contains("(precompiled by wasmop compile)"),
        "{}",
        text(&check.stdout)
    );

    // A damaged frame is refused, named, with the reason.
    let bytes = std::fs::read(&packed).expect("zst");
    let cut = dir.path().join("cut.wasm.zst");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).expect("write");
    check_fails(
        &cut.display().to_string(),
        "compressed with zstd, but the frame cannot be decoded",
    );
}

fn check_fails(path: &str, reason: &str) {
    let out = run(&["check", path]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(
        stderr.contains(path),
        "the message names the file: {stderr}"
    );
    assert!(stderr.contains(reason), "expected `{reason}` in: {stderr}");
}

#[test]
fn check_names_the_file_and_the_reason_for_bad_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let write = |name: &str, bytes: &[u8]| -> String {
        let path: PathBuf = dir.path().join(name);
        std::fs::write(&path, bytes).expect("write");
        path.display().to_string()
    };
    let healthy = std::fs::read(guest("well-behaved")).expect("guest");
    check_fails(
        &write("cut.wasm", &healthy[..healthy.len() / 3]),
        "truncated WebAssembly file",
    );
    check_fails(
        &write("text.wasm", b"definitely not wasm"),
        "not a WebAssembly file",
    );
    let core = wat::parse_str("(module)").expect("wat");
    check_fails(
        &write("core.wasm", &core),
        "a core WebAssembly module, not a component",
    );
    check_fails(&guest("other-world"), "not a wasmop plugin");
    check_fails(&guest("newer-major"), "built against wasmop:plugin@1.0.0");
    check_fails(&guest("missing-export"), "export is incomplete");
    check_fails(&guest("extra-import"), "imports");
    check_fails(
        &dir.path().join("absent.wasm").display().to_string(),
        "cannot read",
    );
}

#[test]
fn test_prints_the_writes_and_matches_the_golden_file() {
    let args = [
        "test",
        &guest("well-behaved"),
        "--object",
        &fixture("object.yaml"),
        "--state",
        &fixture("state.yaml"),
        "--config",
        &fixture("config.yaml"),
    ];
    let out = run(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let golden = std::fs::read_to_string(fixture("expected.yaml")).expect("golden");
    assert_eq!(
        stdout, golden,
        "the report is deterministic and matches byte for byte"
    );

    let mut with_expect = args.to_vec();
    let expected = fixture("expected.yaml");
    with_expect.extend(["--expect", &expected]);
    let out = run(&with_expect);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn test_exits_2_with_a_diff_when_the_golden_file_differs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let golden = std::fs::read_to_string(fixture("expected.yaml")).expect("golden");
    let wrong = dir.path().join("wrong.yaml");
    std::fs::write(
        &wrong,
        golden.replace("requeueAfterMs: 60000", "requeueAfterMs: 1000"),
    )
    .expect("write");
    let out = run(&[
        "test",
        &guest("well-behaved"),
        "--object",
        &fixture("object.yaml"),
        "--state",
        &fixture("state.yaml"),
        "--config",
        &fixture("config.yaml"),
        "--expect",
        &wrong.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("-  requeueAfterMs: 1000") && stderr.contains("+  requeueAfterMs: 60000"),
        "{stderr}"
    );
}

#[test]
fn test_exits_3_when_the_plugin_call_fails() {
    let out = run(&["test", &guest("panic"), "--object", &fixture("object.yaml")]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("result: trap") && stdout.contains("hostile plugin panicked on purpose"),
        "{stdout}"
    );
}

#[test]
fn test_reports_a_bad_object_file_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "kind: Target\nmetadata: {name: x}\n").expect("write");
    let out = run(&[
        "test",
        &guest("well-behaved"),
        "--object",
        &bad.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("bad.yaml") && stderr.contains("has no `apiVersion`"),
        "{stderr}"
    );
}

/// A file of the `database-config` golden case `case`.
fn database_case(case: &str, file: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../plugins/rust/database-config/tests/cases")
        .join(case)
        .join(file)
        .display()
        .to_string()
}

/// `wasmop test` of database-config's `creates-config-map` case with `extra` arguments.
fn database_test(extra: &[&str]) -> Output {
    let (object, state) = (
        database_case("creates-config-map", "object.yaml"),
        database_case("creates-config-map", "state.yaml"),
    );
    let component = guest("database-config");
    let mut args = vec!["test", &component, "--object", &object, "--state", &state];
    args.extend(extra);
    run(&args)
}

#[test]
fn test_now_sets_the_guest_clock_and_defaults_to_the_offline_clock() {
    let default = database_test(&[]);
    assert!(default.status.success(), "{}", text(&default.stderr));
    let stdout = text(&default.stdout);
    assert!(
        stdout.contains("lastTransitionTime: 2025-01-01T00:00:00Z"),
        "{stdout}"
    );
    let later = database_test(&["--now", "2025-01-01T00:01:00Z"]);
    assert!(later.status.success(), "{}", text(&later.stderr));
    let stdout = text(&later.stdout);
    assert!(
        stdout.contains("lastTransitionTime: 2025-01-01T00:01:00Z")
            && !stdout.contains("2025-01-01T00:00:00Z"),
        "{stdout}"
    );
    let help = text(&run(&["test", "--help"]).stdout);
    assert!(
        help.contains("--now <RFC3339>") && help.contains("[default: 2025-01-01T00:00:00Z"),
        "{help}"
    );
}

#[test]
fn test_case_reads_a_golden_case_settings_and_now_overrides_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let case = dir.path().join("case.yaml");
    let case_arg = case.display().to_string();
    std::fs::write(&case, "now: 2025-01-01T00:02:00Z\n").expect("write");
    let out = database_test(&["--case", &case_arg]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("lastTransitionTime: 2025-01-01T00:02:00Z"),
        "{}",
        text(&out.stdout)
    );
    let out = database_test(&["--case", &case_arg, "--now", "2025-01-01T00:03:00Z"]);
    assert!(
        text(&out.stdout).contains("lastTransitionTime: 2025-01-01T00:03:00Z"),
        "{}",
        text(&out.stdout)
    );
    std::fs::write(&case, "now: 2025-01-01T00:02:00Z\nseed: 1\n").expect("write");
    let out = database_test(&["--case", &case_arg]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&case_arg) && stderr.contains("unknown field `seed`"),
        "{stderr}"
    );
}

#[test]
fn test_refuses_a_bad_now_naming_the_value() {
    let out = database_test(&["--now", "yesterday"]);
    assert_eq!(out.status.code(), Some(2), "a usage error");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("'yesterday'")
            && stderr.contains("--now")
            && stderr.contains("is not an RFC 3339 time"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no report for a bad --now");
}

#[test]
fn test_bless_writes_the_golden_file_and_a_plain_expect_then_passes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let golden = dir.path().join("expected.yaml");
    let golden_arg = golden.display().to_string();
    let blessed = database_test(&["--expect", &golden_arg, "--bless"]);
    assert_eq!(blessed.status.code(), Some(0), "{}", text(&blessed.stderr));
    assert!(
        text(&blessed.stderr).contains(&format!("blessed {golden_arg}: created")),
        "{}",
        text(&blessed.stderr)
    );
    let written = std::fs::read_to_string(&golden).expect("the golden file was written");
    assert_eq!(written, text(&blessed.stdout), "the file is the report");

    let checked = database_test(&["--expect", &golden_arg]);
    assert_eq!(checked.status.code(), Some(0), "{}", text(&checked.stderr));

    // A stale file is replaced; one that matches is left as it is.
    std::fs::write(&golden, "plugin: stale\n").expect("write");
    let updated = database_test(&["--expect", &golden_arg, "--bless"]);
    assert!(
        text(&updated.stderr).contains(": updated"),
        "{}",
        text(&updated.stderr)
    );
    assert_eq!(std::fs::read_to_string(&golden).expect("read"), written);
    let again = database_test(&["--expect", &golden_arg, "--bless"]);
    assert!(
        text(&again.stderr).contains(": unchanged"),
        "{}",
        text(&again.stderr)
    );
}

#[test]
fn test_bless_without_expect_is_a_usage_error() {
    let out = database_test(&["--bless"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--expect"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn test_help_documents_the_exit_codes() {
    for command in ["test", "check", "compile", "run", "status"] {
        let out = run(&[command, "--help"]);
        assert!(out.status.success(), "{command}: {}", text(&out.stderr));
        let help = text(&out.stdout);
        assert!(
            help.contains("Exit codes:") && help.contains("  0  ") && help.contains("  2  "),
            "{command}: {help}"
        );
    }
    let help = text(&run(&["test", "--help"]).stdout);
    assert!(help.contains("  3  "), "{help}");
}

#[test]
fn test_reports_the_plugin_log_lines_escaped() {
    let out = run(&[
        "test",
        &guest("log-injection"),
        "--object",
        &fixture("object.yaml"),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: serde_yaml::Value = serde_yaml::from_slice(&out.stdout).expect("YAML");
    let logs = report["logs"].as_sequence().expect("a logs list");
    let levels: Vec<&str> = logs
        .iter()
        .map(|l| l["level"].as_str().expect("a level"))
        .collect();
    // One line per level, the first twice, in the order the plugin wrote them (the report
    // keeps every level, whatever `WASMOP_LOG` shows).
    assert_eq!(levels, ["info", "info", "warn", "error", "debug", "trace"]);
    for line in logs {
        let message = line["message"].as_str().expect("a message");
        assert!(
            message.starts_with("log-injection line: start\\n"),
            "{message}"
        );
        assert!(
            !message.chars().any(wasmop_core::plugin::text::is_unsafe),
            "escaped as the host logs it: {message:?}"
        );
    }
}

#[test]
fn test_logs_to_a_redirected_stderr_without_colour_and_documents_its_log_switch() {
    let out = Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args([
            "test",
            &guest("log-injection"),
            "--object",
            &fixture("object.yaml"),
        ])
        .env("WASMOP_LOG", "info")
        .env_remove("WASMOP_CACHE_DIR")
        .output()
        .expect("wasmop runs");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    // `WASMOP_LOG=info` shows the plugin's info lines on stderr as well as in the report.
    assert!(
        stderr.contains("INFO") && stderr.contains("log-injection line: start"),
        "{stderr}"
    );
    // stderr is a pipe here, not a terminal: no colour codes in it.
    assert!(!stderr.contains('\u{1b}'), "ANSI escapes in {stderr:?}");
    for args in [&["--help"][..], &["test", "--help"]] {
        let help = text(&run(args).stdout);
        assert!(help.contains("WASMOP_LOG"), "{args:?}: {help}");
    }
}

#[test]
fn test_keeps_the_resource_version_given_in_the_object_file() {
    let out = run(&[
        "test",
        &guest("event-notes"),
        "--object",
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/event-notes/object.yaml")
            .display()
            .to_string(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("message: emitted 15 events for jobs at resourceVersion 4711"),
        "{stdout}"
    );
}

/// A file of the `database-config` admission case `case`.
fn admission_case(case: &str, file: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../plugins/rust/database-config/tests/admission")
        .join(case)
        .join(file)
        .display()
        .to_string()
}

#[test]
fn check_prints_the_webhooks_a_plugin_registers() {
    let out = run(&["check", &guest("database-config")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for expected in [
        "webhooks:\n",
        "  validating: demo.wasmop.dev/v1 Database on CREATE,UPDATE, failure policy Fail, timeout 5 s",
        "  mutating: demo.wasmop.dev/v1 Database on CREATE,UPDATE, failure policy Ignore, timeout 5 s",
    ] {
        assert!(
            stdout.contains(expected),
            "missing `{expected}` in:\n{stdout}"
        );
    }
    let plain = text(&run(&["check", &guest("well-behaved")]).stdout);
    assert!(plain.contains("webhooks:    none"), "{plain}");
}

#[test]
fn test_reviews_an_admission_review_file_against_its_golden_report() {
    let component = guest("database-config");
    let (review, expected) = (
        admission_case("refuses-bad-host", "validate.yaml"),
        admission_case("refuses-bad-host", "expected.yaml"),
    );
    let out = run(&[
        "test",
        &component,
        "--validate",
        &review,
        "--expect",
        &expected,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("result: denied") && stdout.contains("spec.host: Invalid value"),
        "{stdout}"
    );
    // A denial is an answer: without --expect the run succeeds and the report says denied.
    let out = run(&["test", &component, "--validate", &review]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // The mutating webhook's patch, as the API server would apply it.
    let review = admission_case("defaults-replicas", "mutate.yaml");
    let out = run(&["test", &component, "--mutate", &review]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("result: patched") && stdout.contains("path: /spec/replicas"),
        "{stdout}"
    );
    // Not a review: a clear error naming the file.
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: admission.k8s.io/v1\nkind: AdmissionReview\n",
    )
    .expect("write");
    let out = run(&["test", &component, "--validate", &bad.display().to_string()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("bad.yaml") && stderr.contains("has no request"),
        "{stderr}"
    );
}
