//! How `wasmop dev` builds a project: the language it is in, and each language's build (cargo
//! in the quick dev profile; a Python project's venv and `build.py --dev`; a Go project's
//! `build`), whose output and errors go to stderr as they come.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context as _, bail};
use tokio::io::AsyncBufReadExt as _;

/// The languages `dev` builds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Lang {
    /// A Cargo.toml: a crate that builds a component for wasm32-wasip2.
    Rust,
    /// An app.py with the build.py `wasmop new --lang python` writes.
    Python,
    /// A go.mod with the `build` script `wasmop new --lang go` writes.
    Go,
}

impl Lang {
    /// The language of the project in `dir`.
    pub(super) fn of(dir: &Path) -> anyhow::Result<Self> {
        if dir.join("Cargo.toml").is_file() {
            Ok(Self::Rust)
        } else if dir.join("app.py").is_file() && dir.join("build.py").is_file() {
            Ok(Self::Python)
        } else if dir.join("go.mod").is_file() && dir.join("build").is_file() {
            Ok(Self::Go)
        } else {
            bail!(
                "{} is no plugin project wasmop dev knows: it has no Cargo.toml (Rust), no \
                 app.py and build.py (Python), and no go.mod and build (Go); `wasmop new NAME` \
                 makes one",
                dir.display()
            )
        }
    }
}

/// Builds the plugin in `project` and returns the component. The build's progress and errors
/// go to stderr as they come.
pub(super) async fn build(project: &Path, lang: Lang) -> anyhow::Result<PathBuf> {
    match lang {
        Lang::Rust => cargo_build(project).await,
        Lang::Python => {
            let python = python_venv(project).await?;
            if builds_for_dev(project) {
                script_build(project, &python, &["build.py", "--dev"], "build.py --dev").await
            } else {
                script_build(project, &python, &["build.py"], "build.py").await
            }
        }
        Lang::Go => script_build(project, &project.join("build"), &[], "./build").await,
    }
}

/// Whether a Python project's build.py makes dev builds (`--dev`: the dev runner and the
/// project's sources, which the host runs without compiling anything again; see
/// `wasmop_runtime::RuntimeConfig::dev_sources`). A project written by an older `wasmop new`
/// is built whole on every edit instead.
fn builds_for_dev(project: &Path) -> bool {
    std::fs::read_to_string(project.join("build.py")).is_ok_and(|s| s.contains("\"--dev\""))
}

/// The file in a Python project's `.venv` recording the requirements it was set up from.
const VENV_STAMP: &str = ".wasmop-requirements";

/// Makes the Python project's `.venv` and installs its `requirements.txt` into it, unless it
/// was set up from the same requirements already.
async fn python_venv(project: &Path) -> anyhow::Result<PathBuf> {
    let requirements = project.join("requirements.txt");
    let wanted = tokio::fs::read(&requirements)
        .await
        .with_context(|| format!("cannot read {}", requirements.display()))?;
    let venv = project.join(".venv");
    let python = venv.join("bin/python");
    let stamp = venv.join(VENV_STAMP);
    if python.exists() && tokio::fs::read(&stamp).await.ok().as_deref() == Some(&wanted[..]) {
        return Ok(python);
    }
    let run = |program: PathBuf, args: &[&str], what: &str| {
        let what = what.to_owned();
        let mut command = tokio::process::Command::new(&program);
        command
            .args(args)
            .current_dir(project)
            .stdin(Stdio::null())
            .stdout(std::io::stderr())
            .kill_on_drop(true);
        async move {
            let status = command
                .status()
                .await
                .with_context(|| format!("cannot run {}", program.display()))?;
            if !status.success() {
                bail!("{what} failed ({status})");
            }
            anyhow::Ok(())
        }
    };
    if !python.exists() {
        tracing::info!("making {}", venv.display());
        run(
            "python3".into(),
            &["-m", "venv", ".venv"],
            "python3 -m venv .venv",
        )
        .await?;
    }
    tracing::info!("installing requirements.txt into .venv");
    run(
        venv.join("bin/pip"),
        &[
            "install",
            "--disable-pip-version-check",
            "-r",
            "requirements.txt",
        ],
        "pip install -r requirements.txt",
    )
    .await?;
    tokio::fs::write(&stamp, &wanted)
        .await
        .with_context(|| format!("cannot write {}", stamp.display()))?;
    Ok(python)
}

/// Builds a Python or Go project with its build script (`what`: `program args`), which
/// prints the component's path last on stdout.
async fn script_build(
    project: &Path,
    program: &Path,
    args: &[&str],
    what: &str,
) -> anyhow::Result<PathBuf> {
    // Spawned and waited for, not `output()`: tokio's `output()` pipes stderr too, and the
    // build's progress and errors must reach the user.
    let output = tokio::process::Command::new(program)
        .args(args)
        .current_dir(project)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot run {}", program.display()))?
        .wait_with_output()
        .await
        .with_context(|| format!("cannot run {}", program.display()))?;
    if !output.status.success() {
        bail!("{what} failed ({})", output.status);
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let component = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| project.join(l.trim()))
        .with_context(|| format!("{what} printed no component path on stdout"))?;
    if !component.is_file() {
        bail!(
            "{what} printed {}, which is not a file",
            component.display()
        );
    }
    Ok(component)
}

/// Builds a Rust project and returns the component cargo wrote.
async fn cargo_build(project: &Path) -> anyhow::Result<PathBuf> {
    let mut child =
        tokio::process::Command::new(std::env::var_os("CARGO").unwrap_or("cargo".into()))
            .args([
                "build",
                "--target",
                "wasm32-wasip2",
                "--message-format",
                "json-render-diagnostics",
            ])
            .current_dir(project)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context("cannot run cargo")?;
    let stdout = child.stdout.take().context("cargo's stdout")?;
    let manifest = project.join("Cargo.toml");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let mut component = None;
    while let Some(line) = lines.next_line().await.context("reading cargo's output")? {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if message["reason"] != "compiler-artifact"
            || message["manifest_path"].as_str().map(Path::new) != Some(manifest.as_path())
        {
            continue;
        }
        if let Some(files) = message["filenames"].as_array() {
            component = files
                .iter()
                .filter_map(|f| f.as_str())
                .find(|f| f.ends_with(".wasm"))
                .map(PathBuf::from)
                .or(component);
        }
    }
    let status = child.wait().await.context("waiting for cargo")?;
    if !status.success() {
        bail!("cargo build failed ({status})");
    }
    component.with_context(|| {
        format!(
            "cargo built no .wasm for {}: is it a `crate-type = [\"cdylib\"]` library?",
            manifest.display()
        )
    })
}
