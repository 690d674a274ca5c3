//! The `wasmop` command line. Arguments are parsed by clap into `Raw*` structs, validated
//! into what the commands use, and errors are printed with their whole chain.
//!
//! Exit codes (each command's `--help` lists its own): 0 success; 1 an error (a file that
//! cannot be read or loaded, a host that cannot start or be reached); 2 a usage error (clap's
//! code: bad or missing arguments) or, for `test --expect`, a report that differs from the
//! golden file; 3 a `test` call that did not succeed (without `--expect`).

mod check;
mod compile;
mod dev;
mod new;
mod run;
mod status;
mod test;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// What every command reads from its environment, as `wasmop --help` shows it.
const ENVIRONMENT: &str = "\
Environment:
  WASMOP_LOG  what is logged to stderr, as a tracing filter: a level (error, warn, info,
              debug, trace) or directives such as `warn,wasmop_runtime=debug`. Default:
              `info` for `run`, `warn` for the other commands. RUST_LOG is not read.
              Plugin log lines are logged at the level the plugin gave them.
  NO_COLOR    set and not empty: no colour on stderr. Colour is used only when stderr
              is a terminal.";

/// Runs reconcile logic as sandboxed WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "wasmop", version, about, after_help = ENVIRONMENT)]
struct Raw {
    #[command(subcommand)]
    command: RawCommand,
}

#[derive(Debug, Subcommand)]
enum RawCommand {
    /// Validate a plugin component and print what it declares.
    Check(check::RawCheck),
    /// Run one reconcile offline against an in-memory cluster and print the writes.
    Test(test::RawTest),
    /// Run the controller host against a cluster (kubeconfig or in-cluster config).
    Run(run::RawRun),
    /// Show a running host's plugins: version, state, reconcile counts, last error.
    Status(status::RawStatus),
    /// Build a plugin project, run it on a cluster and reload it on every saved change.
    Dev(dev::RawDev),
    /// Write a new plugin project: the plugin, its CRD, a sample, a golden case, a README.
    New(new::RawNew),
    /// Compile plugins ahead of time, for this machine or another architecture, into a
    /// directory a host loads them from (`precompiledDirectory`).
    Compile(compile::RawCompile),
}

/// Options shared by commands that load a plugin.
#[derive(Debug, Clone, clap::Args)]
struct RawRuntime {
    /// Cache precompiled artefacts in this directory.
    #[arg(long, env = "WASMOP_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// Load artefacts made by `wasmop compile` from this directory instead of compiling.
    #[arg(long, env = "WASMOP_PRECOMPILED_DIR", value_name = "DIR")]
    precompiled_dir: Option<PathBuf>,
}

impl RawRuntime {
    /// `config` with these directories.
    fn apply(self, mut config: wasmop_runtime::RuntimeConfig) -> wasmop_runtime::RuntimeConfig {
        if let Some(dir) = self.cache_dir {
            config = config.cache_dir(dir);
        }
        if let Some(dir) = self.precompiled_dir {
            config = config.precompiled_dir(dir);
        }
        config
    }
}

/// What a command asks `main` to exit with.
pub(crate) enum Exit {
    /// Everything as expected.
    Success,
    /// The report differs from the golden file.
    GoldenMismatch,
    /// The plugin call did not succeed.
    PluginFailed,
}

/// Whether logs on stderr are coloured: only on a terminal, and not with `NO_COLOR` set. A
/// redirected stderr (a file, a pipe, a pod's log) gets no escape sequences, so that the only
/// backslash escapes in it are those of a plugin's escaped text ([`wasmop_core::plugin::text`]).
fn colour() -> bool {
    use std::io::IsTerminal as _;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Parses the command line, runs the command, and maps the result to an exit code.
pub fn main() -> ExitCode {
    let raw = Raw::parse();
    // `run` sets up its own logging once its config says which format to use.
    // `dev` shows what a plugin author watches: its reconciles, writes, log lines and loads.
    if !matches!(raw.command, RawCommand::Run(_)) {
        let default = match raw.command {
            RawCommand::Dev(_) => dev::log_filter(),
            _ => "warn",
        };
        tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_ansi(colour())
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_env("WASMOP_LOG")
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default)),
            )
            .init();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match raw.command {
            RawCommand::Check(c) => check::run(c).await,
            RawCommand::Test(t) => test::run(t).await,
            RawCommand::Run(r) => run::run(r).await,
            RawCommand::Status(s) => status::run(s).await,
            RawCommand::Compile(c) => compile::run(c).await,
            RawCommand::New(n) => new::run(n).await,
            RawCommand::Dev(d) => dev::run(d).await,
        }
    });
    match result {
        Ok(Exit::Success) => ExitCode::SUCCESS,
        Ok(Exit::GoldenMismatch) => ExitCode::from(2),
        Ok(Exit::PluginFailed) => ExitCode::from(3),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
