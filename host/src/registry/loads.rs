//! The registry's loads in flight: one background task per origin, each with a generation,
//! whose results come back over a channel to be settled by the registry's loop
//! ([`Registry::loaded`], which offers them as [`Registry::apply`] once did in turn).
//!
//! # Guarantees
//! - At most one load per origin is current: starting another (a newer update of the same
//!   origin) aborts the older one and forgets any result of it not yet settled; a result of
//!   an older generation that was already on its way is dropped on arrival
//!   ([`Loads::arrived`]), so an older version is never settled after a newer one.
//! - [`Loads::cancel`] (the origin left its source) does the same with no successor.
//! - A result is handed out ([`Loads::settleable`]) as soon as it arrives, except that one
//!   the caller says must wait (a plugin new to the host) is held while any origin before it
//!   is still loading, since that one may declare the same name and has precedence. Results
//!   held back are handed out in origin order once nothing before them loads.
//!
//! # Cancellation
//! Dropping [`Loads`] (or [`Loads::abort_all`]) aborts every load in flight.

use std::collections::BTreeMap;
use std::future::Future;

use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinError};

use super::{Origin, Registry};
use wasmop_controller::source::Component;
use wasmop_core::plugin::Digest;
use wasmop_runtime::{LoadError, LoadOptions, Plugin};

/// A finished load, as sent by its task.
pub(super) struct Loaded<T> {
    origin: Origin,
    generation: u64,
    digest: Digest,
    result: Result<T, JoinError>,
}

struct Pending {
    generation: u64,
    digest: Digest,
    task: AbortHandle,
}

/// The loads in flight and the results not yet settled. `T` is a load's result (a
/// `Result<Plugin, LoadError>` in the registry; anything in tests).
pub(super) struct Loads<T> {
    generation: u64,
    pending: BTreeMap<Origin, Pending>,
    /// Results that arrived, current, not yet handed out.
    ready: BTreeMap<Origin, (Digest, Result<T, JoinError>)>,
    done: mpsc::UnboundedSender<Loaded<T>>,
    results: mpsc::UnboundedReceiver<Loaded<T>>,
}

