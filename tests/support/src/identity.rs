//! Restricted identities: kubeconfigs and clients for a user with groups (a client certificate
//! signed by the control plane's CA) or for a ServiceAccount (a token from the TokenRequest API),
//! so tests can run wasmop with exactly the RBAC that `deploy/` grants.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::PostParams;
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use kube::{Api, Client, Config};

use crate::control_plane::{ControlPlane, ControlPlaneError};

/// How long a minted ServiceAccount token is valid: longer than any test binary runs, so a
/// long suite never sees its credentials expire mid-way.
const TOKEN_LIFETIME_SECONDS: i64 = 24 * 60 * 60;

/// Who a client authenticates as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// The cluster admin (`system:masters`).
    Admin,
    /// A user authenticated by a client certificate (user = common name, groups = organizations).
    User {
        /// The user name RBAC subjects refer to.
        name: String,
        /// The groups RBAC subjects refer to.
        groups: Vec<String>,
    },
    /// A ServiceAccount, authenticated by a bound token (`system:serviceaccount:NS:NAME`).
    ServiceAccount {
        /// The ServiceAccount's namespace.
        namespace: String,
        /// The ServiceAccount's name; it must exist.
        name: String,
    },
}

impl Identity {
    /// A client-certificate user with groups.
    pub fn user(name: impl Into<String>, groups: &[&str]) -> Self {
        Identity::User {
            name: name.into(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        }
    }

    /// An existing ServiceAccount.
    pub fn service_account(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Identity::ServiceAccount {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

/// Errors of making credentials for an identity.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The launcher could not mint a client certificate.
    #[error("minting a client certificate for {identity:?}")]
    Mint {
        /// The identity.
        identity: Identity,
        /// What went wrong.
        #[source]
        source: ControlPlaneError,
    },
    /// The TokenRequest body could not be built (a bug in this crate).
    #[error("building a TokenRequest")]
    BuildTokenRequest(#[source] serde_json::Error),
    /// The TokenRequest for a ServiceAccount failed (e.g. the ServiceAccount does not exist).
    #[error("requesting a token for ServiceAccount {namespace}/{name}")]
    TokenRequest {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The TokenRequest's answer had no status.
    #[error("the TokenRequest for ServiceAccount {namespace}/{name} returned no token")]
    NoToken {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// Writing a kubeconfig failed.
    #[error("writing kubeconfig {path}")]
    WriteKubeconfig {
        /// Where.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A kubeconfig could not be turned into a client configuration.
    #[error("loading kubeconfig {path}")]
    LoadKubeconfig {
        /// Which.
        path: PathBuf,
        /// Why.
        #[source]
        source: KubeconfigError,
    },
    /// The client could not be built from the configuration.
    #[error("building a client from kubeconfig {path}")]
    Client {
        /// Which kubeconfig.
        path: PathBuf,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

/// Returns a kubeconfig file for `identity`, minting credentials as needed; `admin` is used to
/// request ServiceAccount tokens.
pub(crate) async fn kubeconfig_for(
    plane: &Arc<ControlPlane>,
    admin: &Client,
    identity: &Identity,
) -> Result<PathBuf, IdentityError> {
    match identity {
        Identity::Admin => Ok(plane.state().kubeconfig.clone()),
        Identity::User { name, groups } => {
            plane
                .mint_user(name, groups)
                .await
                .map_err(|source| IdentityError::Mint {
                    identity: identity.clone(),
                    source,
                })
        }
        Identity::ServiceAccount { namespace, name } => {
            service_account_kubeconfig(plane, admin, namespace, name).await
        }
    }
}

async fn service_account_kubeconfig(
    plane: &Arc<ControlPlane>,
    admin: &Client,
    namespace: &str,
    name: &str,
) -> Result<PathBuf, IdentityError> {
    let api: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    // The shape of k8s-openapi's TokenRequest depends on the Kubernetes version feature it is
    // built with (fields required up to 1.36 are optional from 1.37), so it goes through JSON.
    let request: TokenRequest = serde_json::from_value(serde_json::json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"audiences": [], "expirationSeconds": TOKEN_LIFETIME_SECONDS},
    }))
    .map_err(IdentityError::BuildTokenRequest)?;
    let answer = api
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .map_err(|source| IdentityError::TokenRequest {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source,
        })?;
    let token = serde_json::to_value(&answer)
        .ok()
        .and_then(|v| v["status"]["token"].as_str().map(str::to_owned))
        .filter(|token| !token.is_empty())
        .ok_or_else(|| IdentityError::NoToken {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })?;

    let state = plane.state();
    let user = format!("system:serviceaccount:{namespace}:{name}");
    // JSON is YAML, so every kubeconfig reader (kube-rs, kubectl, wasmop) reads this file.
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "wasmop", "cluster": {
            "server": state.server,
            // The CA file lives as long as the control plane, and so does this kubeconfig.
            "certificate-authority": state.ca_file,
        }}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "wasmop", "context": {
            "cluster": "wasmop", "user": user, "namespace": namespace,
        }}],
        "current-context": "wasmop",
    });
    let path = state
        .dir
        .join("users")
        .join(format!("sa-{namespace}-{name}.kubeconfig"));
    // Every test that starts a host as this account rewrites this one file while the hosts of
    // other tests may be reading it: written in place, a host could read it truncated ("failed
    // to determine current context", seen 2026-12-01). Written aside and renamed over it, a
    // reader sees the old file or the new one, each whole (the tokens of both are valid).
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let partial = path.with_extension(format!("kubeconfig.{}.{write}.tmp", std::process::id()));
    let written = async {
        tokio::fs::write(&partial, kubeconfig.to_string()).await?;
        tokio::fs::rename(&partial, &path).await
    };
    written
        .await
        .map_err(|source| IdentityError::WriteKubeconfig {
            path: path.clone(),
            source,
        })?;
    Ok(path)
}

/// Builds a client from a kubeconfig file. The client belongs to the calling tokio runtime.
pub(crate) async fn client_from_kubeconfig(path: &Path) -> Result<Client, IdentityError> {
    let load = |source| IdentityError::LoadKubeconfig {
        path: path.to_owned(),
        source,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(load)?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(load)?;
    Client::try_from(config).map_err(|source| IdentityError::Client {
        path: path.to_owned(),
        source,
    })
}
