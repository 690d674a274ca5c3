//! [`ListWatch`]: the host's own list-then-watch loop for one shared watch, decoding each
//! list item and each watch event on its own.
//!
//! It follows kube-runtime's `watcher` with its default configuration: a paginated LIST
//! (500 objects a page, `continue` tokens), then a WATCH from the list's resourceVersion with
//! bookmarks and a server-side timeout (290 s, resumed from the last resourceVersion seen when
//! the server ends it), a relist on `410 Gone`, and kube's default backoff (800 ms doubling to
//! 30 s, with jitter, reset on success) after every failure. It yields the same [`Event`]s
//! (`Init`, `InitApply`…, `InitDone`, then `Apply` and `Delete`), so the store and the
//! readiness signal work on it as they did on the watcher's.
//!
//! Which state a LIST reads ([`ListFrom`]) follows client-go's reflector rather than kube's
//! default: the first list asks for any state the API server holds (`resourceVersion=0`), which
//! it answers from its watch cache at once; a relist after `410 Gone` asks for the most recent
//! state. A most-recent list is a consistent read: the API server first makes sure its watch
//! cache has caught up with etcd, and for a kind nobody has written to lately (an idle CRD)
//! that meant waiting for etcd's next progress notification: 44–46 ms in about a third of
//! starts on the bundled control plane. The watch that follows the list delivers whatever the
//! cache had not yet seen, as it does for changes made during any list.
//!
//! Why not the watcher itself: it decodes a whole list page as one `ObjectList` (through
//! serde's buffered content, which recurses at every level), so one object nested deeper than
//! serde_json's recursion limit failed the page, the initial list, and readiness, every
//! second, for as long as the object existed. Here a page is read as a list of raw items and
//! an event as its `type` and a raw object (serde_json skips raw values without recursing);
//! each object is then decoded by [`CachedObject::decode`], which reads any depth. An object
//! that still does not decode is skipped and reported ([`Skipped`]); the list or watch goes on.
//! That reading is `listwatch/wire.rs`; this file is the loop and its requests.

use std::sync::Arc;
use std::time::Duration;

use futures::AsyncBufReadExt;
use kube::Client;
use kube::api::{ListParams, TypeMeta, WatchParams};
use kube::runtime::utils::Backoff;
use kube::runtime::watcher::{DefaultBackoff, Event};

use super::CachedObject;
use super::decoded::DecodeError;
use super::skipped::Skipped;

mod wire;
pub use wire::{DecodedEvent, RawPage, decode_event, raw_page};
pub(crate) use wire::{event, page};

/// Objects per LIST page: kube's and client-go's default. (The API server answers a
/// `resourceVersion=0` list from its watch cache in one page whatever the limit; with its watch
/// cache off it reads etcd and pages.)
const PAGE_SIZE: u32 = 500;
/// The server-side watch timeout: kube's default. The server ends the watch after it, and the
/// loop resumes from the last resourceVersion (spreading watch restarts over time).
const WATCH_TIMEOUT: u32 = 290;
/// How long a watch may stay silent beyond its server-side timeout before it is taken for a
/// dead connection and reopened: kube's margin.
const IDLE_MARGIN: Duration = Duration::from_secs(5);

