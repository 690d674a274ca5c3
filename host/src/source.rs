//! Where plugin components come from. For now: directories of `*.wasm` files, read at start.
//!
//! A source yields [`Component`]s (path, bytes); the host loads each one and keys the result
//! by the name the plugin declares. Reading is separate from loading so that a later watcher
//! (hot reload) can feed new versions through the same path.

use std::path::{Path, PathBuf};

/// One component file read from a source.
#[derive(Debug, Clone)]
pub struct Component {
    /// Where it was read from.
    pub path: PathBuf,
    /// Its bytes.
    pub bytes: Vec<u8>,
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
}

/// Reads every `*.wasm` file directly in `dir`, in name order. Other files (a ConfigMap
/// mount's `..data` links, READMEs) are ignored.
pub async fn read_directory(dir: &Path) -> Result<Vec<Component>, SourceError> {
    let list_error = |source| SourceError::List {
        dir: dir.to_owned(),
        source,
    };
    let mut entries = tokio::fs::read_dir(dir).await.map_err(list_error)?;
    let mut paths = Vec::new();
    while let Some(entry) = entries.next_entry().await.map_err(list_error)? {
        let path = entry.path();
        let is_wasm = path.extension().is_some_and(|e| e == "wasm");
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        if is_wasm && !hidden {
            paths.push(path);
        }
    }
    paths.sort();
    let mut out = Vec::with_capacity(paths.len());
    for path in paths {
        let bytes = tokio::fs::read(&path)
            .await
            .map_err(|source| SourceError::Read {
                path: path.clone(),
                source,
            })?;
        out.push(Component { path, bytes });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_only_wasm_files_in_name_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in ["b.wasm", "a.wasm", "notes.txt", ".hidden.wasm"] {
            tokio::fs::write(dir.path().join(name), name)
                .await
                .expect("write");
        }
        let found = read_directory(dir.path()).await.expect("read");
        let names: Vec<_> = found
            .iter()
            .map(|c| {
                c.path
                    .file_name()
                    .expect("name")
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert_eq!(names, ["a.wasm", "b.wasm"]);
        assert_eq!(found[0].bytes, b"a.wasm");
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
}
