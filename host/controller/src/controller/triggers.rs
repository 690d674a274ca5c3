//! What makes one of a plugin's controllers reconcile: the changes of its primary kind that
//! pass the generation filter, the changes of owned and watched kinds mapped to the primary
//! objects they name, and the resync ticks, merged into one stream of primary object keys;
//! and the watches whose caches must be synced before it starts.

use std::sync::Arc;
use std::time::Duration;

use futures::stream::{BoxStream, SelectAll};
use futures::{Stream, StreamExt, future};

use super::filter::GenerationFilter;
use super::kinds::Kinds;
use super::{PluginCtx, Shared, selected};
use crate::kubeapi::discovery::Resolved;
use crate::watches::{Change, ObjectKey, SharedWatch, Store, WatchKey};
use wasmop_core::cluster::selector::LabelSelector;

/// Every trigger of one controller, as the primary objects it names.
pub(super) type Triggers = SelectAll<BoxStream<'static, ObjectKey>>;

/// The namespaces one of a plugin's controllers covers.
pub(super) struct Scope {
    /// Its own scope: one namespace, or `None` for all of the plugin's (and for a
    /// cluster-scoped primary kind, which has one controller).
    pub(super) this: Option<String>,
    /// Every scope of the plugin: its namespaces, or `[None]` when it is not confined.
    pub(super) all: Vec<Option<String>>,
}

impl Scope {
    /// The namespaces whose watches of `kind` feed this controller: none for a
    /// cluster-scoped kind (one cluster-wide watch), else this controller's own scope, or
    /// every scope of the plugin for the controller of a cluster-scoped primary kind.
    fn of(&self, kind: &Resolved) -> Vec<Option<String>> {
        if !kind.namespaced {
            vec![None]
        } else if self.this.is_some() {
            vec![self.this.clone()]
        } else {
            self.all.clone()
        }
    }
}

/// The shared watch of the primary kind in this controller's scope.
pub(super) fn primary_watch(ctx: &PluginCtx, kinds: &Kinds, scope: &Scope) -> Arc<SharedWatch> {
    ctx.shared.watches.watch(WatchKey {
        resource: kinds.primary.resource.clone(),
        namespace: if ctx.primary.namespaced {
            scope.this.clone()
        } else {
            None
        },
    })
}

/// Every trigger of the controller of `scope`, merged. `every_change` is the plugin's
/// `reconcile-on-metadata-change`.
pub(super) fn triggers(
    ctx: &Arc<PluginCtx>,
    kinds: &Kinds,
    scope: &Scope,
    primary_watch: &SharedWatch,
    every_change: bool,
) -> Triggers {
    let shared = &ctx.shared;
    let store = primary_watch.store();
    let mut triggers = vec![primary_changes(ctx.clone(), primary_watch, every_change)];
    for owned in &kinds.owned {
        let q = ctx.clone();
        let kind = owned.clone();
        let stream = merged(shared, owned, scope.of(owned), None);
        triggers.push(
            stream
                .flat_map(move |change| {
                    let owners = q.primary.owners_of(change.object());
                    futures::stream::iter(q.queued(q.unechoed(&kind, &change, owners)))
                })
                .boxed(),
        );
    }
    for (kind, selector, mapping) in &kinds.watched {
        let q = ctx.clone();
        let mapping = mapping.clone();
        let primaries = store.clone();
        let watched = kind.clone();
        let stream = merged(shared, kind, scope.of(kind), selector.clone());
        triggers.push(
            stream
                .flat_map(move |change| {
                    let mapped = q.primary.mapped(&mapping, change.object(), &primaries);
                    futures::stream::iter(q.queued(q.unechoed(&watched, &change, mapped)))
                })
                .boxed(),
        );
    }
    if let Some(period) = shared.resync {
        triggers.push(resync(period, store.clone()).boxed());
    }
    if shared.reconcile_on_new_version {
        triggers.push(new_versions(ctx.plugin.clone(), store).boxed());
    }
    futures::stream::select_all(triggers)
}

