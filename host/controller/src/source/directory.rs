//! A directory source, watched: a volume, or a ConfigMap mounted by the kubelet.
//!
//! # Guarantees
//! - The first [`Update`] is the directory as it is at start; after that, one update after
//!   each burst of changes, once the directory has been quiet for [`DEBOUNCE`]. Before it, a
//!   few early updates (hints, read once the directory has been quiet for [`HINT_QUIET`]) let
//!   the registry start compiling new versions during the debounce.
//! - The kubelet's atomic writer is handled exactly: it writes a new `..<timestamp>` directory,
//!   points a `..data_tmp` link at it and renames that over `..data`, so every `*.wasm` link
//!   (`a.wasm -> ..data/a.wasm`) changes target at once. The rename is a change of the watched
//!   directory, and the snapshot read after it sees only the new files.
//! - A file still being copied keeps producing change events, so it is read once the copy is
//!   done. A copy that stalls for longer than [`DEBOUNCE`] is read half-written; it then fails
//!   to load (the registry keeps the last good version) and the end of the copy triggers
//!   another update.
//! - Renames and deletions are changes like any other: a file gone from the snapshot is a
//!   plugin removed.
//!
//! # Errors
//! A directory that cannot be read is reported as an update carrying the error (the registry
//! keeps what it runs); the watch goes on and the next change is read again.
//!
//! # Cancellation
//! The task ends when `shutdown` becomes `true`, or when the receiver of the updates is gone.

use std::path::PathBuf;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::{SourceError, Update, read_directory};

/// How long a directory must be quiet before it is read. The kubelet's swap (a symlink and a
/// rename) and a local copy of a plugin of a few hundred KB finish well within this; it adds
/// at most this much to a reload, and a burst of changes is read once.
pub const DEBOUNCE: Duration = Duration::from_millis(50);

/// How long a directory must be quiet before it is read early, as a hint (see
/// [`Update::early`]): the writes of a local copy and a rename into place come closer together
/// than this, so the early read usually sees the whole new file.
pub(crate) const HINT_QUIET: Duration = Duration::from_millis(5);

/// Early reads per burst at most: a slow copy pausing often is not read over and over.
const MAX_HINTS: u32 = 4;

/// Watches `dir` and sends its content as source number `source` until shutdown. When the
/// watch cannot be set up (the directory is missing or cannot be watched) the error is sent
/// as the only update and the task ends.
pub async fn watch(
    source: usize,
    dir: PathBuf,
    debounce: Duration,
    updates: mpsc::Sender<Update>,
    mut shutdown: watch::Receiver<bool>,
) {
    let (tx, mut changes) = mpsc::unbounded_channel();
    // notify calls this on its own thread; an unbounded send never blocks it, and the channel
    // holds at most one burst of events, which the debounce below drains.
    let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if event.as_ref().map_or(true, is_change) {
            let _ = tx.send(());
        }
    });
    let watch_error = |source| SourceError::Watch {
        dir: dir.clone(),
        source,
    };
    let mut watcher = match watcher {
        Ok(w) => w,
        Err(e) => return fail(source, watch_error(e), &updates).await,
    };
    // Not recursive: every change that matters (a file written, renamed or deleted, the
    // `..data` link swapped) is a change of an entry of `dir` itself.
    if let Err(e) = watcher.watch(&dir, RecursiveMode::NonRecursive) {
        return fail(source, watch_error(e), &updates).await;
    }
    loop {
        let components = read_directory(&dir).await;
        let settled = Update {
            source,
            components,
            early: false,
        };
        if updates.send(settled).await.is_err() {
            return;
        }
        tokio::select! {
            change = changes.recv() => if change.is_none() { return },
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        // Debounce: wait until no change has come for `debounce`. Meanwhile, once the
        // directory has been quiet for `HINT_QUIET`, read it early so that new versions can be
        // compiled while the burst settles (a file renamed into place is whole by then).
        let mut quiet_since = Instant::now();
        let (mut hinted, mut hints) = (false, 0);
        loop {
            let wake = if hinted || hints == MAX_HINTS {
                quiet_since + debounce
            } else {
                quiet_since + HINT_QUIET.min(debounce)
            };
            let quiet = tokio::select! {
                change = changes.recv() => if change.is_none() { return } else { false },
                () = tokio::time::sleep_until(wake) => true,
                _ = shutdown.wait_for(|stop| *stop) => return,
            };
            if !quiet {
                quiet_since = Instant::now();
                hinted = false;
            } else if hinted || hints == MAX_HINTS {
                break;
            } else {
                hint(source, &dir, &updates).await;
                (hinted, hints) = (true, hints + 1);
            }
        }
    }
}

/// Sends the directory as it is now as an early update. Only a hint: it is dropped rather
/// than waited for when the registry is busy, and a read error is left to the settled read.
async fn hint(source: usize, dir: &std::path::Path, updates: &mpsc::Sender<Update>) {
    if let Ok(components) = read_directory(dir).await {
        let _ = updates.try_send(Update {
            source,
            components: Ok(components),
            early: true,
        });
    }
}

