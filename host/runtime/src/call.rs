//! The state of one call: what a [`wasmtime::Store`] holds while a guest runs. It carries the
//! WASI context, the resource limiter, the plugin's grants and budgets, and the cluster handle
//! the host calls use. Flags recorded here (out of memory, breached limit, denial, timeout)
//! let [`super::dispatch`] tell the outcome apart without parsing error text.
//!
//! What does not change between calls of one plugin version (its name, grants, settings and
//! limits) is built once at load and shared ([`PluginShared`]), so starting a call copies a
//! pointer rather than the grants' maps and the settings' text.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime::{Engine, ResourceLimiter};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings;
use super::engine::{
    MAX_CORE_INSTANCES_PER_COMPONENT, MAX_MEMORIES_PER_COMPONENT, MAX_TABLE_ELEMENTS,
    MAX_TABLES_PER_COMPONENT,
};
use super::lane::Demotion;
use super::lane::host_io::OnHost;
use super::outcome::{Denials, LimitKind};
use super::wasi::Captured;
use super::{Limits, PluginInner};
use wasmop_core::cluster::{Cluster, ClusterError, ObjectRef};
use wasmop_core::plugin::text::PluginText;
use wasmop_core::plugin::{PluginName, Verb};
use wasmop_core::policy::{Denial, Grants};

/// A denial quotes at most 512 bytes of each name the plugin gave (its `group/Kind`, its
/// namespace): a group is at most 253 bytes, a kind 63 and a namespace 63, so a valid one is
/// shown whole, and a longer one, which only a hostile plugin sends, cannot make each denial
/// line megabytes long.
const QUOTED_NAME_BYTES: usize = 512;

/// The error a host call returns to trap the guest when it breaches a limit. Dispatch finds
/// the breach in [`CallState`] rather than by downcasting, so wrapping cannot hide it.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} exceeded")]
pub(crate) struct LimitBreach(pub LimitKind);

/// The error the epoch callback returns when the deadline passes.
#[derive(Debug, thiserror::Error)]
#[error("deadline exceeded")]
pub(crate) struct DeadlineExceeded;

/// The error a host call returns when `describe` calls the host.
#[derive(Debug, thiserror::Error)]
#[error("`describe` must not call the host, but it called `{0}`")]
pub(crate) struct HostCallDuringDescribe(pub &'static str);

/// Memory, table and instance limits, recording a refused memory growth.
pub(crate) struct CallLimiter {
    memory: u64,
    /// The size the guest asked for when growth was refused.
    pub refused_growth: Option<usize>,
    /// The largest linear memory the call reached, in bytes (its high-water mark).
    pub peak: usize,
}

impl ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if u64::try_from(desired).unwrap_or(u64::MAX) > self.memory {
            self.refused_growth = Some(desired);
            // Trap rather than return -1 from memory.grow: a guest that ignores the failure
            // would otherwise carry on into undefined territory, and the outcome is clearer.
            wasmtime::bail!(
                "memory growth to {desired} bytes refused: the limit is {} bytes",
                self.memory
            );
        }
        self.peak = self.peak.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        MAX_CORE_INSTANCES_PER_COMPONENT as usize
    }

    fn tables(&self) -> usize {
        MAX_TABLES_PER_COMPONENT as usize
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES_PER_COMPONENT as usize
    }
}

/// What every call of one plugin version reads and none changes: built once at load.
pub(crate) struct PluginShared {
    /// The plugin's name (for the field manager and log tags).
    pub plugin: PluginName,
    /// What it may do.
    pub grants: Grants,
    /// Its settings as JSON text, returned by `config.get`.
    pub config_json: String,
    /// Its per-call limits.
    pub limits: Limits,
    /// The sources of a `wasmop dev` build, each call's stdin (see the loader's `dev`).
    pub dev_sources: Option<bytes::Bytes>,
}

/// What the host calls need: the plugin's identity, grants, settings and budgets.
pub(crate) struct HostContext {
    shared: Arc<PluginShared>,
    /// The cluster; `None` while `describe` runs.
    pub cluster: Option<Arc<dyn Cluster>>,
    /// The object being reconciled, for log tags.
    pub target: Option<ObjectRef>,
    bytes_used: u64,
    calls_used: u32,
    log_lines_used: u32,
    /// Log lines dropped after the per-call cap.
    pub log_lines_dropped: u64,
    /// The forwarded log lines, kept when the call captures them ([`crate::Call::capturing_logs`]);
    /// at most the per-call line cap of them.
    pub captured_logs: Option<Vec<crate::LogLine>>,
    /// The first denied call, if any (its plugin-given names escaped).
    pub denial: Option<Denial>,
    /// Every denied call, by verb.
    pub denials: Denials,
    /// The limit the guest breached, if any.
    pub breach: Option<LimitKind>,
    /// Whether the call is an admission review: it may read, but every write (and Event) is
    /// denied, as the `sideEffects: None` its webhook is registered with promises.
    pub reviewing: bool,
    /// Set when a `kube`/`events` call starts: the epoch callback that follows its return
    /// is the epoch having moved on while the guest waited, not computing, and does not
    /// count towards demotion.
    returned_from_cluster: bool,
}

