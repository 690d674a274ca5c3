//! Where plugin components come from, and how changes to them reach the registry.
//!
//! A source is a directory of `*.wasm` files ([`directory`]: a volume or a mounted ConfigMap,
//! watched with `notify`) or a ConfigMap read through the API ([`configmap`]: its `binaryData`
//! keys ending in `.wasm`). Either may also hold `*.wasm.zst`, a component compressed with
//! zstd, which the runtime decompresses (within [`MAX_COMPONENT_LEN`]) when it loads it. Each source task sends [`Update`]s: the whole current set of its
//! components, every time the source changed. The registry compares that set with what it runs
//! (by sha256), so a source never has to say what changed, and the same bytes again are a no-op.
//!
//! # Precedence
//! Sources are numbered by their position in the configuration; when two components declare
//! the same plugin name, the one from the earlier source (then the smaller key) runs and the
//! other is refused and reported.

pub mod configmap;
pub mod directory;

use std::fmt;
use std::path::{Path, PathBuf};

use futures::StreamExt as _;

use wasmop_core::plugin::{ComponentBytes, Digest, MAX_COMPONENT_LEN, is_component_key};

/// One configured source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A directory of `*.wasm` files.
    Directory(PathBuf),
    /// A ConfigMap's `binaryData` keys ending in `.wasm`, read through the API.
    ConfigMap {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Directory(dir) => write!(f, "directory {}", dir.display()),
            Source::ConfigMap { namespace, name } => write!(f, "ConfigMap {namespace}/{name}"),
        }
    }
}

/// One component as a source holds it.
#[derive(Debug, Clone)]
pub struct Component {
    /// Its key in the source: the file name in a directory, the key in a ConfigMap.
    pub key: String,
    /// Its bytes, hashed once when the source read them.
    pub content: ComponentBytes,
}

impl Component {
    /// The component at `key`, hashing `bytes`.
    pub(crate) fn new(key: String, bytes: Vec<u8>) -> Self {
        Self {
            key,
            content: ComponentBytes::new(bytes),
        }
    }

    /// Its bytes.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> &[u8] {
        self.content.bytes()
    }

    /// The sha256 of its bytes: the identity of a version.
    pub fn digest(&self) -> Digest {
        self.content.digest()
    }
}

/// What a source task reports: the whole current content of source number `source`, or why
/// it cannot be read now (the registry then keeps what it runs).
#[derive(Debug)]
pub struct Update {
    /// The source's position in the configuration.
    pub source: usize,
    /// Its components, in key order.
    pub components: Result<Vec<Component>, SourceError>,
    /// A snapshot read at the first change of a burst, before the source has settled: only a
    /// hint to start compiling new versions (the settled snapshot follows, and is what
    /// counts). A directory sends one per burst; a ConfigMap read through the API never does.
    pub early: bool,
}

/// Why a source cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The directory cannot be listed.
    #[error("cannot list the plugin directory {}", .dir.display())]
    List {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A component file cannot be read.
    #[error("cannot read the plugin file {}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The directory cannot be watched for changes.
    #[error("cannot watch the plugin directory {}", .dir.display())]
    Watch {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: notify::Error,
    },
    /// A component file is larger than any component may be.
    #[error(
        "the plugin file {} is {len} bytes, over the {MAX_COMPONENT_LEN} bytes a component may \
         be",
        .path.display()
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its length.
        len: u64,
    },
    /// A ConfigMap key ending in `.wasm` is under `data` (text), where a component cannot be.
    #[error(
        "ConfigMap {namespace}/{name} holds `{key}` under `data`; a component is binary and \
         belongs under `binaryData` (kubectl create configmap --from-file does this)"
    )]
    TextKey {
        /// The ConfigMap's namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The key.
        key: String,
    },
}

