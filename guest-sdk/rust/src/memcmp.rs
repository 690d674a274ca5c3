//! A `memcmp` for wasm32 guests that compares eight bytes at a time.
//!
//! wasi-libc's `memcmp` compares one byte per loop iteration. Rust calls `memcmp` for every
//! string and byte-slice comparison, and decoding an object's labels and annotations into
//! k8s-openapi's `BTreeMap<String, String>` compares keys that share long prefixes
//! (`app.kubernetes.io/…`, `example.com/…`): in the dispatch benchmark that byte loop was
//! about a quarter of the guest's time. A definition in the plugin's own code takes precedence
//! over the one in the libc archive when the component is linked.
//!
//! Only the wasm32 build defines the symbol; native builds (tests, doctests) keep the
//! platform's. The comparison itself is plain safe code, tested on every target.

// Natively only the tests use the comparison.
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

use std::cmp::Ordering;

/// `memcmp` (C semantics: the sign of the first differing byte, compared as unsigned).
///
/// # Safety
/// `a` and `b` must each be valid for reads of `n` bytes, as C's `memcmp` requires.
#[cfg(target_arch = "wasm32")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    if n == 0 {
        return 0;
    }
    // SAFETY: the caller guarantees both ranges are readable for `n` (> 0) bytes, so the
    // pointers are non-null; u8 needs no alignment.
    let (a, b) = unsafe {
        (
            std::slice::from_raw_parts(a, n),
            std::slice::from_raw_parts(b, n),
        )
    };
    match compare(a, b) {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    }
}

/// Compares two equally long byte strings lexicographically, eight bytes per step.
///
/// Must not compare slices with `==` or `cmp`: those call `memcmp`, which is this function.
pub(crate) fn compare(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut words_a = a.chunks_exact(8);
    let mut words_b = b.chunks_exact(8);
    for (x, y) in (&mut words_a).zip(&mut words_b) {
        let (x, y) = (word(x), word(y));
        if x != y {
            // Big-endian order is byte order: the first differing byte decides.
            return x.swap_bytes().cmp(&y.swap_bytes());
        }
    }
    for (x, y) in words_a.remainder().iter().zip(words_b.remainder()) {
        if x != y {
            return x.cmp(y);
        }
    }
    Ordering::Equal
}

/// Eight bytes as one little-endian word: a single unaligned load on wasm32.
fn word(bytes: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(bytes);
    u64::from_le_bytes(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_orders_like_byte_slices() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"", b""),
            (b"a", b"b"),
            (b"example.com/annotation-10", b"example.com/annotation-11"),
            (b"example.com/annotation-2x", b"example.com/annotation-10"),
            (b"0123456789abcdef", b"0123456789abcdef"),
            (
                b"\x00\xff\x00\x00\x00\x00\x00\x00",
                b"\x01\x00\x00\x00\x00\x00\x00\x00",
            ),
            (b"\xff", b"\x7f"),
            (b"same prefix, then 0", b"same prefix, then 9"),
        ];
        for (a, b) in cases {
            assert_eq!(compare(a, b), a.cmp(b), "{a:?} vs {b:?}");
            assert_eq!(compare(b, a), b.cmp(a), "{b:?} vs {a:?}");
        }
    }

    #[test]
    fn compare_looks_only_at_the_common_length() {
        assert_eq!(compare(b"abc", b"abcdef"), Ordering::Equal);
    }
}
