//! What a component must be to load, checked before wasmtime compiles it so that a bad one
//! is refused with a clear reason: the binary framing (a component, not a core module, with
//! every section whole), the `wasmop:plugin` world it targets and its contract version (one
//! of [`CONTRACTS`], the same for every `wasmop:plugin` item it imports or exports).

use wasmtime::Engine;
use wasmtime::component::Component;

use super::LoadError;

/// The current `wasmop:plugin` version: what `wit/plugin.wit` says.
pub(crate) const WIT_VERSION: ContractVersion = ContractVersion {
    major: 0,
    minor: 3,
    patch: 0,
};

/// The frozen 0.2 contract (`wit/0.2.0/plugin.wit`), still loaded.
pub(crate) const WIT_0_2: ContractVersion = ContractVersion {
    major: 0,
    minor: 2,
    patch: 0,
};

/// The frozen 0.1 contract (`wit/0.1.0/plugin.wit`), still loaded.
pub(crate) const WIT_0_1: ContractVersion = ContractVersion {
    major: 0,
    minor: 1,
    patch: 0,
};

/// Every `wasmop:plugin` version this host implements, newest first. A component built
/// against a version semver-compatible with one of them loads (see [`crate::contract`]).
pub(crate) const CONTRACTS: [ContractVersion; 3] = [WIT_VERSION, WIT_0_2, WIT_0_1];

const PACKAGE: &str = "wasmop:plugin/";

/// A semver version of the `wasmop:plugin` WIT package: what a component was built against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContractVersion {
    /// Major.
    pub major: u64,
    /// Minor.
    pub minor: u64,
    /// Patch.
    pub patch: u64,
}

impl ContractVersion {
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
    pub(crate) fn compatible_with(&self, other: &ContractVersion) -> bool {
        self.major == other.major && (self.major != 0 || self.minor == other.minor)
    }
}

impl std::fmt::Display for ContractVersion {
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

/// The versions of [`CONTRACTS`], as an error message lists them:
/// `wasmop:plugin@0.3.0, wasmop:plugin@0.2.0 and wasmop:plugin@0.1.0`.
pub(crate) fn supported() -> String {
    let all: Vec<String> = CONTRACTS
        .iter()
        .map(|v| format!("wasmop:plugin@{v}"))
        .collect();
    match all.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// Checks the component's imports and exports by name, for clear messages before wasmtime's
/// own type-check, and returns the contract version they name: one that [`CONTRACTS`] holds
/// a compatible version of, the same for every `wasmop:plugin` item.
pub(super) fn check_world(
    engine: &Engine,
    component: &Component,
) -> Result<ContractVersion, LoadError> {
    let ty = component.component_type();
    let exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_owned()).collect();
    let imports: Vec<String> = ty.imports(engine).map(|(n, _)| n.to_owned()).collect();
    // The first item's version, and which item named it.
    let mut target: Option<(ContractVersion, &str)> = None;
    for name in exports.iter().chain(&imports) {
        let Some((_, version)) = split_package_item(name) else {
            continue;
        };
        let Some(found) = ContractVersion::parse(version)
            .filter(|v| CONTRACTS.iter().any(|c| v.compatible_with(c)))
        else {
            return Err(LoadError::IncompatibleVersion {
                found: version.to_owned(),
                supported: supported(),
                item: name.clone(),
            });
        };
        match target {
            None => target = Some((found, name)),
            Some((first, first_item)) if !first.compatible_with(&found) => {
                return Err(LoadError::MixedVersions {
                    first: first_item.to_owned(),
                    second: name.clone(),
                });
            }
            Some(_) => {}
        }
    }
    // 0.1 and 0.2 plugins reconcile; from 0.3 a plugin may instead (or also) review
    // admission requests.
    let serves = |iface: &str| {
        exports.iter().any(|e| {
            e.strip_prefix(PACKAGE)
                .is_some_and(|i| i.starts_with(iface))
        })
    };
    let admits = serves("admission@")
        && target
            .is_some_and(|(v, _)| !v.compatible_with(&WIT_0_1) && !v.compatible_with(&WIT_0_2));
    if !serves("reconciler@") && !admits {
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
    // The reconciler or admission export names a version, so `target` is set.
    Ok(target.map_or(WIT_VERSION, |(version, _)| version))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wit_versions_match_the_wit_packages() {
        let wit = include_str!("../../../../wit/plugin.wit");
        assert!(wit.contains(&format!("package wasmop:plugin@{WIT_VERSION};")));
        let frozen = include_str!("../../../../wit/0.2.0/plugin.wit");
        assert!(frozen.contains(&format!("package wasmop:plugin@{WIT_0_2};")));
        let frozen = include_str!("../../../../wit/0.1.0/plugin.wit");
        assert!(frozen.contains(&format!("package wasmop:plugin@{WIT_0_1};")));
    }

    #[test]
    fn version_compatibility_follows_component_model_semver() {
        let v = |s| ContractVersion::parse(s).expect(s);
        assert!(v("0.3.3").compatible_with(&WIT_VERSION));
        assert!(v("0.2.3").compatible_with(&WIT_0_2));
        assert!(v("0.1.3").compatible_with(&WIT_0_1));
        assert!(!v("0.2.0").compatible_with(&WIT_VERSION));
        assert!(!v("0.4.0").compatible_with(&WIT_VERSION));
        assert!(!v("1.0.0").compatible_with(&WIT_VERSION));
        assert_eq!(
            supported(),
            "wasmop:plugin@0.3.0, wasmop:plugin@0.2.0 and wasmop:plugin@0.1.0"
        );
        assert!(v("1.4.0").compatible_with(&v("1.0.0")));
        assert!(ContractVersion::parse("1.x").is_none());
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
