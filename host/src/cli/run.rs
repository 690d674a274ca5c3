//! `wasmop run`: the controller host against a cluster (a kubeconfig or the in-cluster
//! config). Logging is set up here, once the configuration says which format to use.

use crate::config::LogFormat;
use crate::config::flags::RunArgs;

use super::Exit;

/// The exit codes, as `--help` shows them.
const EXIT_CODES: &str = "\
Exit codes:
  0  the host stopped on SIGINT or SIGTERM
  1  it cannot start (its config, the cluster) or stopped on an error (the reason is logged)
  2  a usage error (bad or missing arguments)";

/// `wasmop run`'s arguments: the config file and the flags that override it.
#[derive(Debug, clap::Args)]
#[command(after_help = EXIT_CODES)]
pub(crate) struct RawRun {
    #[command(flatten)]
    args: RunArgs,
}

/// Loads the configuration, sets up logging and runs the host until SIGINT/SIGTERM.
pub(crate) async fn run(raw: RawRun) -> anyhow::Result<Exit> {
    let config = raw.args.load().await?;
    init_logging(config.log_format);
    tracing::info!(
        sources = ?config.sources,
        concurrency = config.concurrency,
        resync_s = config.resync_period.map(|d| d.as_secs()),
        namespace = %config.namespace,
        leader_election = config.leader_election.is_some(),
        shutdown_timeout_s = config.shutdown_timeout.as_secs(),
        "wasmop run starting"
    );
    crate::host::run(config).await?;
    Ok(Exit::Success)
}

/// Logs to stderr, filtered by `WASMOP_LOG` (default `info`), as text or one JSON object per
/// line with the current span's fields (plugin, object.ref, plugin.digest) on every line.
/// Text is coloured only on a terminal ([`super::colour`]).
fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("WASMOP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(super::colour())
        .with_env_filter(filter);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .init(),
    }
}
