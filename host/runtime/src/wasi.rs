//! WASI for plugins: no preopened directories, no sockets or name lookups, no inherited
//! environment or arguments, no stdin (but for the sources of a `wasmop dev` build, which each
//! of its calls reads from a stdin of its own: see the loader's `dev`). stdout and stderr go
//! to capped in-memory buffers that are forwarded to tracing (tagged with the plugin's name)
//! after each call; what exceeds the cap is dropped silently for the guest, so printing can
//! never trap it or grow host memory.
//!
//! Building a [`WasiCtx`] seeds three random generators twice over (the builder makes a
//! fresh default of itself when it builds), which is a measurable part of a call's fixed
//! cost. So each plugin keeps a small [`WasiPool`] of finished contexts with their output
//! buffers, and a call takes one and gives it back. Nothing a guest can do changes a context
//! for the next call: it holds no files, sockets, environment or arguments, the streams'
//! buffers are emptied when the output is collected, and the resources a guest opened live
//! in the call's own table, dropped with its store. What carries over is the state of the
//! insecure random generator and its seed, which WASI allows to be deterministic, and the
//! origin of the monotonic clock, which WASI leaves unspecified.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};
use wasmtime_wasi::{HostWallClock, WasiCtx, WasiCtxBuilder};

use wasmop_core::plugin::text::Escaped;
/// `text` cut to at most `cap` bytes at a character boundary (it lives beside the escaping
/// that follows every cut of a plugin's text).
pub(crate) use wasmop_core::plugin::text::cut;

/// A wall clock stopped at one instant.
struct FixedClock(Duration);

impl HostWallClock for FixedClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        self.0
    }
}

/// Builds a call's WASI context, writing stdout and stderr into `output`, with a stopped
/// wall clock when `fixed_clock` is set, and `stdin` to read when given.
fn context(output: &Captured, fixed_clock: Option<SystemTime>, stdin: Option<&Bytes>) -> WasiCtx {
    let mut b = WasiCtxBuilder::new();
    if let Some(stdin) = stdin {
        b.stdin(wasmtime_wasi::p2::pipe::MemoryInputPipe::new(stdin.clone()));
    }
    if let Some(at) = fixed_clock {
        b.wall_clock(FixedClock(
            at.duration_since(UNIX_EPOCH).unwrap_or_default(),
        ));
    }
    b.stdout(output.stdout.clone())
        .stderr(output.stderr.clone())
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    b.build()
}

/// A WASI context and the buffers its stdout and stderr write into.
pub(crate) struct CallIo {
    /// The context.
    pub wasi: WasiCtx,
    /// Its stdout and stderr.
    pub output: Captured,
}

impl CallIo {
    /// A new context whose streams keep `output_cap` bytes each, reading `stdin` when given.
    pub(crate) fn new(
        output_cap: usize,
        fixed_clock: Option<SystemTime>,
        stdin: Option<&Bytes>,
    ) -> Self {
        let output = Captured::new(output_cap);
        let wasi = context(&output, fixed_clock, stdin);
        Self { wasi, output }
    }
}

/// Finished [`CallIo`]s of one plugin version, for reuse by its later calls.
pub(crate) struct WasiPool {
    output_cap: usize,
    fixed_clock: Option<SystemTime>,
    /// What each call reads on stdin (a `wasmop dev` build's sources). A stdin is read once,
    /// so with one every call gets a new context and none is kept.
    stdin: Option<Bytes>,
    /// At most the runtime's concurrency: no more calls than that hold one at once.
    max: usize,
    // A std mutex: held only to push or pop, never across an await.
    free: Mutex<Vec<CallIo>>,
}

impl WasiPool {
    /// An empty pool of contexts with `output_cap`-byte streams, reading `stdin` when given,
    /// keeping at most `max`.
    pub(crate) fn new(
        output_cap: usize,
        fixed_clock: Option<SystemTime>,
        stdin: Option<Bytes>,
        max: usize,
    ) -> Self {
        Self {
            output_cap,
            fixed_clock,
            stdin,
            max,
            free: Mutex::new(Vec::new()),
        }
    }

    /// A context for one call: a kept one, or a new one when none is free.
    pub(crate) fn take(&self) -> CallIo {
        if self.stdin.is_some() {
            return CallIo::new(self.output_cap, self.fixed_clock, self.stdin.as_ref());
        }
        let kept = self
            .free
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop();
        kept.unwrap_or_else(|| CallIo::new(self.output_cap, self.fixed_clock, None))
    }

    /// Returns a context after its call. Its output must have been taken; what is left is
    /// dropped, so no call ever sees another's output.
    pub(crate) fn give(&self, io: CallIo) {
        if self.stdin.is_some() {
            return;
        }
        let _ = io.output.take();
        let mut free = self
            .free
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if free.len() < self.max {
            free.push(io);
        }
    }
}

#[derive(Default)]
struct Buffer {
    kept: Vec<u8>,
    dropped: u64,
}

/// One capped output stream. Clones share the buffer.
#[derive(Clone)]
pub(crate) struct CappedPipe {
    cap: usize,
    // A std mutex: held only to copy bytes, never across an await.
    buffer: Arc<Mutex<Buffer>>,
}