/// The primary objects whose changes call for a reconcile: in the plugin's scope, and (unless
/// `every_change`) with a new generation; each is reported queued.
fn primary_changes(
    ctx: Arc<PluginCtx>,
    primary_watch: &SharedWatch,
    every_change: bool,
) -> BoxStream<'static, ObjectKey> {
    let mut gen_filter = GenerationFilter::default();
    primary_watch
        .subscribe()
        .filter_map(move |change| {
            let admit = match &change {
                Change::Deleted(obj) => {
                    gen_filter.forget(&obj.meta());
                    false
                }
                Change::Applied(obj) => {
                    ctx.in_scope(obj) && (every_change || gen_filter.admit(&obj.meta()))
                }
            };
            let out = admit.then(|| {
                let obj = change.object();
                let key = ObjectKey::of(obj);
                ctx.queue.added(key.namespace.as_deref(), &key.name);
                key
            });
            future::ready(out)
        })
        .boxed()
}

/// Every object in `store`, every `period` (the first tick one period from now).
fn resync(period: Duration, store: Store) -> impl Stream<Item = ObjectKey> + Send + 'static {
    let start = tokio::time::Instant::now() + period;
    let ticks = futures::stream::unfold(
        tokio::time::interval_at(start, period),
        |mut i| async move {
            i.tick().await;
            Some(((), i))
        },
    );
    ticks.flat_map(move |()| {
        let refs: Vec<_> = store.state().iter().map(ObjectKey::of).collect();
        futures::stream::iter(refs)
    })
}

/// Every object in `store`, each time a new version of the plugin is swapped in.
fn new_versions(
    versions: tokio::sync::watch::Receiver<wasmop_runtime::Plugin>,
    store: Store,
) -> impl Stream<Item = ObjectKey> + Send + 'static {
    changes(versions).flat_map(move |()| {
        let refs: Vec<_> = store.state().iter().map(ObjectKey::of).collect();
        futures::stream::iter(refs)
    })
}

/// One item per change of `receiver` after now.
fn changes<T: Send + Sync + 'static>(
    mut receiver: tokio::sync::watch::Receiver<T>,
) -> impl Stream<Item = ()> + Send + 'static {
    receiver.mark_unchanged();
    futures::stream::unfold(receiver, |mut r| async move {
        r.changed().await.ok().map(|()| ((), r))
    })
}

/// The changes of `kind` in each of `scopes`, filtered by `selector`, as one trigger stream.
fn merged(
    shared: &Shared,
    kind: &Resolved,
    scopes: Vec<Option<String>>,
    selector: Option<LabelSelector>,
) -> impl Stream<Item = Change> + Send + 'static {
    let streams = scopes.into_iter().map(|ns| {
        shared
            .watches
            .watch(WatchKey {
                resource: kind.resource.clone(),
                namespace: ns,
            })
            .subscribe()
            .boxed()
    });
    futures::stream::select_all(streams).filter_map(move |change| {
        let keep = selector
            .as_ref()
            .is_none_or(|s| selected(s, change.object()));
        future::ready(keep.then_some(change))
    })
}

/// Every watch the controller of `scope` reads: the primary kind's and each owned and
/// watched kind's in the scopes it covers.
pub(super) fn feeds(
    shared: &Shared,
    kinds: &Kinds,
    scope: &Scope,
    primary_watch: Arc<SharedWatch>,
) -> Vec<Arc<SharedWatch>> {
    let mut feeds = vec![primary_watch];
    let others = kinds.watched.iter().map(|(k, _, _)| k);
    for kind in kinds.owned.iter().chain(others) {
        for ns in scope.of(kind) {
            feeds.push(shared.watches.watch(WatchKey {
                resource: kind.resource.clone(),
                namespace: ns,
            }));
        }
    }
    feeds
}
