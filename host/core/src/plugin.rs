//! What identifies a plugin and what it declares: its name (a DNS-1123 label, parsed once),
//! the sha256 digest that identifies one version of its bytes, and [`PluginInfo`], the
//! host-side form of the WIT `info` record that `describe` returns.

pub mod text;

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use kube_core::GroupVersionKind;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// A Kubernetes verb a plugin can be granted; mirrors the WIT `verb` enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verb {
    /// `kube.get`.
    Get,
    /// `kube.list`.
    List,
    /// `kube.create`.
    Create,
    /// `kube.patch` with a merge, JSON or strategic-merge patch.
    Patch,
    /// `kube.apply`, and `kube.patch` with an apply patch.
    Apply,
    /// `kube.delete`.
    Delete,
    /// `kube.patch-status`.
    PatchStatus,
}

impl Verb {
    /// Whether the verb changes the cluster (everything but `get` and `list`).
    pub fn writes(self) -> bool {
        !matches!(self, Verb::Get | Verb::List)
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Create => "create",
            Verb::Patch => "patch",
            Verb::Apply => "apply",
            Verb::Delete => "delete",
            Verb::PatchStatus => "patch-status",
        })
    }
}

/// A permission a plugin asks for beyond those its kinds imply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permission {
    /// API group; `""` for the core group.
    pub group: String,
    /// The kind.
    pub kind: String,
    /// The verbs asked for.
    pub verbs: BTreeSet<Verb>,
    /// Namespaces it applies to; empty means every namespace the plugin may see.
    pub namespaces: Vec<String>,
}

/// How a change to a watched kind maps to primary objects; mirrors the WIT `mapping`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mapping {
    /// The primary object with the same namespace and name.
    SameName,
    /// The primary object named by this label's value.
    Label(String),
    /// The primary object named by this annotation's value (`name` or `namespace/name`).
    Annotation(String),
    /// Every primary object in the changed object's namespace.
    AllInNamespace,
    /// Every primary object.
    All,
}

/// An extra watched kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watch {
    /// The watched kind.
    pub kind: GroupVersionKind,
    /// A label selector narrowing the watch.
    pub selector: Option<String>,
    /// How a change maps to primary objects.
    pub mapping: Mapping,
}

/// Everything a plugin declares about itself, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginInfo {
    /// The plugin's name.
    pub name: PluginName,
    /// The plugin's own version string, for people.
    pub version: String,
    /// The kind it reconciles.
    pub primary: GroupVersionKind,
    /// A label selector narrowing which primary objects it sees.
    pub primary_selector: Option<String>,
    /// Kinds it creates and owns.
    pub owns: Vec<GroupVersionKind>,
    /// Other kinds it watches.
    pub watches: Vec<Watch>,
    /// Its finalizer, if it has one.
    pub finalizer: Option<String>,
    /// Whether metadata-only changes to primary objects trigger a reconcile.
    pub reconcile_on_metadata_change: bool,
    /// Permissions beyond those its kinds imply.
    pub permissions: Vec<Permission>,
}

/// What the policy judges of a plugin: its name, its reconciler's declaration when it
/// reconciles, and the reads its admission half asks for beyond them (`get` and `list`
/// only, checked when the declaration is). A plugin that only serves admission has no
/// reconciler: it holds only those reads (and sees the objects it reviews).
#[derive(Debug, Clone, Copy)]
pub struct Declared<'a> {
    /// The plugin's name.
    pub name: &'a PluginName,
    /// What its reconciler declared; `None` for a plugin that only serves admission.
    pub reconciler: Option<&'a PluginInfo>,
    /// The reads its admission half asks for.
    pub review_reads: &'a [Permission],
}

impl<'a> Declared<'a> {
    /// Every permission it asks for beyond its kinds: its reconciler's, then its admission
    /// half's.
    pub fn permissions(&self) -> impl Iterator<Item = &'a Permission> + use<'a> {
        self.reconciler
            .map(|i| i.permissions.as_slice())
            .unwrap_or_default()
            .iter()
            .chain(self.review_reads)
    }
}

impl<'a> From<&'a PluginInfo> for Declared<'a> {
    fn from(info: &'a PluginInfo) -> Self {
        Self {
            name: &info.name,
            reconciler: Some(info),
            review_reads: &[],
        }
    }
}

/// Why a plugin name is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginNameError {
    /// The name is empty.
    #[error("plugin name is empty")]
    Empty,
    /// The name is longer than a DNS-1123 label may be.
    #[error("plugin name `{name}` is {len} characters long; at most 63 are allowed")]
    TooLong {
        /// The offending name.
        name: String,
        /// Its length.
        len: usize,
    },
    /// The name contains a character outside `[a-z0-9-]` or starts/ends with `-`.
    #[error(
        "plugin name `{0}` is not a DNS-1123 label (lowercase letters, digits and `-`, \
         starting and ending with a letter or digit)"
    )]
    Invalid(String),
}

