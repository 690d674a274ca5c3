//! What a component must be to load, checked before wasmtime compiles it so that a bad one
//! is refused with a clear reason: the binary framing (a component, not a core module, with
//! every section whole), the `wasmop:plugin` world it targets and its contract version.

use wasmtime::Engine;
use wasmtime::component::Component;

use super::LoadError;

/// The `wasmop:plugin` version this host implements.
pub(super) const WIT_VERSION: Version = Version {
    major: 0,
    minor: 1,
    patch: 0,
};

const PACKAGE: &str = "wasmop:plugin/";

/// A semver version of the WIT package.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version {
    /// Major.
    pub major: u64,
    /// Minor.
    pub minor: u64,
    /// Patch.
    pub patch: u64,
}

impl Version {
    fn parse(s: &str) -> Option<Self> {
        let core = s.split(['-', '+']).next()?;
        let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
        let v = Self {
            major: parts.next()??,
            minor: parts.next()??,
            patch: parts.next()??,
        };
        parts.next().is_none().then_some(v)
    }

    /// Semver compatibility as the component model sees it: same major, and while the major
    /// is 0, same minor.
    fn compatible_with(&self, other: &Version) -> bool {
        self.major == other.major && (self.major != 0 || self.minor == other.minor)
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Checks the framing: magic, binary version and layer, and that every top-level section fits.
pub(super) fn check_framing(bytes: &[u8]) -> Result<(), LoadError> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(LoadError::NotWasm);
    }
    let version = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
    match version {
        0x0001_000d => {}
        0x0000_0001 => return Err(LoadError::CoreModule),
        other => return Err(LoadError::UnknownBinaryVersion(other)),
    }
    let mut offset = 8;
    while offset < bytes.len() {
        let start = offset;
        offset += 1; // section id
        let mut size: u64 = 0;
        let mut shift = 0;
        loop {
            let Some(&b) = bytes.get(offset) else {
                return Err(LoadError::Truncated {
                    offset: start,
                    needed: offset + 1,
                    len: bytes.len(),
                });
            };
            offset += 1;
            size |= u64::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 || shift > 35 {
                break;
            }
        }
        let end = offset.saturating_add(usize::try_from(size).unwrap_or(usize::MAX));
        if end > bytes.len() {
            return Err(LoadError::Truncated {
                offset: start,
                needed: end,
                len: bytes.len(),
            });
        }
        offset = end;
    }
    Ok(())
}

/// `wasmop:plugin/<iface>@<version>` → (iface, version text).
fn split_package_item(name: &str) -> Option<(&str, &str)> {
    name.strip_prefix(PACKAGE)?.split_once('@')
}

/// Checks the component's imports and exports by name, for clear messages before wasmtime's
/// own type-check.
pub(super) fn check_world(engine: &Engine, component: &Component) -> Result<(), LoadError> {
    let ty = component.component_type();
    let exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_owned()).collect();
    let imports: Vec<String> = ty.imports(engine).map(|(n, _)| n.to_owned()).collect();
    for name in exports.iter().chain(&imports) {
        if let Some((_, version)) = split_package_item(name) {
            let compatible =
                Version::parse(version).is_some_and(|v| v.compatible_with(&WIT_VERSION));
            if !compatible {
                return Err(LoadError::IncompatibleVersion {
                    found: version.to_owned(),
                    supported: WIT_VERSION,
                    item: name.clone(),
                });
            }
        }
    }
    if !exports
        .iter()
        .any(|e| e.starts_with("wasmop:plugin/reconciler@"))
    {
        return Err(LoadError::OtherWorld {
            exports: if exports.is_empty() {
                "nothing".into()
            } else {
                exports.join(", ")
            },
        });
    }
    let unknown: Vec<&str> = imports
        .iter()
        .map(String::as_str)
        .filter(|i| !(i.starts_with(PACKAGE) || i.starts_with("wasi:")))
        .collect();
    if !unknown.is_empty() {
        return Err(LoadError::UnsatisfiableImports {
            imports: unknown.join(", "),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wit_version_matches_the_wit_package() {
        let wit = include_str!("../../../../wit/plugin.wit");
        assert!(wit.contains(&format!("package wasmop:plugin@{WIT_VERSION};")));
    }

    #[test]
    fn version_compatibility_follows_component_model_semver() {
        let v = |s| Version::parse(s).expect(s);
        assert!(v("0.1.3").compatible_with(&WIT_VERSION));
        assert!(!v("0.2.0").compatible_with(&WIT_VERSION));
        assert!(!v("1.0.0").compatible_with(&WIT_VERSION));
        assert!(v("1.4.0").compatible_with(&v("1.0.0")));
        assert!(Version::parse("1.x").is_none());
    }

    #[test]
    fn framing_check_names_what_is_wrong() {
        assert!(matches!(
            check_framing(b"hello world"),
            Err(LoadError::NotWasm)
        ));
        assert!(matches!(
            check_framing(b"\0asm\x01\0\0\0"),
            Err(LoadError::CoreModule)
        ));
        // A component header, then a section claiming 100 bytes with 2 present.
        let cut = b"\0asm\x0d\0\x01\0\x01\x64ab";
        assert!(matches!(
            check_framing(cut),
            Err(LoadError::Truncated {
                offset: 8,
                needed: 110,
                len: 12
            })
        ));
        assert!(check_framing(b"\0asm\x0d\0\x01\0").is_ok());
    }
}