/// Why one list or watch attempt failed (the loop backs off and tries again).
#[derive(Debug, thiserror::Error)]
pub enum ListWatchError {
    /// The LIST request failed.
    #[error("list failed")]
    List(#[source] kube::Error),
    /// The WATCH request failed.
    #[error("watch failed")]
    Watch(#[source] kube::Error),
    /// Reading the watch stream failed.
    #[error("reading the watch stream failed")]
    Read(#[source] std::io::Error),
    /// A list page or a watch event is not what the API server sends.
    #[error("malformed {what}")]
    Malformed {
        /// `list page` or `watch event`.
        what: &'static str,
        /// Why, without the content.
        #[source]
        source: DecodeError,
    },
    /// A watch line that is not UTF-8.
    #[error("a watch event is not UTF-8")]
    NotUtf8(#[source] std::str::Utf8Error),
    /// The watch sent an `ERROR` event (410 Gone is handled by a relist).
    #[error("the watch reported error {code}: {message}")]
    Status {
        /// The HTTP code it carries.
        code: u16,
        /// The API server's message.
        message: String,
    },
    /// A list without a resourceVersion to watch from, or an event without one.
    #[error("the API server sent no resourceVersion")]
    NoResourceVersion,
}

impl ListWatchError {
    /// Whether the resourceVersion is too old to watch from: the cache must be relisted.
    fn is_gone(&self) -> bool {
        match self {
            ListWatchError::Status { code, .. } => *code == 410,
            ListWatchError::Watch(kube::Error::Api(status)) => status.code == 410,
            ListWatchError::NoResourceVersion => true,
            _ => false,
        }
    }
}

/// Which state of the collection a LIST asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListFrom {
    /// Any state the API server holds (`resourceVersion=0`): its watch cache, without waiting
    /// for it to catch up with etcd. The first list, as client-go's reflector does it.
    Cache,
    /// The most recent state (no resourceVersion): a consistent read. A relist after
    /// `410 Gone`, which must not go back before what the cache has already seen.
    MostRecent,
}

/// One shared watch's list-then-watch loop.
pub(crate) struct ListWatch {
    client: Client,
    /// The collection's URL path (all namespaces or one).
    url: String,
    /// The kind, added to list items (which lack it) and named in reports.
    types: TypeMeta,
    /// `apiVersion/plural` and the namespace scope, for log lines.
    label: String,
    scope: String,
    skipped: Arc<Skipped>,
}

impl ListWatch {
    /// A loop over the collection at `url` (from `Api::resource_url`) of kind `types`.
    pub(crate) fn new(
        client: Client,
        url: String,
        types: TypeMeta,
        (label, scope): (String, String),
        skipped: Arc<Skipped>,
    ) -> Self {
        Self {
            client,
            url,
            types,
            label,
            scope,
            skipped,
        }
    }

    /// Lists and watches for ever, handing each event to `deliver`.
    pub(crate) async fn run(self, mut deliver: impl FnMut(Event<CachedObject>)) {
        let mut backoff = DefaultBackoff::default();
        // The resourceVersion to watch from; none: list first.
        let mut from: Option<String> = None;
        // Nothing seen yet: any state will do.
        let mut list_from = ListFrom::Cache;
        loop {
            let result = match from.as_mut() {
                None => self
                    .list(list_from, &mut deliver, &mut backoff)
                    .await
                    .map(Some),
                Some(rv) => self
                    .watch(rv, &mut deliver, &mut backoff)
                    .await
                    .map(|()| Some(rv.clone())),
            };
            match result {
                Ok(next) => from = next,
                Err(error) => {
                    if error.is_gone() {
                        from = None;
                        list_from = ListFrom::MostRecent;
                    }
                    let delay = backoff.next().unwrap_or(Duration::from_secs(30));
                    tracing::warn!(
                        kind = %self.label,
                        namespace = %self.scope,
                        error = %wasmop_core::chain(&error),
                        relist = from.is_none(),
                        ?delay,
                        "watch failed; retrying"
                    );
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    /// Lists every page, delivering `Init`, each object, then `InitDone`; returns the
    /// resourceVersion to watch from.
    async fn list(
        &self,
        from: ListFrom,
        deliver: &mut impl FnMut(Event<CachedObject>),
        backoff: &mut DefaultBackoff,
    ) -> Result<String, ListWatchError> {
        deliver(Event::Init);
        let mut continue_token = None;
        loop {
            let req = list_request(&self.url, from, continue_token.take())?;
            let text = self
                .client
                .request_text(req)
                .await
                .map_err(ListWatchError::List)?;
            backoff.reset();
            let page = page(&text, &self.types, Some(&self.skipped))?;
            for obj in page.objects {
                deliver(Event::InitApply(obj));
            }
            match page.continue_token {
                Some(token) => continue_token = Some(token),
                None => {
                    let rv = page
                        .resource_version
                        .ok_or(ListWatchError::NoResourceVersion)?;
                    deliver(Event::InitDone);
                    return Ok(rv);
                }
            }
        }
    }

    /// Watches from `rv` until the connection ends (the server's timeout, or silence past
    /// it: watch again from `rv`), delivering each change and keeping `rv` at the last
    /// resourceVersion seen.
    async fn watch(
        &self,
        rv: &mut String,
        deliver: &mut impl FnMut(Event<CachedObject>),
        backoff: &mut DefaultBackoff,
    ) -> Result<(), ListWatchError> {
        let params = WatchParams::default().timeout(WATCH_TIMEOUT);
        let mut req = kube::core::Request::new(self.url.as_str())
            .watch(&params, rv.as_str())
            .map_err(|e| ListWatchError::Watch(kube::Error::BuildRequest(e)))?;
        // As kube does: one gzip member per event is more than the client's decoder reads.
        req.headers_mut().insert(
            hyper::header::ACCEPT_ENCODING,
            hyper::header::HeaderValue::from_static("identity"),
        );
        let body = self
            .client
            .request_stream(req)
            .await
            .map_err(ListWatchError::Watch)?;
        backoff.reset();
        let mut body = std::pin::pin!(body);
        let idle = Duration::from_secs(u64::from(WATCH_TIMEOUT)) + IDLE_MARGIN;
        let mut line = Vec::new();
        loop {
            line.clear();
            let read = match tokio::time::timeout(idle, body.read_until(b'\n', &mut line)).await {
                Ok(read) => read.map_err(ListWatchError::Read)?,
                Err(_) => {
                    tracing::debug!(kind = %self.label, "watch silent past its timeout; reopening");
                    return Ok(());
                }
            };
            // The end, or a last line cut short by it.
            if read == 0 || line.last() != Some(&b'\n') {
                return Ok(());
            }
            // Checked once here (as kube's line codec did), so the JSON reader need not check
            // every string again.
            let line = std::str::from_utf8(&line).map_err(ListWatchError::NotUtf8)?;
            if let Some(event) = event(line, rv, &self.types, &self.skipped)? {
                deliver(event);
            }
        }
    }
}

/// The LIST request for one page: the first (`continue_token` none) reads the state `from`
/// asks for; the next ones continue it (the token carries the resourceVersion).
fn list_request(
    url: &str,
    from: ListFrom,
    continue_token: Option<String>,
) -> Result<hyper::Request<Vec<u8>>, ListWatchError> {
    let first = continue_token.is_none();
    let params = ListParams {
        limit: Some(PAGE_SIZE),
        continue_token,
        ..ListParams::default()
    };
    let mut req = kube::core::Request::new(url)
        .list(&params)
        .map_err(|e| ListWatchError::List(kube::Error::BuildRequest(e)))?;
    if first && from == ListFrom::Cache {
        // kube's ListParams leaves `resourceVersion=0` out when a limit is set (the API server
        // ignores the limit for it when it answers from its cache); client-go sends both, so
        // that a server without a watch cache still pages its etcd read.
        let uri = format!("{}&resourceVersion=0", req.uri());
        *req.uri_mut() = hyper::Uri::try_from(uri).map_err(|e| {
            ListWatchError::List(kube::Error::BuildRequest(
                kube::core::request::Error::BuildRequest(e.into()),
            ))
        })?;
    }
    Ok(req)
}

#[cfg(test)]
mod tests;
