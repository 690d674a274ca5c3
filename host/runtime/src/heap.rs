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

/// Components at least this large are compiled one at a time. Compiling holds about 17 times
/// the component's size at its peak (325 MiB of heap for the 18.7 MB CPython component), so
/// two such compilations at once (loads take one permit per CPU, and the background tier-up
/// runs beside them) doubled a host's peak: 1.76 GiB when ten Python plugins arrived into an
/// empty cache. A Rust plugin (~0.5 MB, a few MiB to compile) stays below and is never held
/// up; a Go one (~3.8 MB) is above.
pub(crate) const BIG_COMPONENT_BYTES: usize = 2 << 20;

/// The one-at-a-time rule for compiling big components, shared by loads, compilations
/// started ahead and the background tier-up of a runtime.
#[derive(Default)]
pub(crate) struct CompileGate {
    big: std::sync::Mutex<()>,
    #[cfg(feature = "test-hooks")]
    counts: GateCounts,
}

#[cfg(feature = "test-hooks")]
#[derive(Default)]
struct GateCounts {
    running: std::sync::atomic::AtomicUsize,
    most: std::sync::atomic::AtomicUsize,
}

impl CompileGate {
    /// Runs `compile` (a compilation of a `size`-byte component, on a blocking thread),
    /// after any other compilation of a big component when this one is big too, then returns
    /// the heap it freed ([`trim`]).
    pub(crate) fn compile<T>(&self, size: usize, compile: impl FnOnce() -> T) -> T {
        let _turn = (size >= BIG_COMPONENT_BYTES).then(|| {
            self.big
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        });
        #[cfg(feature = "test-hooks")]
        let _counted = _turn.as_ref().map(|_| self.counts.enter());
        let compiled = compile();
        trim();
        compiled
    }

    /// The most compilations of big components that ran at once (a test hook).
    #[cfg(feature = "test-hooks")]
    pub(crate) fn most_big_at_once(&self) -> usize {
        self.counts.most.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[cfg(feature = "test-hooks")]
impl GateCounts {
    fn enter(&self) -> impl Drop + '_ {
        use std::sync::atomic::Ordering::SeqCst;
        let now = self.running.fetch_add(1, SeqCst) + 1;
        self.most.fetch_max(now, SeqCst);
        struct Leave<'a>(&'a std::sync::atomic::AtomicUsize);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
        Leave(&self.running)
    }
}