impl<T: Send + 'static> Loads<T> {
    /// No loads.
    pub(super) fn new() -> Self {
        let (done, results) = mpsc::unbounded_channel();
        Self {
            generation: 0,
            pending: BTreeMap::new(),
            ready: BTreeMap::new(),
            done,
            results,
        }
    }

    /// Starts `load` (of the version `digest`) for `origin` in the background, superseding
    /// the origin's load in flight or result not yet settled. A load that panics ends with
    /// its [`JoinError`], so that it does not stay in flight for ever.
    pub(super) fn start(
        &mut self,
        origin: Origin,
        digest: Digest,
        load: impl Future<Output = T> + Send + 'static,
    ) {
        self.cancel(&origin);
        self.generation += 1;
        let generation = self.generation;
        let done = self.done.clone();
        let key = origin.clone();
        // The load runs in a task of its own, so that a panic is reported by its handle.
        let load = tokio::spawn(load);
        let task = load.abort_handle();
        tokio::spawn(async move {
            let _ = done.send(Loaded {
                origin: key,
                generation,
                digest,
                result: load.await,
            });
        });
        self.pending.insert(
            origin,
            Pending {
                generation,
                digest,
                task,
            },
        );
    }

    /// The version loading (or loaded and not yet settled) at `origin`.
    pub(super) fn digest(&self, origin: &Origin) -> Option<Digest> {
        self.pending
            .get(origin)
            .map(|p| p.digest)
            .or_else(|| self.ready.get(origin).map(|(digest, _)| *digest))
    }

    /// Aborts the load of `origin` and forgets a result of it not yet settled.
    pub(super) fn cancel(&mut self, origin: &Origin) {
        if let Some(pending) = self.pending.remove(origin) {
            pending.task.abort();
        }
        self.ready.remove(origin);
    }

    /// The origins of `source` with a load in flight or a result not yet settled.
    pub(super) fn origins(&self, source: usize) -> Vec<Origin> {
        let mut origins: Vec<Origin> = self
            .pending
            .keys()
            .chain(self.ready.keys())
            .cloned()
            .collect();
        origins.retain(|o| o.source == source);
        origins.sort();
        origins.dedup();
        origins
    }

    /// The next finished load (current or not: see [`Self::arrived`]). Never ends on its own.
    pub(super) async fn next(&mut self) -> Loaded<T> {
        match self.results.recv().await {
            Some(loaded) => loaded,
            // `self` holds a sender, so the channel never closes.
            None => std::future::pending().await,
        }
    }

    /// Takes in a finished load; whether it was current (an older generation is dropped).
    pub(super) fn arrived(&mut self, loaded: Loaded<T>) -> bool {
        let current = self
            .pending
            .get(&loaded.origin)
            .is_some_and(|p| p.generation == loaded.generation);
        if current {
            self.pending.remove(&loaded.origin);
            self.ready
                .insert(loaded.origin, (loaded.digest, loaded.result));
        }
        current
    }

    /// The next result to settle, if any, in origin order: `waits(result)` says the result may
    /// only settle once no earlier origin loads (a failed task never waits). Each arrival is
    /// settled at once, so results settle in arrival order but for those held back.
    pub(super) fn settleable(
        &mut self,
        waits: impl Fn(&T) -> bool,
    ) -> Option<(Origin, Digest, Result<T, JoinError>)> {
        let first_loading = self.pending.keys().next();
        let origin = self
            .ready
            .iter()
            .find(|(origin, (_, result))| {
                !(result.as_ref().is_ok_and(&waits)
                    && first_loading.is_some_and(|first| first < *origin))
            })
            .map(|(origin, _)| origin.clone())?;
        let (digest, result) = self.ready.remove(&origin)?;
        Some((origin, digest, result))
    }

    /// Whether nothing is loading or waiting to be settled.
    pub(super) fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.ready.is_empty()
    }

    /// Aborts every load in flight.
    pub(super) fn abort_all(&mut self) {
        for (_, pending) in std::mem::take(&mut self.pending) {
            pending.task.abort();
        }
        self.ready.clear();
    }
}

impl<T> Drop for Loads<T> {
    fn drop(&mut self) {
        for pending in self.pending.values() {
            pending.task.abort();
        }
    }
}

impl Registry {
    /// Drops the compilations started ahead that no load took, once nothing loads (a load
    /// in flight may not have taken its own yet).
    pub(super) fn discard_ahead(&self) {
        if self.loads.is_idle() {
            self.runtime.discard_ahead();
        }
    }

    /// Takes in a finished load, and settles what may be settled: a result of an older
    /// generation is dropped; a plugin new to the host waits for the loads of the origins
    /// before its own, which may declare the same name.
    pub(super) async fn loaded(&mut self, loaded: Loaded<Result<Plugin, LoadError>>) {
        if !self.loads.arrived(loaded) {
            return;
        }
        loop {
            let live = &self.live;
            let waits = |probe: &Result<Plugin, LoadError>| {
                probe.as_ref().is_ok_and(|p| !live.contains_key(p.name()))
            };
            let Some((origin, digest, probe)) = self.loads.settleable(waits) else {
                break;
            };
            let probe = probe.unwrap_or_else(|e| Err(LoadError::Task(e)));
            self.offer(origin, digest, probe).await;
        }
        self.promote_shadowed().await;
        self.discard_ahead();
    }