/// Whether an event can change what the directory holds. Opening and reading (the source's
/// own reads among them) cannot; closing a file written to can (a copy is done). An error is
/// treated as a change: the directory is read again.
fn is_change(event: &notify::Event) -> bool {
    use notify::EventKind;
    use notify::event::{AccessKind, AccessMode};
    match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

async fn fail(source: usize, error: SourceError, updates: &mpsc::Sender<Update>) {
    let _ = updates
        .send(Update {
            source,
            components: Err(error),
            early: false,
        })
        .await;
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::source::Component;

    /// The test debounce: long enough that a loaded 2-core machine does not split one write
    /// into two bursts by accident.
    const QUIET: Duration = Duration::from_millis(300);

    /// The kubelet's atomic writer (`pkg/volume/util/atomic_writer.go`), step by step: a new
    /// `..<timestamp>` directory with the payload, a `..data_tmp` link to it renamed over
    /// `..data`, a `key -> ..data/key` link per key (new keys only), stale links removed, the
    /// old timestamped directory removed.
    struct AtomicWriter {
        dir: PathBuf,
        generation: u32,
    }

    impl AtomicWriter {
        fn new(dir: &Path) -> Self {
            Self {
                dir: dir.to_owned(),
                generation: 0,
            }
        }

        fn write(&mut self, payload: &[(&str, &[u8])]) {
            self.generation += 1;
            let old = std::fs::read_link(self.dir.join("..data")).ok();
            let ts = format!("..2026_11_29_17_00_00.{:09}", self.generation);
            std::fs::create_dir(self.dir.join(&ts)).expect("timestamped dir");
            for (key, bytes) in payload {
                std::fs::write(self.dir.join(&ts).join(key), bytes).expect("payload");
            }
            std::os::unix::fs::symlink(&ts, self.dir.join("..data_tmp")).expect("..data_tmp");
            std::fs::rename(self.dir.join("..data_tmp"), self.dir.join("..data")).expect("swap");
            for (key, _) in payload {
                let link = self.dir.join(key);
                if std::fs::symlink_metadata(&link).is_err() {
                    std::os::unix::fs::symlink(Path::new("..data").join(key), link)
                        .expect("key link");
                }
            }
            for entry in std::fs::read_dir(&self.dir).expect("list") {
                let name = entry.expect("entry").file_name();
                let name = name.to_string_lossy();
                if !name.starts_with('.') && !payload.iter().any(|(k, _)| *k == name) {
                    std::fs::remove_file(self.dir.join(&*name)).expect("stale link");
                }
            }
            if let Some(old) = old {
                std::fs::remove_dir_all(self.dir.join(old)).expect("old payload");
            }
        }
    }

    fn start(dir: &Path) -> (mpsc::Receiver<Update>, watch::Sender<bool>) {
        let (tx, rx) = mpsc::channel(64);
        let (stop, shutdown) = watch::channel(false);
        tokio::spawn(watch(0, dir.to_owned(), QUIET, tx, shutdown));
        (rx, stop)
    }

    async fn next(rx: &mut mpsc::Receiver<Update>) -> Vec<Component> {
        let update = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("an update within 10 s")
            .expect("the watch is running");
        assert!(!update.early, "the first update is the settled content");
        update.components.expect("the directory is readable")
    }

    /// Every settled update that arrives until the directory has been quiet for a while (the
    /// early hints are checked apart).
    async fn settle(rx: &mut mpsc::Receiver<Update>) -> Vec<Vec<Component>> {
        settle_all(rx)
            .await
            .into_iter()
            .filter(|(early, _)| !early)
            .map(|(_, components)| components)
            .collect()
    }

    /// Every update, early or settled, until the directory has been quiet for a while.
    async fn settle_all(rx: &mut mpsc::Receiver<Update>) -> Vec<(bool, Vec<Component>)> {
        let mut seen = Vec::new();
        while let Ok(Some(update)) = tokio::time::timeout(QUIET * 4, rx.recv()).await {
            let components = update.components.expect("the directory is readable");
            seen.push((update.early, components));
        }
        seen
    }

    fn contents(components: &[Component]) -> Vec<(String, Vec<u8>)> {
        components
            .iter()
            .map(|c| (c.key.clone(), c.bytes().to_vec()))
            .collect()
    }

    #[tokio::test]
    async fn atomic_writer_swap_is_read_as_the_new_version_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut writer = AtomicWriter::new(dir.path());
        writer.write(&[("a.wasm", b"a1"), ("b.wasm", b"b1")]);
        let (mut rx, _stop) = start(dir.path());
        let first = next(&mut rx).await;
        assert_eq!(
            contents(&first),
            [
                ("a.wasm".into(), b"a1".to_vec()),
                ("b.wasm".into(), b"b1".to_vec())
            ]
        );

        writer.write(&[("a.wasm", b"a2"), ("b.wasm", b"b1")]);
        let seen = settle(&mut rx).await;
        let last = seen.last().expect("the swap is seen");
        assert_eq!(
            contents(last),
            [
                ("a.wasm".into(), b"a2".to_vec()),
                ("b.wasm".into(), b"b1".to_vec())
            ]
        );
        for snapshot in &seen {
            assert_eq!(snapshot.len(), 2, "a swap never shows a missing key");
        }
    }

    #[tokio::test]
    async fn key_removed_by_the_atomic_writer_leaves_the_snapshot() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut writer = AtomicWriter::new(dir.path());
        writer.write(&[("a.wasm", b"a1"), ("b.wasm", b"b1")]);
        let (mut rx, _stop) = start(dir.path());
        next(&mut rx).await;
        writer.write(&[("b.wasm", b"b1")]);
        let seen = settle(&mut rx).await;
        assert_eq!(
            contents(seen.last().expect("seen")),
            [("b.wasm".into(), b"b1".to_vec())]
        );
    }

    #[tokio::test]
    async fn burst_of_swaps_is_read_once_with_the_last_version() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut writer = AtomicWriter::new(dir.path());
        writer.write(&[("a.wasm", b"v0")]);
        let (mut rx, _stop) = start(dir.path());
        next(&mut rx).await;
        for i in 1..=20 {
            writer.write(&[("a.wasm", format!("v{i}").as_bytes())]);
        }
        let seen = settle(&mut rx).await;
        assert_eq!(
            contents(seen.last().expect("seen")),
            [("a.wasm".into(), b"v20".to_vec())]
        );
        assert!(
            seen.len() < 5,
            "debounced: {} updates for 20 swaps",
            seen.len()
        );
        for snapshot in &seen {
            assert_eq!(snapshot.len(), 1, "a swap never shows a missing key");
        }
    }

    #[tokio::test]
    async fn half_written_file_is_read_when_the_copy_is_done() {
        use tokio::io::AsyncWriteExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut rx, _stop) = start(dir.path());
        assert!(next(&mut rx).await.is_empty());
        let whole: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect();
        let mut file = tokio::fs::File::create(dir.path().join("a.wasm"))
            .await
            .expect("create");
        for chunk in whole.chunks(whole.len() / 8) {
            file.write_all(chunk).await.expect("write");
            file.flush().await.expect("flush");
            tokio::time::sleep(QUIET / 6).await;
        }
        drop(file);
        let seen = settle(&mut rx).await;
        assert_eq!(seen.len(), 1, "one read, after the copy");
        assert_eq!(seen[0][0].bytes(), whole);
    }

    #[tokio::test]
    async fn a_file_renamed_into_place_is_hinted_before_the_debounce_ends() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut rx, _stop) = start(dir.path());
        assert!(next(&mut rx).await.is_empty());
        std::fs::write(dir.path().join(".a.wasm.tmp"), b"whole").expect("write");
        std::fs::rename(dir.path().join(".a.wasm.tmp"), dir.path().join("a.wasm")).expect("rename");
        let seen = settle_all(&mut rx).await;
        let first_settled = seen.iter().position(|(early, _)| !early);
        let hinted = seen.iter().position(|(early, c)| {
            *early && contents(c).contains(&("a.wasm".into(), b"whole".to_vec()))
        });
        assert!(
            hinted.is_some_and(|h| first_settled.is_some_and(|s| h < s)),
            "an early hint with the new file comes before the settled update: {:?}",
            seen.iter()
                .map(|(early, c)| (*early, contents(c)))
                .collect::<Vec<_>>()
        );
        let (_, last) = seen.last().expect("seen");
        assert_eq!(contents(last), [("a.wasm".into(), b"whole".to_vec())]);
    }

    #[tokio::test]
    async fn renamed_and_deleted_files_are_seen() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a.wasm"), b"a").expect("write");
        let (mut rx, _stop) = start(dir.path());
        assert_eq!(next(&mut rx).await.len(), 1);
        std::fs::rename(dir.path().join("a.wasm"), dir.path().join("b.wasm")).expect("rename");
        let seen = settle(&mut rx).await;
        assert_eq!(
            contents(seen.last().expect("seen")),
            [("b.wasm".into(), b"a".to_vec())]
        );
        std::fs::remove_file(dir.path().join("b.wasm")).expect("delete");
        let seen = settle(&mut rx).await;
        assert!(seen.last().expect("seen").is_empty());
    }

    #[tokio::test]
    async fn missing_directory_is_reported_as_an_update() {
        let (tx, mut rx) = mpsc::channel(4);
        let (_stop, shutdown) = watch::channel(false);
        watch(3, "/nonexistent/plugins".into(), QUIET, tx, shutdown).await;
        let update = rx.recv().await.expect("an update");
        assert_eq!(update.source, 3);
        let err = update.components.expect_err("missing");
        assert_eq!(
            err.to_string(),
            "cannot watch the plugin directory /nonexistent/plugins"
        );
    }
}