impl HostContext {
    /// The plugin's name (for the field manager and log tags).
    pub(crate) fn plugin(&self) -> &PluginName {
        &self.shared.plugin
    }

    /// The plugin's settings as JSON text.
    pub(crate) fn config_json(&self) -> &str {
        &self.shared.config_json
    }

    /// Charges bytes the guest passed to the host.
    pub(crate) fn charge_bytes(&mut self, bytes: usize) -> wasmtime::Result<()> {
        self.bytes_used = self
            .bytes_used
            .saturating_add(u64::try_from(bytes).unwrap_or(u64::MAX));
        if self.bytes_used > self.shared.limits.host_bytes {
            let kind = LimitKind::HostBytes(self.shared.limits.host_bytes);
            self.breach = Some(kind);
            return Err(LimitBreach(kind).into());
        }
        Ok(())
    }

    /// Starts one `kube`/`events` call: counts it and charges the bytes the guest passed.
    /// An error traps the guest (a breached limit, or a host call from `describe`).
    pub(crate) fn begin(
        &mut self,
        call: &'static str,
        bytes: usize,
    ) -> wasmtime::Result<Arc<dyn Cluster>> {
        let Some(cluster) = self.cluster.clone() else {
            return Err(HostCallDuringDescribe(call).into());
        };
        self.calls_used = self.calls_used.saturating_add(1);
        self.returned_from_cluster = true;
        if self.calls_used > self.shared.limits.host_calls {
            let kind = LimitKind::HostCalls(self.shared.limits.host_calls);
            self.breach = Some(kind);
            return Err(LimitBreach(kind).into());
        }
        self.charge_bytes(bytes)?;
        Ok(cluster)
    }