    /// Starts loading `component`, new at `origin`, in the background.
    pub(super) fn start_load(&mut self, origin: Origin, component: Component) {
        let runtime = self.runtime.clone();
        let digest = component.digest();
        let source = self.sources[origin.source].to_string();
        match self.loads.digest(&origin) {
            Some(older) => {
                tracing::info!(key = origin.key, %source, digest = %digest.short(), superseding = %older.short(), "loading a new plugin version; the one still loading here is dropped");
            }
            None => {
                tracing::info!(key = origin.key, %source, digest = %digest.short(), "loading a new plugin version");
            }
        }
        let load = async move {
            runtime
                .load(component.content, LoadOptions::default())
                .await
        };
        self.loads.start(origin, digest, load);
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::oneshot;

    use super::*;

    fn origin(key: &str) -> Origin {
        Origin {
            source: 0,
            key: key.into(),
        }
    }

    fn digest(bytes: &[u8]) -> Digest {
        Digest::of(bytes)
    }

    /// Takes in finished loads until one is current, and hands out what may settle.
    async fn settle(loads: &mut Loads<&'static str>) -> Option<(Origin, &'static str)> {
        loop {
            let loaded = loads.next().await;
            if loads.arrived(loaded) {
                let (origin, _, result) = loads.settleable(|_| false)?;
                return Some((origin, result.unwrap_or("panicked")));
            }
        }
    }

    #[tokio::test]
    async fn a_newer_load_of_an_origin_aborts_the_older_and_its_result_never_settles() {
        let mut loads = Loads::new();
        let (mut older_done, older) = oneshot::channel::<()>();
        loads.start(origin("a.wasm"), digest(b"v1"), async move {
            let _ = older.await;
            "v1"
        });
        loads.start(origin("a.wasm"), digest(b"v2"), async { "v2" });
        // The older load was aborted: its end of the channel is gone.
        older_done.closed().await;
        assert_eq!(settle(&mut loads).await, Some((origin("a.wasm"), "v2")));
        assert!(loads.is_idle());
    }

    #[tokio::test]
    async fn an_older_result_already_on_its_way_is_dropped_on_arrival() {
        let mut loads = Loads::new();
        loads.start(origin("a.wasm"), digest(b"v1"), async { "v1" });
        // The older load has finished and sent its result before the newer one starts.
        let older = loads.next().await;
        loads.start(origin("a.wasm"), digest(b"v2"), std::future::pending());
        assert!(!loads.arrived(older), "an older generation is dropped");
        assert!(loads.settleable(|_| false).is_none());
        assert_eq!(loads.digest(&origin("a.wasm")), Some(digest(b"v2")));
    }

    #[tokio::test]
    async fn a_load_does_not_wait_for_another_origins_load() {
        let mut loads = Loads::new();
        // `a` loads for ever (a looping describe); `b` finishes and settles meanwhile.
        loads.start(origin("a.wasm"), digest(b"a"), std::future::pending());
        loads.start(origin("b.wasm"), digest(b"b"), async { "b" });
        assert_eq!(settle(&mut loads).await, Some((origin("b.wasm"), "b")));
        assert_eq!(loads.origins(0), vec![origin("a.wasm")]);
        loads.cancel(&origin("a.wasm"));
        assert!(loads.is_idle());
    }

    #[tokio::test]
    async fn a_new_plugin_waits_for_the_earlier_origins_loads_and_they_settle_in_origin_order() {
        let mut loads = Loads::new();
        let (first_go, first) = oneshot::channel::<()>();
        loads.start(origin("a.wasm"), digest(b"a"), async move {
            let _ = first.await;
            "a"
        });
        loads.start(origin("b.wasm"), digest(b"b"), async { "b" });
        let b = loads.next().await;
        assert!(loads.arrived(b));
        assert!(
            loads.settleable(|_| true).is_none(),
            "`a` may declare the same name"
        );
        first_go.send(()).expect("the load waits for it");
        let a = loads.next().await;
        assert!(loads.arrived(a));
        let order: Vec<Origin> = std::iter::from_fn(|| loads.settleable(|_| true))
            .map(|(o, _, _)| o)
            .collect();
        assert_eq!(order, vec![origin("a.wasm"), origin("b.wasm")]);
    }

    #[tokio::test]
    async fn a_panicking_load_ends_with_a_result() {
        let mut loads = Loads::new();
        loads.start(origin("a.wasm"), digest(b"a"), async { panic!("boom") });
        assert_eq!(
            settle(&mut loads).await,
            Some((origin("a.wasm"), "panicked"))
        );
    }
}
