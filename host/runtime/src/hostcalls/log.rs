//! `wasmop:plugin/log`: plugin log lines into the host's tracing, tagged with the plugin and
//! the object. Lines are cut at the per-line cap; after the per-call line cap they are
//! counted and dropped. Every byte counts against the per-call host-bytes cap. A line is
//! escaped ([`Escaped`]) when it is written, so one `log` call is one line in either log
//! format, whatever it holds. A call made [`capturing_logs`](crate::Call::capturing_logs)
//! (offline runs) also keeps each forwarded line, escaped the same way, for its report.

use super::wit::log::{Host, Level};
use crate::call::CallState;
use crate::request::{LogLevel, LogLine};
use crate::wasi::cut;
use wasmop_core::plugin::text::Escaped;

impl Host for CallState {
    async fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        self.host.charge_bytes(message.len())?;
        if !self.host.take_log_line() {
            return Ok(());
        }
        // Escaped only if the line is enabled: `Escaped` formats when the event is written.
        let line = Escaped(cut(&message, self.host.log_line_bytes()));
        let plugin = self.host.plugin().as_str();
        let object = self
            .host
            .target
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        match level {
            Level::Trace => tracing::trace!(plugin, object, "{line}"),
            Level::Debug => tracing::debug!(plugin, object, "{line}"),
            Level::Info => tracing::info!(plugin, object, "{line}"),
            Level::Warn => tracing::warn!(plugin, object, "{line}"),
            Level::Error => tracing::error!(plugin, object, "{line}"),
        }
        // Offline runs show the lines in their report, escaped as the log shows them.
        if let Some(logs) = self.host.captured_logs.as_mut() {
            logs.push(LogLine {
                level: match level {
                    Level::Trace => LogLevel::Trace,
                    Level::Debug => LogLevel::Debug,
                    Level::Info => LogLevel::Info,
                    Level::Warn => LogLevel::Warn,
                    Level::Error => LogLevel::Error,
                },
                message: line.to_string(),
            });
        }
        Ok(())
    }
}
