//! A ConfigMap source read through the API: its `binaryData` keys ending in `.wasm` (or
//! `.wasm.zst`: compressed with zstd, which is how a Go plugin fits; see the README).
//!
//! Reading the ConfigMap through a watch makes an update take effect as soon as the API
//! server has it, instead of after the kubelet's sync of a mounted ConfigMap (up to about a
//! minute). The watch selects the one ConfigMap by name, so the host needs `get`, `list` and
//! `watch` on that name only (RBAC `resourceNames` covers a list or watch with a
//! `metadata.name` field selector).
//!
//! # Guarantees
//! - One [`Update`] per version of the ConfigMap the watch delivers (and one when the watch
//!   (re)starts); a ConfigMap that does not exist, or is deleted, is an empty source: its
//!   plugins are removed.
//! - A `.wasm` key under `data` (text) is reported as an error naming the key; the other keys
//!   are still delivered.
//! - The API server refuses a ConfigMap over 1 MiB (`Too long: must have at most 1048576
//!   bytes`); a larger plugin belongs in a volume (a directory source).
//!
//! # Errors
//! Watch errors (the API unreachable, RBAC) are logged and retried with kube-runtime's default
//! backoff; the registry keeps what it runs meanwhile.
//!
//! # Cancellation
//! The task ends when `shutdown` becomes `true` or the receiver of the updates is gone.

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::{mpsc, watch};

use super::{Component, SourceError, Update};
use wasmop_core::plugin::is_component_key;

/// The components a ConfigMap holds: its `binaryData` keys ending in `.wasm` or `.wasm.zst`,
/// in key order, or the first such key found under `data` instead.
pub(crate) fn components(cm: &ConfigMap) -> Result<Vec<Component>, SourceError> {
    if let Some(key) = cm
        .data
        .iter()
        .flatten()
        .map(|(k, _)| k)
        .find(|k| is_component_key(k))
    {
        return Err(SourceError::TextKey {
            namespace: cm.metadata.namespace.clone().unwrap_or_default(),
            name: cm.metadata.name.clone().unwrap_or_default(),
            key: key.clone(),
        });
    }
    Ok(cm
        .binary_data
        .iter()
        .flatten()
        .filter(|(k, _)| is_component_key(k))
        .map(|(key, bytes)| Component::new(key.clone(), bytes.0.clone()))
        .collect())
}

/// Watches the ConfigMap `namespace/name` and sends its components as source number
/// `source` until shutdown.
pub async fn watch(
    source: usize,
    client: Client,
    namespace: String,
    name: String,
    updates: mpsc::Sender<Update>,
    mut shutdown: watch::Receiver<bool>,
) {
    let api: Api<ConfigMap> = Api::namespaced(client, &namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher(api, config).default_backoff().boxed();
    // During a (re)list, whether the ConfigMap was listed: if not, it does not exist.
    let mut listed = false;
    loop {
        let event = tokio::select! {
            e = events.next() => e,
            _ = shutdown.wait_for(|stop| *stop) => return,
        };
        let components = match event {
            None => return,
            Some(Err(error)) => {
                tracing::warn!(configmap = %format!("{namespace}/{name}"), error = %wasmop_core::chain(&error), "cannot watch the plugin ConfigMap; retrying");
                continue;
            }
            Some(Ok(watcher::Event::Init)) => {
                listed = false;
                continue;
            }
            Some(Ok(watcher::Event::InitApply(cm) | watcher::Event::Apply(cm))) => {
                listed = true;
                components(&cm)
            }
            Some(Ok(watcher::Event::InitDone)) if listed => continue,
            Some(Ok(watcher::Event::InitDone | watcher::Event::Delete(_))) => Ok(Vec::new()),
        };
        if updates
            .send(Update {
                source,
                components,
                early: false,
            })
            .await
            .is_err()
        {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;

    use super::*;

    fn cm(data: &[(&str, &str)], binary: &[(&str, &[u8])]) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.namespace = Some("ops".into());
        cm.metadata.name = Some("plugins".into());
        cm.data = Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        cm.binary_data = Some(
            binary
                .iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.to_vec())))
                .collect(),
        );
        cm
    }

    #[test]
    fn only_binary_wasm_keys_are_components() {
        let found = components(&cm(
            &[("README", "text")],
            &[
                ("b.wasm", b"b"),
                ("a.wasm", b"a"),
                ("c.wasm.zst", b"c"),
                ("logo.png", b"p"),
                ("d.wasm.gz", b"d"),
            ],
        ))
        .expect("valid");
        let keys: Vec<_> = found.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(keys, ["a.wasm", "b.wasm", "c.wasm.zst"]);
        assert_eq!(found[0].bytes(), b"a");
    }

    #[test]
    fn wasm_key_under_data_is_named() {
        let err = components(&cm(&[("db.wasm", "not binary")], &[])).expect_err("text");
        assert_eq!(
            err.to_string(),
            "ConfigMap ops/plugins holds `db.wasm` under `data`; a component is binary and \
             belongs under `binaryData` (kubectl create configmap --from-file does this)"
        );
    }
}
