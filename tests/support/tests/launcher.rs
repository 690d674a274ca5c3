//! The launcher as a process: it reports a component that fails to start with that
//! component's log, and leaves no process behind however it ends.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use wasmop_testenv::ControlPlane;

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// Guards against a hang only: processes get 30 s between SIGTERM and SIGKILL.
const GONE_WITHIN: Duration = Duration::from_secs(90);

fn run_dir(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "wasmop-launcher-test-{}-{name}",
        std::process::id()
    ))
}

type Launched = (Child, BufReader<ChildStdout>, Value);

fn launch(
    dir: &Path,
    extra: &[&str],
) -> Result<Launched, Box<dyn std::error::Error + Send + Sync>> {
    let binary = ControlPlane::binary()?;
    let mut child = Command::new(binary)
        .args(["up", "--output=json", "--remove-on-exit", "--dir"])
        .arg(dir)
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let stdout = child.stdout.take().ok_or("stdout not piped")?;
    let mut replies = BufReader::new(stdout);
    let mut line = String::new();
    replies.read_line(&mut line)?;
    Ok((child, replies, serde_json::from_str(&line)?))
}

fn component_pids(state: &Value) -> Vec<u32> {
    ["etcd", "kube_apiserver", "kube_controller_manager"]
        .iter()
        .filter_map(|c| state["state"][c]["pid"].as_u64())
        .filter_map(|pid| u32::try_from(pid).ok())
        .collect()
}

fn alive(pid: u32) -> bool {
    // A zombie is dead for our purpose; it only waits for its parent to reap it.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
    })
}

fn wait_all_gone(pids: &[u32]) -> TestResult {
    let deadline = Instant::now() + GONE_WITHIN;
    while pids.iter().any(|&pid| alive(pid)) {
        if Instant::now() > deadline {
            let left: Vec<_> = pids.iter().filter(|&&p| alive(p)).collect();
            return Err(format!("processes still running: {left:?}").into());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

#[test]
fn end_of_input_stops_every_component_and_removes_the_run_directory() -> TestResult {
    let dir = run_dir("eof");
    let (mut child, _replies, ready) = launch(&dir, &[])?;
    assert_eq!(ready["ok"], true, "{ready}");
    let pids = component_pids(&ready);
    assert_eq!(pids.len(), 3, "{ready}");
    assert!(pids.iter().all(|&p| alive(p)));

    drop(child.stdin.take());
    let status = child.wait()?;
    assert!(status.success(), "launcher exited with {status}");
    wait_all_gone(&pids)?;
    assert!(!dir.exists(), "{} was not removed", dir.display());
    Ok(())
}

#[test]
fn a_killed_launcher_takes_its_components_with_it() -> TestResult {
    let dir = run_dir("sigkill");
    let (mut child, _replies, ready) = launch(&dir, &[])?;
    assert_eq!(ready["ok"], true, "{ready}");
    let pids = component_pids(&ready);
    assert_eq!(pids.len(), 3, "{ready}");

    child.kill()?; // SIGKILL: the launcher gets no chance to clean up
    child.wait()?;
    wait_all_gone(&pids)?;
    // Nothing removed the directory (the launcher was killed); this test does.
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

#[test]
fn a_component_that_fails_to_start_is_reported_with_its_log() -> TestResult {
    let dir = run_dir("bad-flag");
    let (mut child, _replies, reply) = launch(&dir, &["--apiserver-arg=--no-such-flag"])?;
    assert_eq!(reply["ok"], false, "{reply}");
    let error = reply["error"].as_str().ok_or("no error message")?;
    for expected in [
        "kube-apiserver exited before it was ready",
        "kube-apiserver.log",
        "unknown flag: --no-such-flag",
    ] {
        assert!(error.contains(expected), "missing {expected:?} in: {error}");
    }
    let status = child.wait()?;
    assert!(!status.success());
    assert!(!dir.exists(), "{} was not removed", dir.display());
    Ok(())
}

#[test]
fn commands_answer_and_bad_commands_are_named() -> TestResult {
    let dir = run_dir("commands");
    let (mut child, mut replies, ready) = launch(&dir, &[])?;
    assert_eq!(ready["ok"], true, "{ready}");
    let mut stdin = child.stdin.take().ok_or("stdin not piped")?;
    let mut ask = |command: &str| -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        writeln!(stdin, "{command}")?;
        let mut line = String::new();
        replies.read_line(&mut line)?;
        Ok(serde_json::from_str(&line)?)
    };

    let unknown = ask("frobnicate")?;
    assert_eq!(unknown["ok"], false, "{unknown}");
    assert!(
        unknown["error"]
            .as_str()
            .is_some_and(|e| e.contains("\"frobnicate\"")),
        "{unknown}"
    );
    let usage = ask("mint-user")?;
    assert_eq!(usage["ok"], false, "{usage}");
    assert!(
        usage["error"]
            .as_str()
            .is_some_and(|e| e.contains("usage: mint-user")),
        "{usage}"
    );
    let minted = ask("mint-user system:serviceaccount:x:y group-a,group-b")?;
    let kubeconfig = minted["kubeconfig"].as_str().ok_or("no kubeconfig")?;
    assert!(Path::new(kubeconfig).starts_with(&dir), "{minted}");
    let text = std::fs::read_to_string(kubeconfig)?;
    assert!(text.contains("client-certificate-data"), "{text}");
    let state = ask("state")?;
    assert_eq!(
        state["state"]["dir"],
        dir.to_string_lossy().as_ref(),
        "{state}"
    );
    let stopped = ask("stop-apiserver")?;
    assert_eq!(stopped["ok"], true, "{stopped}");
    let state = ask("state")?;
    assert_eq!(state["state"]["kube_apiserver"]["pid"], 0, "{state}");
    let again = ask("start-apiserver")?;
    assert_eq!(again["ok"], true, "{again}");
    let twice = ask("start-apiserver")?;
    assert_eq!(twice["ok"], false, "{twice}");
    let done = ask("shutdown")?;
    assert_eq!(done["ok"], true, "{done}");
    assert!(child.wait()?.success());
    Ok(())
}

#[test]
fn closing_stdin_during_start_up_stops_at_once() -> TestResult {
    let dir = run_dir("eof-at-start");
    let mut child = Command::new(ControlPlane::binary()?)
        .args(["up", "--output=json", "--remove-on-exit", "--dir"])
        .arg(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().ok_or("stdout not piped")?).read_line(&mut line)?;
    let reply: Value = serde_json::from_str(&line)?;
    assert_eq!(reply["ok"], false, "{reply}");
    // It says why, and how to run it in the background instead.
    assert!(
        reply["error"]
            .as_str()
            .is_some_and(|e| e.contains("interrupted")
                && e.contains("standard input closed")
                && e.contains("--no-stdin")),
        "{reply}"
    );
    assert!(!child.wait()?.success());
    assert!(!dir.exists(), "{} was not removed", dir.display());
    Ok(())
}
