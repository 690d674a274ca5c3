//! Handing the memory a compilation freed back to the system.
//!
//! Compiling a component allocates for every function at once: wasmtime keeps each compiled
//! function until it links them all. For an 18.7 MB CPython component that is ~300 MiB of
//! heap at the peak (Cranelift or Winch alike; measured with heaptrack, 2026-12-02), nearly
//! all of it freed when the compilation returns. glibc's allocator keeps freed memory for
//! reuse rather than returning it, so a host that had compiled one such plugin sat at the
//! peak for good. [`trim`] returns it after each compilation.

/// Returns the heap's free memory to the system (glibc's `malloc_trim`; elsewhere nothing:
/// musl's allocator, the static image's, returns freed memory by itself).
pub(crate) fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `malloc_trim` takes no pointer; it only releases pages of glibc's arenas
        // that no allocation uses, and is thread-safe (it locks each arena it trims).
        #[allow(unsafe_code)]
        unsafe {
            libc::malloc_trim(0);
        }
    }
}