    /// Checks a call against the grants. A denial is recorded (it decides the outcome) and
    /// returned as the `denied` error the guest sees.
    pub(crate) fn authorize(
        &mut self,
        verb: Verb,
        group: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<(), ClusterError> {
        self.check(None, verb, group, kind, namespace)
    }

    /// Like [`authorize`](Self::authorize), naming the call differently in the denial (for
    /// `emit-event`, which needs `get` on the object).
    pub(crate) fn authorize_as(
        &mut self,
        call: &str,
        verb: Verb,
        group: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<(), ClusterError> {
        self.check(Some(call), verb, group, kind, namespace)
    }

    fn check(
        &mut self,
        call: Option<&str>,
        verb: Verb,
        group: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<(), ClusterError> {
        let checked = if self.reviewing && (call.is_some() || verb.writes()) {
            Err(Denial {
                verb: call.map_or_else(|| verb.to_string(), str::to_owned),
                kind: if group.is_empty() {
                    format!("core/{kind}")
                } else {
                    format!("{group}/{kind}")
                },
                namespace: namespace.map(str::to_owned),
                reason: "an admission review may only read: its webhook is registered with \
                         sideEffects None"
                    .to_owned(),
            })
        } else {
            self.shared.grants.check(verb, group, kind, namespace)
        };
        if let Err(mut denial) = checked {
            if let Some(call) = call {
                denial.verb = call.to_owned();
            }
            // The kind and namespace are the plugin's: the denial quotes them in the outcome,
            // the Event and the log, so they are cut and escaped here, once.
            denial.kind = PluginText::cut(&denial.kind, QUOTED_NAME_BYTES).into_string();
            denial.namespace = denial
                .namespace
                .map(|ns| PluginText::cut(&ns, QUOTED_NAME_BYTES).into_string());
            self.denials.add(&denial.verb);
            let message = denial.to_string();
            // Logged once per call, with the count (see `log_denials`): a plugin making
            // thousands of denied calls must not make thousands of log lines.
            self.denial.get_or_insert(denial);
            return Err(ClusterError::Denied(message));
        }
        Ok(())
    }

    /// Logs the call's denials, if any: one line naming the first and how many more there
    /// were.
    pub(crate) fn log_denials(&self) {
        if let Some(first) = &self.denial {
            let total = self.denials.total();
            tracing::warn!(
                plugin = %self.shared.plugin,
                object = self.target.as_ref().map(tracing::field::display),
                denial = %first,
                more = total.saturating_sub(1),
                "denied host call"
            );
        }
    }

    /// Whether one more log line may be forwarded; counts the dropped ones.
    pub(crate) fn take_log_line(&mut self) -> bool {
        if self.log_lines_used < self.shared.limits.log_lines {
            self.log_lines_used += 1;
            true
        } else {
            self.log_lines_dropped += 1;
            false
        }
    }

    /// The cap on one log line.
    pub(crate) fn log_line_bytes(&self) -> usize {
        self.shared.limits.log_line_bytes
    }
}

/// Everything a store holds during one call.
pub(crate) struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    /// Memory and table limits.
    pub limiter: CallLimiter,
    /// What the host calls use.
    pub host: HostContext,
    /// Captured stdout and stderr.
    pub output: Captured,
    /// Whether the WASI context came from the plugin's pool and goes back to it: not one made
    /// for a call with its own clock ([`crate::Call::at`]), which later calls must not see.
    pooled_io: bool,
    /// When the call must end.
    pub deadline: Instant,
    /// Set by the epoch callback when the deadline passed.
    pub timed_out: bool,
    /// When the call moves to the low-priority lane; `None` when it never does (`describe`,
    /// a runtime without a lane).
    pub demotion: Option<Demotion>,
}

impl CallState {
    /// State for one call of `plugin`, with a WASI context from its pool; `cluster` is
    /// `None` for `describe`. Give the context back with [`CallState::recycle`].
    pub(crate) fn new(
        plugin: &PluginInner,
        cluster: Option<Arc<dyn Cluster>>,
        target: Option<ObjectRef>,
    ) -> Self {
        let mut state = Self::with_io(
            plugin.wasi.take(),
            Arc::clone(&plugin.shared),
            cluster,
            target,
        );
        state.pooled_io = true;
        state
    }

    /// State with a new WASI context (the loader has no [`PluginInner`] and no pool yet
    /// while describing).
    pub(crate) fn from_parts(
        fixed_clock: Option<std::time::SystemTime>,
        shared: Arc<PluginShared>,
        cluster: Option<Arc<dyn Cluster>>,
        target: Option<ObjectRef>,
    ) -> Self {
        let io = super::wasi::CallIo::new(
            shared.limits.output_bytes,
            fixed_clock,
            shared.dev_sources.as_ref(),
        );
        Self::with_io(io, shared, cluster, target)
    }

    fn with_io(
        io: super::wasi::CallIo,
        shared: Arc<PluginShared>,
        cluster: Option<Arc<dyn Cluster>>,
        target: Option<ObjectRef>,
    ) -> Self {
        Self {
            wasi: io.wasi,
            table: ResourceTable::new(),
            limiter: CallLimiter {
                memory: shared.limits.memory,
                refused_growth: None,
                peak: 0,
            },
            deadline: Instant::now() + shared.limits.deadline,
            host: HostContext {
                shared,
                cluster,
                target,
                bytes_used: 0,
                calls_used: 0,
                log_lines_used: 0,
                log_lines_dropped: 0,
                captured_logs: None,
                denial: None,
                denials: Denials::default(),
                breach: None,
                reviewing: false,
                returned_from_cluster: false,
            },
            output: io.output,
            pooled_io: false,
            timed_out: false,
            demotion: None,
        }
    }

    /// Counts one epoch callback (a slice of guest code, but not the first after a
    /// cluster call) towards demotion. When the call is
    /// demoted by it, its host calls' cluster operations are sent back to the host's runtime
    /// from now on, and true is returned: the callback must yield so that the caller can move
    /// the call.
    pub(crate) fn count_slice(&mut self) -> bool {
        let Some(demotion) = self.demotion.as_mut() else {
            return false;
        };
        // A call that waited for the cluster across ticks is not computing: without this, a
        // reconcile making many slow API calls would count one slice per call.
        if std::mem::take(&mut self.host.returned_from_cluster) {
            return false;
        }
        if !demotion.tick() {
            return false;
        }
        let host = demotion.host.clone();
        tracing::debug!(
            plugin = %self.host.shared.plugin,
            object = self.host.target.as_ref().map(tracing::field::display),
            "a long-running call is demoted to the low-priority lane"
        );
        self.host.cluster = self.host.cluster.take().map(|c| OnHost::wrap(c, host));
        true
    }

    /// Starts the call demoted (its plugin's last call computed long): its host calls'
    /// cluster operations go to the host's runtime from the start.
    pub(crate) fn start_demoted(&mut self) {
        let Some(demotion) = self.demotion.as_mut() else {
            return;
        };
        demotion.mark_demoted();
        let host = demotion.host.clone();
        self.host.cluster = self.host.cluster.take().map(|c| OnHost::wrap(c, host));
    }

    /// Ends the call: its WASI context and (emptied) output buffers go back to `plugin`'s
    /// pool, unless they were made for this call alone. Everything else the call held (resources, counters, the cluster handle) is
    /// dropped here.
    pub(crate) fn recycle(self, plugin: &PluginInner) {
        if !self.pooled_io {
            return;
        }
        plugin.wasi.give(super::wasi::CallIo {
            wasi: self.wasi,
            output: self.output,
        });
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// The one linker: WASI (with no ambient authority, see [`super::wasi`]) and the
/// `wasmop:plugin` imports of every contract version the host implements (their names carry
/// the version, so the versions never collide; see [`super::contract`]).
pub(crate) fn linker(engine: &Engine) -> wasmtime::Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    bindings::v0_3::PluginWithAdmission::add_to_linker::<CallState, HasSelf<CallState>>(
        &mut linker,
        |s| s,
    )?;
    bindings::v0_2::Plugin::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |s| s)?;
    bindings::v0_1::Plugin::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |s| s)?;
    Ok(linker)
}
