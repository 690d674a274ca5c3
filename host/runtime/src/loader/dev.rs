//! The sources of a `wasmop dev` build. A Python plugin's component is a whole CPython
//! (~19 MB) that takes seconds to build and to compile, while an edit changes a few
//! kilobytes of source. So under `wasmop dev` a Python project is built once into a runner
//! (the interpreter, the SDK and the modules the project imports), and each saved edit
//! appends the project's sources to that runner as a custom section named [`SECTION`], the
//! component's last. With [`crate::RuntimeConfig::dev_sources`] on, the loader cuts that
//! section off: the rest is the same runner every time, so it compiles once and later edits
//! load its cached artefact, and each of the version's calls (`describe` included) reads the
//! sources from its stdin and runs them.
//!
//! The sources are data for the plugin itself, as its settings are: they grant nothing, and
//! a plugin could as well carry them in its own memory. They are bounded by
//! [`MAX_SOURCES`]. Without `dev_sources` the section stays in the component, wasmtime
//! ignores it, and the runner says that it runs only under `wasmop dev`.

use bytes::Bytes;

use super::LoadError;
use wasmop_core::plugin::ComponentBytes;

/// The name of the custom section that carries a dev build's sources.
pub(crate) const SECTION: &str = "wasmop-dev-sources";

/// The most bytes of sources a dev build may carry.
pub(crate) const MAX_SOURCES: usize = 8 << 20;

/// A LEB128 `u32` at `*offset`, advancing past it; `None` if it does not fit the bytes.
fn leb_u32(bytes: &[u8], offset: &mut usize) -> Option<u32> {
    let mut value: u64 = 0;
    for shift in (0..35).step_by(7) {
        let b = *bytes.get(*offset)?;
        *offset += 1;
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return u32::try_from(value).ok();
        }
    }
    None
}

/// Where the last top-level section of a framed component starts, and its id and contents.
fn last_section(bytes: &[u8]) -> Option<(usize, u8, std::ops::Range<usize>)> {
    let mut offset = 8;
    let mut last = None;
    while offset < bytes.len() {
        let start = offset;
        let id = bytes[offset];
        offset += 1;
        let size = leb_u32(bytes, &mut offset)? as usize;
        let end = offset.checked_add(size).filter(|&e| e <= bytes.len())?;
        last = Some((start, id, offset..end));
        offset = end;
    }
    last
}

/// `component` (framed, see `check_framing`) split into the component to compile and the
/// sources of a dev build, when its last section is a custom section named [`SECTION`];
/// otherwise the component as it is.
///
/// # Errors
/// [`LoadError::DevSources`] when the sources are over [`MAX_SOURCES`].
pub(crate) fn split(
    component: ComponentBytes,
) -> Result<(ComponentBytes, Option<Bytes>), LoadError> {
    let Some((start, 0, contents)) = last_section(component.bytes()) else {
        return Ok((component, None));
    };
    let bytes = component.bytes();
    let mut at = contents.start;
    let Some(name_len) = leb_u32(bytes, &mut at) else {
        return Ok((component, None));
    };
    let name_end = at.saturating_add(name_len as usize);
    if name_end > contents.end || &bytes[at..name_end] != SECTION.as_bytes() {
        return Ok((component, None));
    }
    let sources = name_end..contents.end;
    if sources.len() > MAX_SOURCES {
        return Err(LoadError::DevSources {
            size: sources.len(),
            max: MAX_SOURCES,
        });
    }
    let sources = Bytes::copy_from_slice(&bytes[sources]);
    let mut runner = component.into_bytes();
    runner.truncate(start);
    Ok((ComponentBytes::new(runner), Some(sources)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A component header, one (empty core-module-like) section, and `tail`.
    fn component(tail: &[u8]) -> Vec<u8> {
        let mut bytes = b"\0asm\x0d\x00\x01\x00".to_vec();
        bytes.extend_from_slice(&[1, 3, 9, 9, 9]);
        bytes.extend_from_slice(tail);
        bytes
    }

    /// The custom section alone: what `with_custom_section` appends.
    fn custom(name: &str, payload: &[u8]) -> Vec<u8> {
        let empty = component(&[]);
        wasmop_test_guests::with_custom_section(&empty, name, payload)[empty.len()..].to_vec()
    }

    #[test]
    fn the_last_section_named_for_dev_is_cut_off_and_its_contents_returned() {
        let sources = vec![b'x'; 300];
        let bytes = component(&custom(SECTION, &sources));
        let (runner, got) = split(ComponentBytes::new(bytes)).expect("sources in bounds");
        assert_eq!(runner.bytes(), component(&[]));
        assert_eq!(
            runner.digest(),
            ComponentBytes::new(component(&[])).digest()
        );
        assert_eq!(got.as_deref(), Some(&sources[..]));
    }

    #[test]
    fn other_sections_and_a_dev_section_not_last_are_left_alone() {
        for bytes in [
            component(&[]),
            component(&custom("name", b"abc")),
            component(&[custom(SECTION, b"abc"), custom("name", b"x")].concat()),
            component(&custom("wasmop-dev-sourcesX", b"abc")),
        ] {
            let (same, got) = split(ComponentBytes::new(bytes.clone())).expect("no sources");
            assert_eq!(same.bytes(), bytes);
            assert!(got.is_none());
        }
    }

    #[test]
    fn sources_over_the_bound_are_refused() {
        let bytes = component(&custom(SECTION, &vec![0; MAX_SOURCES + 1]));
        let e = split(ComponentBytes::new(bytes)).expect_err("over the bound");
        assert!(e.to_string().contains("8388609 bytes of sources"), "{e}");
    }
}