impl CappedPipe {
    fn new(cap: usize) -> Self {
        Self {
            cap,
            buffer: Arc::default(),
        }
    }

    fn push(&self, bytes: &[u8]) {
        let mut b = self
            .buffer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let room = self.cap.saturating_sub(b.kept.len());
        let take = room.min(bytes.len());
        b.kept.extend_from_slice(&bytes[..take]);
        b.dropped += (bytes.len() - take) as u64;
    }

    /// The kept bytes and how many were dropped.
    fn take(&self) -> (Vec<u8>, u64) {
        let mut b = self
            .buffer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (std::mem::take(&mut b.kept), std::mem::take(&mut b.dropped))
    }
}

/// Any write size is accepted (and cut); this is what the guest is told it may write.
const WRITE_BUDGET: usize = 64 << 10;

impl IsTerminal for CappedPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedPipe {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CappedPipe {
    async fn ready(&mut self) {}
}

impl OutputStream for CappedPipe {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(WRITE_BUDGET)
    }
}

impl tokio::io::AsyncWrite for CappedPipe {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// A call's stdout and stderr.
pub(crate) struct Captured {
    stdout: CappedPipe,
    stderr: CappedPipe,
}

/// What a call printed.
#[derive(Debug, Default)]
pub(crate) struct Printed {
    /// stdout, lossily decoded.
    pub stdout: String,
    /// stderr, lossily decoded.
    pub stderr: String,
    /// Bytes dropped over the cap (both streams).
    pub dropped: u64,
}

impl Printed {
    /// The last non-empty stderr line (where a Rust panic message ends up), if any.
    pub(crate) fn last_stderr_line(&self) -> Option<&str> {
        self.stderr
            .lines()
            .map(str::trim)
            .rfind(|l| !l.is_empty() && !l.starts_with("note:"))
    }
}

impl Captured {
    /// Two empty streams of `cap` bytes each.
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            stdout: CappedPipe::new(cap),
            stderr: CappedPipe::new(cap),
        }
    }

    /// Takes what was printed so far.
    pub(crate) fn take(&self) -> Printed {
        let (out, d1) = self.stdout.take();
        let (err, d2) = self.stderr.take();
        Printed {
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
            dropped: d1 + d2,
        }
    }
}

/// Forwards what a call printed to tracing, one event per line, cut at `line_cap` bytes and
/// escaped (a carriage return or escape sequence inside a line stays on it, visibly).
pub(crate) fn forward(printed: &Printed, plugin: &str, line_cap: usize) {
    for line in printed.stdout.lines().filter(|l| !l.is_empty()) {
        tracing::info!(
            plugin,
            stream = "stdout",
            "{}",
            Escaped(cut(line, line_cap))
        );
    }
    for line in printed.stderr.lines().filter(|l| !l.is_empty()) {
        tracing::warn!(
            plugin,
            stream = "stderr",
            "{}",
            Escaped(cut(line, line_cap))
        );
    }
    if printed.dropped > 0 {
        tracing::warn!(
            plugin,
            dropped_bytes = printed.dropped,
            "plugin output over the cap was dropped"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_over_the_cap_is_dropped_and_counted() {
        let c = Captured::new(8);
        c.stdout.push(b"0123456789");
        c.stderr.push(b"ab");
        let p = c.take();
        assert_eq!(p.stdout, "01234567");
        assert_eq!(p.stderr, "ab");
        assert_eq!(p.dropped, 2);
    }

    #[test]
    fn a_reused_context_starts_with_empty_output() {
        let pool = WasiPool::new(8, None, None, 1);
        let io = pool.take();
        io.output.stdout.push(b"secret");
        io.output.stderr.push(b"0123456789");
        pool.give(io);
        let again = pool.take();
        let p = again.output.take();
        assert_eq!(
            (p.stdout.as_str(), p.stderr.as_str(), p.dropped),
            ("", "", 0)
        );
    }

    #[test]
    fn the_pool_keeps_at_most_its_maximum() {
        let pool = WasiPool::new(8, None, None, 1);
        let (a, b) = (pool.take(), pool.take());
        pool.give(a);
        pool.give(b);
        assert_eq!(pool.free.lock().map(|f| f.len()).unwrap_or_default(), 1);
    }

    #[test]
    fn a_pool_with_a_stdin_keeps_no_context() {
        let pool = WasiPool::new(8, None, Some(Bytes::from_static(b"sources")), 4);
        let (a, b) = (pool.take(), pool.take());
        pool.give(a);
        pool.give(b);
        assert_eq!(pool.free.lock().map(|f| f.len()).unwrap_or_default(), 0);
    }

    #[test]
    fn cut_respects_char_boundaries() {
        assert_eq!(cut("héllo", 2), "h");
        assert_eq!(cut("abc", 10), "abc");
    }

    #[test]
    fn last_stderr_line_skips_notes_and_blanks() {
        let p = Printed {
            stderr: "thread panicked at src/lib.rs:3:5:\nboom\nnote: run with RUST_BACKTRACE\n\n"
                .into(),
            ..Printed::default()
        };
        assert_eq!(p.last_stderr_line(), Some("boom"));
    }
}