/// Reads every `*.wasm` and `*.wasm.zst` file directly in `dir`, in name order. Other files
/// and hidden entries (a ConfigMap mount's `..data` link and `..<timestamp>` directories) are
/// ignored; a symlink into `..data` (how the kubelet lays out a mounted ConfigMap) is followed.
/// A file over [`MAX_COMPONENT_LEN`] is an error, found before it is read.
pub(crate) async fn read_directory(dir: &Path) -> Result<Vec<Component>, SourceError> {
    let list_error = |source| SourceError::List {
        dir: dir.to_owned(),
        source,
    };
    let mut entries = tokio::fs::read_dir(dir).await.map_err(list_error)?;
    let mut keys = Vec::new();
    while let Some(entry) = entries.next_entry().await.map_err(list_error)? {
        let key = entry.file_name().to_string_lossy().into_owned();
        if is_component_key(&key) {
            keys.push(key);
        }
    }
    keys.sort();
    // The reads and hashes on blocking threads, in one go each (about 20 ms for the 19 MB
    // Python database-config): not on an async worker, where they held up every other task on
    // it (probes, watches, reconciles), nor in tokio's 2 MiB hops. As many at once as there
    // are CPUs: ten Rust plugins took 4.4 ms one after another on the 2-core machine, most of
    // it sha256. The results are taken in key order, so the first error is the first file's.
    let parallel = std::thread::available_parallelism().map_or(1, usize::from);
    let mut reads = futures::stream::iter(keys)
        .map(|key| {
            let path = dir.join(&key);
            let file = path.clone();
            let read = tokio::task::spawn_blocking(move || {
                read_bounded(&file).map(|bytes| Component::new(key, bytes))
            });
            async move {
                read.await.unwrap_or_else(|e| {
                    Err(SourceError::Read {
                        path,
                        source: std::io::Error::other(e),
                    })
                })
            }
        })
        .buffered(parallel);
    let mut out = Vec::new();
    while let Some(read) = reads.next().await {
        match read {
            Ok(component) => out.push(component),
            // Deleted (or its `..data` target swapped away) between the listing and the read:
            // it is not part of this snapshot; the change that removed it triggers another.
            Err(SourceError::Read { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
    }
    Ok(out)
}

/// Reads the file at `path`, refusing one over [`MAX_COMPONENT_LEN`] bytes: by its length
/// first, and by what the read returns (a file that grew since). Blocking.
fn read_bounded(path: &Path) -> Result<Vec<u8>, SourceError> {
    use std::io::Read;
    let read_error = |source| SourceError::Read {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let len = file.metadata().map_err(read_error)?.len();
    let too_large = |len| SourceError::TooLarge {
        path: path.to_owned(),
        len,
    };
    if len > MAX_COMPONENT_LEN as u64 {
        return Err(too_large(len));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(MAX_COMPONENT_LEN as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() > MAX_COMPONENT_LEN {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_only_wasm_files_in_name_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in [
            "b.wasm",
            "a.wasm",
            "c.wasm.zst",
            "d.wasm.gz",
            "notes.txt",
            ".hidden.wasm",
            ".hidden.wasm.zst",
        ] {
            tokio::fs::write(dir.path().join(name), name)
                .await
                .expect("write");
        }
        let found = read_directory(dir.path()).await.expect("read");
        let names: Vec<_> = found.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(names, ["a.wasm", "b.wasm", "c.wasm.zst"]);
        assert_eq!(found[0].bytes(), b"a.wasm");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn files_read_side_by_side_come_back_in_name_order_with_their_own_bytes() {
        let dir = tempfile::tempdir().expect("tempdir");
        // The first files are the largest, so that reads running side by side end out of order.
        let files: Vec<(String, Vec<u8>)> = (0..24u8)
            .map(|i| {
                let len = (24 - usize::from(i)) * 64 * 1024;
                (format!("p{i:02}.wasm"), vec![i; len])
            })
            .collect();
        for (name, bytes) in &files {
            std::fs::write(dir.path().join(name), bytes).expect("write");
        }
        let found = read_directory(dir.path()).await.expect("read");
        assert_eq!(found.len(), files.len());
        for (component, (name, bytes)) in found.iter().zip(&files) {
            assert_eq!(&component.key, name);
            assert_eq!(component.bytes(), bytes.as_slice(), "{name}");
            assert_eq!(component.digest(), Digest::of(bytes), "{name}");
        }
    }

    #[tokio::test]
    async fn a_file_larger_than_a_component_may_be_is_refused_unread() {
        let dir = tempfile::tempdir().expect("tempdir");
        // Sparse: no disk is written, and the read would take 128 MiB of memory.
        let file = std::fs::File::create(dir.path().join("huge.wasm")).expect("create");
        file.set_len(MAX_COMPONENT_LEN as u64 + 1).expect("set_len");
        let err = read_directory(dir.path()).await.expect_err("too large");
        assert_eq!(
            err.to_string(),
            format!(
                "the plugin file {}/huge.wasm is 134217729 bytes, over the 134217728 bytes a \
                 component may be",
                dir.path().display()
            )
        );
    }

    #[tokio::test]
    async fn missing_directory_is_named() {
        let err = read_directory(Path::new("/nonexistent/plugins"))
            .await
            .expect_err("missing");
        assert_eq!(
            err.to_string(),
            "cannot list the plugin directory /nonexistent/plugins"
        );
    }

    #[tokio::test]
    async fn dangling_symlink_is_left_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::symlink(dir.path().join("..data/a.wasm"), dir.path().join("a.wasm"))
            .expect("symlink");
        assert!(read_directory(dir.path()).await.expect("read").is_empty());
    }
}
