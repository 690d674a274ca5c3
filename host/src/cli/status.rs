//! `wasmop status`: what an operator checks first — each plugin's version, state, reconcile
//! counts and last error, the components that run as no plugin and why they were refused, and
//! the host's readiness and leadership — read from a running
//! host's `/status` (on its `healthAddress`). In a cluster:
//! `kubectl exec deploy/wasmop -- wasmop status`, or through `kubectl port-forward`.

use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::Exit;
use wasmop_controller::status::{Snapshot, render};

/// A `/status` answer is a few KiB per plugin; anything past 16 MiB is not a wasmop host.
const MAX_RESPONSE: u64 = 16 << 20;
/// A host that does not answer within 10 s is reported as unreachable.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The exit codes, as `--help` shows them.
const EXIT_CODES: &str = "\
Exit codes:
  0  the host answered; its status is printed
  1  the host cannot be reached or its answer is not a wasmop status
  2  a usage error (bad or missing arguments)";

/// `wasmop status`'s arguments.
#[derive(Debug, clap::Args)]
#[command(after_help = EXIT_CODES)]
pub(crate) struct RawStatus {
    /// The host's probe address (its `healthAddress`).
    #[arg(
        long,
        env = "WASMOP_STATUS_ADDRESS",
        default_value = "127.0.0.1:8081",
        value_name = "ADDR"
    )]
    address: String,
    /// Print the JSON document instead of the table.
    #[arg(long)]
    json: bool,
}

/// Fetches and prints the status; exit 1 when the host cannot be reached.
pub(crate) async fn run(raw: RawStatus) -> anyhow::Result<Exit> {
    let body = tokio::time::timeout(TIMEOUT, get(&raw.address, "/status"))
        .await
        .with_context(|| format!("the host at {} did not answer within 10 s", raw.address))??;
    let snapshot: Snapshot = serde_json::from_str(&body)
        .with_context(|| format!("{} did not answer with a wasmop status", raw.address))?;
    if raw.json {
        println!("{}", serde_json::to_string_pretty(&snapshot)?);
    } else {
        print!("{}", render(&snapshot));
    }
    Ok(Exit::Success)
}

/// `GET path` over HTTP/1.0 (the host's server closes the connection after the answer).
async fn get(address: &str, path: &str) -> anyhow::Result<String> {
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .with_context(|| format!("cannot connect to the wasmop host at {address}"))?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").as_bytes())
        .await
        .with_context(|| format!("cannot send a request to {address}"))?;
    let mut response = Vec::new();
    stream
        .take(MAX_RESPONSE)
        .read_to_end(&mut response)
        .await
        .with_context(|| format!("cannot read the answer of {address}"))?;
    let text = String::from_utf8(response)
        .with_context(|| format!("the answer of {address} is not UTF-8"))?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .with_context(|| format!("the answer of {address} is not HTTP"))?;
    let status_line = head.lines().next().unwrap_or_default();
    if status_line.split_whitespace().nth(1) != Some("200") {
        bail!("{address}{path} answered `{status_line}`");
    }
    Ok(body.to_owned())
}
