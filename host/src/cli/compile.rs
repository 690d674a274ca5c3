//! `wasmop compile`: compiles plugins ahead of time, for this machine or for another
//! architecture, into a directory a host loads them from instead of compiling
//! (`precompiledDirectory`, or `--precompiled-dir` for `check` and `test`). Each plugin is
//! first loaded here as a host would (so a bad file is refused with its reason), then compiled
//! for the target once per allocator mode (see [`wasmop_runtime::precompiled`]).

use std::path::PathBuf;

use anyhow::Context as _;

use super::Exit;
use crate::config::Config;
use wasmop_runtime::precompiled;
use wasmop_runtime::{AllocatorChoice, LoadOptions, Runtime, RuntimeConfig};

/// The exit codes, as `--help` shows them.
const EXIT_CODES: &str = "\
Exit codes:
  0  every artefact was written
  1  a plugin cannot be read or compiled, or the directory cannot be written
  2  a usage error (bad or missing arguments)";

/// Arguments of `wasmop compile`.
#[derive(Debug, clap::Args)]
#[command(after_help = EXIT_CODES)]
pub(crate) struct RawCompile {
    /// The plugin components (.wasm).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// The directory to write the artefacts to (created if missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// The target triple, e.g. `aarch64-unknown-linux-musl`: artefacts for any machine of that
    /// architecture (its baseline CPU features). Default: this machine, with its own CPU
    /// features.
    #[arg(long)]
    target: Option<String>,
    /// The host configuration the artefacts are for: its memory limits shape the code, so
    /// compile with the config the host runs with (default: the default settings).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

/// Runs `wasmop compile`.
pub(crate) async fn run(raw: RawCompile) -> anyhow::Result<Exit> {
    let host = match &raw.config {
        Some(path) => {
            let parsed = Config::read_raw(path).await?;
            Config::from_raw(parsed, None)
                .with_context(|| format!("{} is not a valid host configuration", path.display()))?
                .runtime_config()
        }
        None => RuntimeConfig::default(),
    };
    // Loading here validates the component and runs `describe`; one instance at a time.
    let checker = Runtime::new(
        RuntimeConfig::default()
            .concurrency(1)
            .allocator(AllocatorChoice::OnDemand),
    )
    .context("cannot start the plugin runtime")?;
    for file in &raw.files {
        // Read and (if compressed) decompressed once: the check below and the artefact are of
        // the component itself, so its digest is the same as the plain file's.
        let bytes = tokio::fs::read(file)
            .await
            .with_context(|| format!("cannot read {}", file.display()))?;
        let component = wasmop_runtime::packed::unpack(bytes.into())
            .with_context(|| format!("{} is not a usable plugin", file.display()))?;
        let plugin = checker
            .load(component.clone(), LoadOptions::default())
            .await
            .with_context(|| format!("{} is not a usable plugin", file.display()))?;
        let bytes = component.into_bytes();
        let digest = plugin.digest();
        let (config, target, out) = (host.clone(), raw.target.clone(), raw.out.clone());
        let written = tokio::task::spawn_blocking(move || {
            precompiled::compile(&config, target.as_deref(), &bytes, &digest, &out)
        })
        .await
        .context("the compile task failed")?
        .with_context(|| format!("cannot precompile {}", file.display()))?;
        println!(
            "{}: plugin {} {} (sha256:{}) for {}",
            file.display(),
            plugin.name(),
            wasmop_core::plugin::text::PluginText::new(plugin.version()),
            plugin.digest().short(),
            raw.target.as_deref().unwrap_or("this machine")
        );
        for w in written {
            println!(
                "  {} allocator: {} ({} bytes, {} ms)",
                w.mode.label(),
                w.path.display(),
                w.size,
                w.compile_time.as_millis()
            );
        }
    }
    Ok(Exit::Success)
}
