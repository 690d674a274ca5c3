//! Components compressed with zstd: how a plugin too big for a ConfigMap's 1 MiB (a Go plugin:
//! about 4.3 MB, 0.84 MB with `zstd -19`) ships in one. Recognised by zstd's magic number,
//! whatever the source or the file name, and decompressed once, before anything else looks at
//! the bytes: the plugin's digest, its cached artefact and `wasmop compile`'s artefacts are the
//! decompressed component's, so a compressed copy and the plain one are the same version.
//!
//! # Bounds
//! The bytes come from whoever wrote the source, so decompression is bounded: the output
//! stops at [`MAX_COMPONENT_LEN`] (a frame that expands further is refused, never held whole),
//! and a frame may not ask for a window larger than that (the decoder's own buffer). One zstd
//! frame is one component: bytes after it are refused, not ignored.

use std::io::Read;

use wasmop_core::plugin::{ComponentBytes, MAX_COMPONENT_LEN};

/// The magic number a zstd frame starts with (little-endian 0xFD2FB528).
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Why compressed bytes are not a component.
#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    /// The frame cannot be decoded.
    #[error("compressed with zstd, but the frame cannot be decoded: {0}")]
    Damaged(String),
    /// The frame's content checksum does not match what it decoded to.
    #[error(
        "compressed with zstd, but what it decodes to fails the frame's checksum \
         ({computed:#010x}, the frame says {stored:#010x}): the file is damaged"
    )]
    Checksum {
        /// The checksum the frame carries.
        stored: u32,
        /// The checksum of the decoded bytes.
        computed: u32,
    },
    /// It decompresses to more than a component may be.
    #[error(
        "compressed with zstd, but it decompresses to more than the {MAX_COMPONENT_LEN} bytes a \
         component may be"
    )]
    TooLarge,
    /// Bytes follow the frame.
    #[error(
        "compressed with zstd, but {0} bytes follow its frame: a compressed component is one \
         zstd frame (`zstd plugin.wasm` makes one)"
    )]
    Trailing(usize),
}

/// Whether `bytes` start like a zstd frame.
pub fn is_compressed(bytes: &[u8]) -> bool {
    bytes.starts_with(&ZSTD_MAGIC)
}

/// The component itself: `component` decompressed if it is a zstd frame (with the digest of
/// what it decompressed to), otherwise `component` unchanged.
pub fn unpack(component: ComponentBytes) -> Result<ComponentBytes, UnpackError> {
    if !is_compressed(component.bytes()) {
        return Ok(component);
    }
    decompress(component.bytes()).map(ComponentBytes::new)
}

fn decompress(bytes: &[u8]) -> Result<Vec<u8>, UnpackError> {
    let damaged = |e: &dyn std::fmt::Display| UnpackError::Damaged(e.to_string());
    let mut input = bytes;
    let mut decoder = ruzstd::decoding::StreamingDecoder::new_with_max_window_size(
        &mut input,
        MAX_COMPONENT_LEN as u64,
    )
    .map_err(|e| damaged(&e))?;
    let mut out = Vec::new();
    (&mut decoder)
        .take(MAX_COMPONENT_LEN as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| damaged(&e))?;
    if out.len() > MAX_COMPONENT_LEN {
        return Err(UnpackError::TooLarge);
    }
    if !decoder.decoder.is_finished() {
        return Err(UnpackError::Damaged(
            "the frame ends before its last block".into(),
        ));
    }
    if let (Some(stored), Some(computed)) = (
        decoder.decoder.get_checksum_from_data(),
        decoder.decoder.get_calculated_checksum(),
    ) && stored != computed
    {
        return Err(UnpackError::Checksum { stored, computed });
    }
    drop(decoder);
    if !input.is_empty() {
        return Err(UnpackError::Trailing(input.len()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ruzstd::encoding::{CompressionLevel, compress_to_vec};

    fn zstd(bytes: &[u8]) -> Vec<u8> {
        compress_to_vec(bytes, CompressionLevel::Fastest)
    }

    #[test]
    fn plain_bytes_pass_through_unchanged() {
        let plain = ComponentBytes::new(b"\0asm\x0d\0\x01\0".to_vec());
        let digest = plain.digest();
        let out = unpack(plain).expect("unpacks");
        assert_eq!(out.bytes(), b"\0asm\x0d\0\x01\0");
        assert_eq!(out.digest(), digest);
    }

    #[test]
    fn a_frame_decompresses_to_the_component_and_its_digest() {
        let component: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let out = unpack(ComponentBytes::new(zstd(&component))).expect("unpacks");
        assert_eq!(out.bytes(), component);
        assert_eq!(out.digest(), ComponentBytes::new(component).digest());
    }

    #[test]
    fn a_bomb_stops_at_the_bound() {
        // 129 MiB of zeros: a few KB compressed.
        let bomb = zstd(&vec![0u8; MAX_COMPONENT_LEN + (1 << 20)]);
        assert!(bomb.len() < 64 << 10, "{} bytes", bomb.len());
        let error = unpack(ComponentBytes::new(bomb)).expect_err("refused");
        assert!(matches!(error, UnpackError::TooLarge), "{error}");
        assert_eq!(
            error.to_string(),
            "compressed with zstd, but it decompresses to more than the 134217728 bytes a \
             component may be"
        );
    }

    #[test]
    fn exactly_the_bound_is_accepted() {
        let out =
            unpack(ComponentBytes::new(zstd(&vec![7u8; MAX_COMPONENT_LEN]))).expect("unpacks");
        assert_eq!(out.bytes().len(), MAX_COMPONENT_LEN);
    }

    #[test]
    fn damage_is_an_error_never_a_panic() {
        let component: Vec<u8> = (0..50_000u32)
            .flat_map(|i| (i * 7919).to_le_bytes())
            .collect();
        let frame = zstd(&component);
        // The frame cut short, then each byte after the magic flipped in turn (a sample).
        let cut = &frame[..frame.len() / 2];
        assert!(matches!(
            unpack(ComponentBytes::new(cut.to_vec())),
            Err(UnpackError::Damaged(_))
        ));
        for at in (4..frame.len()).step_by(97) {
            let mut bad = frame.clone();
            bad[at] ^= 0x5a;
            // Damage in literal bytes can decode to other bytes (the component's validation
            // refuses those later): only a panic would fail here.
            let _ = unpack(ComponentBytes::new(bad));
        }
        let only_magic = ZSTD_MAGIC.to_vec();
        assert!(matches!(
            unpack(ComponentBytes::new(only_magic)),
            Err(UnpackError::Damaged(_))
        ));
    }

    #[test]
    fn bytes_after_the_frame_are_refused() {
        let mut two = zstd(b"\0asm one");
        two.extend(zstd(b"\0asm two"));
        let one_len = zstd(b"\0asm one").len();
        let error = unpack(ComponentBytes::new(two.clone())).expect_err("refused");
        assert!(
            matches!(error, UnpackError::Trailing(n) if n == two.len() - one_len),
            "{error}"
        );
    }

    #[test]
    fn a_window_larger_than_a_component_is_refused_before_any_allocation() {
        // A frame header asking for a 2 GiB window (window descriptor: exponent 21) and no
        // content-size field, then nothing.
        let header = [0x28, 0xb5, 0x2f, 0xfd, 0x00, (21 << 3) as u8];
        let error = unpack(ComponentBytes::new(header.to_vec())).expect_err("refused");
        assert!(matches!(error, UnpackError::Damaged(_)), "{error}");
        assert!(error.to_string().contains("window"), "{error}");
    }
}