/// A plugin's name: a DNS-1123 label. It names the controller, the field manager
/// `wasmop/<name>`, log fields and metric labels, so it must be valid in all of those.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PluginName(String);

impl PluginName {
    /// Kubernetes limits a label value (and so a DNS-1123 label) to 63 characters.
    pub(crate) const MAX_LEN: usize = 63;

    /// Parses a name.
    pub fn new(name: impl Into<String>) -> Result<Self, PluginNameError> {
        let name = name.into();
        if name.is_empty() {
            return Err(PluginNameError::Empty);
        }
        if name.len() > Self::MAX_LEN {
            let len = name.len();
            return Err(PluginNameError::TooLong { name, len });
        }
        let valid_chars = name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !valid_chars || name.starts_with('-') || name.ends_with('-') {
            return Err(PluginNameError::Invalid(name));
        }
        Ok(Self(name))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The server-side-apply field manager writes by this plugin are made with.
    pub fn field_manager(&self) -> String {
        format!("wasmop/{}", self.0)
    }
}

impl fmt::Display for PluginName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for PluginName {
    type Err = PluginNameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

impl TryFrom<String> for PluginName {
    type Error = PluginNameError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::new(s)
    }
}

impl From<PluginName> for String {
    fn from(n: PluginName) -> String {
        n.0
    }
}

/// The sha256 of a component's bytes: the identity of one plugin version.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest([u8; 32]);

impl Digest {
    /// Hashes `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// The first 12 hex digits, enough to tell versions apart in logs. Made from the first six
    /// bytes alone: every reconcile's span carries it, and formatting all 32 through `fmt`
    /// was a measurable part of a call's fixed cost.
    pub fn short(&self) -> String {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        self.0[..6]
            .iter()
            .flat_map(|b| [HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]])
            .map(char::from)
            .collect()
    }
}

impl From<[u8; 32]> for Digest {
    fn from(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }
}

/// The most bytes a component may have, as a source holds it or once decompressed: far above
/// any plugin seen (a Python plugin, CPython included, is about 19 MB), and a bound on what
/// a source read or a compressed component's expansion can make the host hold.
pub const MAX_COMPONENT_LEN: usize = 128 << 20;

/// Whether `key` (a file name in a directory source, a key in a ConfigMap) names a
/// component: it ends in `.wasm`, or `.wasm.zst` for one compressed with zstd, and is not
/// hidden (a mounted ConfigMap's `..data` entries are).
pub fn is_component_key(key: &str) -> bool {
    (key.ends_with(".wasm") || key.ends_with(".wasm.zst")) && !key.starts_with('.')
}

/// A component's bytes with their [`Digest`], hashed once where the bytes are read: the
/// registry compares versions by it and the loader finds the cached artefact by it, and
/// hashing a component twice was a measurable part of start-up. The fields are private, so
/// the digest always belongs to the bytes.
#[derive(Debug, Clone)]
pub struct ComponentBytes {
    bytes: Vec<u8>,
    digest: Digest,
}

impl ComponentBytes {
    /// Hashes `bytes`.
    pub fn new(bytes: Vec<u8>) -> Self {
        let digest = Digest::of(&bytes);
        Self { bytes, digest }
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Their digest.
    pub fn digest(&self) -> Digest {
        self.digest
    }

    /// The bytes, without their digest.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

impl From<Vec<u8>> for ComponentBytes {
    fn from(bytes: Vec<u8>) -> Self {
        Self::new(bytes)
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{self}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_digest_is_the_first_twelve_hex_digits() {
        let digest = Digest::of(b"component bytes");
        assert_eq!(digest.short(), digest.to_string()[..12]);
    }

    #[test]
    fn accepts_dns_1123_labels() {
        for ok in ["a", "database-config", "x1", &"a".repeat(63)] {
            assert!(PluginName::new(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn rejects_names_that_are_not_dns_1123_labels() {
        assert_eq!(PluginName::new(""), Err(PluginNameError::Empty));
        assert!(matches!(
            PluginName::new("a".repeat(64)),
            Err(PluginNameError::TooLong { len: 64, .. })
        ));
        for bad in [
            "Upper",
            "-lead",
            "trail-",
            "under_score",
            "dot.ted",
            "spa ce",
        ] {
            assert!(
                matches!(PluginName::new(bad), Err(PluginNameError::Invalid(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn field_manager_is_prefixed_with_wasmop() {
        let name = PluginName::new("database-config").expect("valid");
        assert_eq!(name.field_manager(), "wasmop/database-config");
    }

    #[test]
    fn digest_renders_as_lowercase_hex() {
        let d = Digest::of(b"abc");
        assert_eq!(
            d.to_string(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(d.short(), "ba7816bf8f01");
    }
}
