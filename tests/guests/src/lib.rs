//! Paths of the wasm components built from `plugins/rust/*/`, `tests/hostile/*/` and
//! `tests/sdk/*/`.
//!
//! `build.rs` discovers every guest crate in those directories, builds them all for
//! `wasm32-wasip2` with the `wasm` profile (into `target/wasm-guests`) and records where each
//! component is. A guest is named by its directory: `plugins/rust/database-config` is
//! `"database-config"`, `tests/hostile/infinite-loop` is `"infinite-loop"`. The Python example
//! plugins (`plugins/python/<name>`, twins of the Rust ones with the same names) are built by
//! `tests/python` (`wasmop_python_plugins::component`), not listed here (see `build.rs`).
//!
//! ```no_run
//! let bytes = std::fs::read(wasmop_test_guests::component("database-config")).unwrap();
//! assert_eq!(&bytes[..4], b"\0asm");
//! ```

use std::path::Path;

/// Which directory a guest comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GuestKind {
    /// An example plugin from `plugins/<language>/` (today `plugins/rust/`).
    Plugin,
    /// A misbehaving test plugin from `tests/hostile/`.
    Hostile,
    /// A guest from `tests/sdk/` that exercises the guest SDK.
    Sdk,
}

/// One built guest component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Guest {
    /// The guest's directory name, e.g. `database-config`.
    pub name: &'static str,
    /// Whether it is an example plugin or a hostile test plugin.
    pub kind: GuestKind,
    /// Its cargo package name.
    pub package: &'static str,
    path: &'static str,
}

impl Guest {
    /// The component file (a copy made for this build of the crate, so it does not change
    /// while tests run).
    pub fn path(&self) -> &'static Path {
        Path::new(self.path)
    }
}

include!(concat!(env!("OUT_DIR"), "/guests.rs"));

/// Every built guest, sorted by name.
pub fn all() -> &'static [Guest] {
    GUESTS
}

/// The guest named `name`, if there is one.
pub fn find(name: &str) -> Option<&'static Guest> {
    GUESTS.iter().find(|g| g.name == name)
}

/// The component file of the guest named `name` (its directory name under `plugins/rust/`,
/// `tests/hostile/` or `tests/sdk/`).
///
/// # Panics
/// When no guest has that name; the message lists the guests there are. This is for tests,
/// where a typo should fail loudly.
pub fn component(name: &str) -> &'static Path {
    match find(name) {
        Some(guest) => guest.path(),
        None => panic!(
            "no guest component named `{name}`; built guests: [{}]. A guest is a crate directory \
             under plugins/rust/, tests/hostile/ or tests/sdk/ that is a workspace member",
            GUESTS.iter().map(|g| g.name).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// `component` with a custom section named `name` holding `payload` appended: the same code
/// under another digest (a host must compile it again), as big as the payload makes it.
pub fn with_custom_section(component: &[u8], name: &str, payload: &[u8]) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let mut body = Vec::new();
    leb(name.len(), &mut body);
    body.extend_from_slice(name.as_bytes());
    body.extend_from_slice(payload);
    let mut out = component.to_vec();
    out.push(0);
    leb(body.len(), &mut out);
    out.extend_from_slice(&body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_guest_is_a_wasm_file_named_by_its_directory() {
        for guest in all() {
            let bytes = std::fs::read(guest.path()).expect("built guest exists");
            assert_eq!(&bytes[..4], b"\0asm", "{} is not wasm", guest.name);
            assert_eq!(component(guest.name), guest.path());
        }
    }

    #[test]
    #[should_panic(expected = "no guest component named `no-such-guest`")]
    fn unknown_guest_name_panics_with_the_known_names() {
        component("no-such-guest");
    }
}
