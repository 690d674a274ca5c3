//! What compiling and loading cost the host's memory, and how it gets it back.
//!
//! Compiling a component allocates for every function at once: wasmtime keeps each compiled
//! function until it links them all. For an 18.7 MB CPython component that is ~300 MiB of
//! heap at the peak (Cranelift or Winch alike; measured with heaptrack, 2026-12-02), nearly
//! all of it freed when the compilation returns. glibc's allocator keeps freed memory for
//! reuse rather than returning it, so a host that had compiled one such plugin sat at the
//! peak for good. [`trim`] returns it after each compilation (and [`Loads`] after each batch
//! of loads, which leave free heap too), and [`configure`] keeps big blocks out of the arenas
//! in the first place, which lowers the peak itself. Every compilation of a runtime goes
//! through [`CompileGate::compile`]: big components compile one at a time, on a scratch
//! engine that takes the compiler's kept buffers with it ([`compile_apart`]), and come back as
//! [`Compiled`].

/// glibc's mmap threshold, fixed: blocks this large or larger get their own mapping, returned
/// to the system when freed. Left alone, glibc raises the threshold to the size of each big
/// block a thread frees (up to 32 MiB on 64-bit), and Cranelift's register allocator frees
/// blocks of up to 31 MiB while compiling CPython's interpreter loop: from then on every
/// block up to that size comes from the compiling thread's arena, where the blocks still in use
/// around the freed ones keep its pages resident. Fixing the threshold at 1 MiB took the
/// host's peak while compiling the Python `database-config` from 489–510 MiB to 433–442 MiB,
/// and its RSS after from 156–175 MiB to 110–123 MiB, for compiles 2–5 % longer (bench
/// section 8's cold reload, four runs each way; the figures are in the README, "What a CPython
/// component costs the runtime").
const MMAP_THRESHOLD_BYTES: i32 = 1 << 20;
/// glibc's trim threshold, fixed with it (fixing the mmap threshold otherwise leaves it at
/// 128 KiB): free memory at the top of an arena beyond this is returned at once. At 128 KiB,
/// a Python call's host-side buffers (a few hundred KiB) were returned and faulted back in
/// on every call, about 36 page faults a call; at 2 MiB, none.
const TRIM_THRESHOLD_BYTES: i32 = 2 << 20;

/// Sets the allocator's thresholds above, once per process (glibc only; musl's allocator,
/// the static image's, maps big blocks on its own and has no such settings). Called by
/// [`crate::Runtime::new`], before any compilation.
pub(crate) fn configure() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: `mallopt` takes no pointer; it changes parameters of glibc's allocator
            // under its own lock and is safe to call with allocations live on other threads.
            #[allow(unsafe_code)]
            let set = unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
                    && libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1
            };
            if !set {
                tracing::debug!("glibc refused a malloc threshold; its defaults stay");
            }
        });
    }
}

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

/// Loads under way, so that the last one to end returns what they all freed to the system.
///
/// Loading a plugin from its cached artefact allocates and frees as it goes (the component's
/// bytes, their digest's reads, wasmtime's metadata decoded from the artefact, `describe`'s
/// buffers), and the blocks still in use between the freed ones keep glibc's arenas resident.
/// A host that had loaded 50 cached plugins held about 15 MiB of such free heap for good
/// (`malloc_trim` at idle took its RSS from 46.0 to 31.2 MiB; 2026-12-06). A trim per load
/// would walk every arena once per plugin; the last load of a batch (a start, a reload of
/// several) trims once for all of them.
#[derive(Default)]
pub(crate) struct Loads {
    running: std::sync::atomic::AtomicUsize,
    /// Trims done, for a test to see (`Runtime::heap_trims_after_loads`).
    trims: std::sync::atomic::AtomicUsize,
}

impl Loads {
    /// Counts a load until the returned guard drops; the drop that leaves none running trims
    /// the heap ([`trim`]), on a blocking thread when there is a tokio runtime.
    pub(crate) fn enter(self: &std::sync::Arc<Self>) -> impl Drop + Send + 'static {
        use std::sync::atomic::Ordering::SeqCst;
        self.running.fetch_add(1, SeqCst);
        struct Leave(std::sync::Arc<Loads>);
        impl Drop for Leave {
            fn drop(&mut self) {
                if self.0.running.fetch_sub(1, SeqCst) != 1 {
                    return;
                }
                let loads = std::sync::Arc::clone(&self.0);
                let run = move || {
                    trim();
                    loads.trims.fetch_add(1, SeqCst);
                };
                // `malloc_trim` locks each arena while it walks it: off the async threads.
                match tokio::runtime::Handle::try_current() {
                    Ok(handle) => drop(handle.spawn_blocking(run)),
                    Err(_) => run(),
                }
            }
        }
        Leave(std::sync::Arc::clone(self))
    }

    /// How many times the loads' end trimmed the heap (a test hook).
    #[cfg(feature = "test-hooks")]
    pub(crate) fn trims(&self) -> usize {
        self.trims.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Components at least this large are compiled one at a time. Compiling holds about 17 times
/// the component's size at its peak (325 MiB of heap for the 18.7 MB CPython component), so
/// two such compilations at once (loads take one permit per CPU, and the background tier-up
/// runs beside them) doubled a host's peak: 1.76 GiB when ten Python plugins arrived into an
/// empty cache. A Rust plugin (~0.5 MB, a few MiB to compile) stays below and is never held
/// up; a Go one (~3.8 MB) is above.
pub(crate) const BIG_COMPONENT_BYTES: usize = 2 << 20;

/// Compiles `bytes` for `engine`. A big component (at least [`BIG_COMPONENT_BYTES`]) is
/// compiled by `scratch`, an engine with `engine`'s settings made for this compilation alone,
/// and comes back serialized: [`Compiled::load`] loads it into `engine`, and an artefact cache
/// writes those bytes as they are (`ArtefactCache::store_and_map`), which spares serializing
/// the component a second time and loading a copy that would only be dropped for the mapped
/// one.
///
/// Why: wasmtime's compilers keep, for reuse, one context per compiling thread, and never give
/// them back: each keeps the buffers of the biggest function it compiled (Cranelift's
/// register allocator, for CPython's interpreter loop, holds blocks of up to 31 MiB). A host
/// that had compiled one Python plugin held 81 MB of such buffers for good when it compiled
/// with Cranelift alone, and 141 MB when Winch had compiled it first (glibc's `malloc_stats`,
/// after [`trim`]); a scratch engine takes them with it when it is dropped. What it costs is
/// building an engine (no instance pool: it never instantiates) and, without a cache,
/// loading the serialized code back, small beside the compilation.
fn compile_apart(
    engine: &wasmtime::Engine,
    scratch: impl FnOnce() -> wasmtime::Result<wasmtime::Engine>,
    bytes: &[u8],
) -> wasmtime::Result<Compiled> {
    use wasmtime::component::Component;
    if bytes.len() < BIG_COMPONENT_BYTES {
        return Component::new(engine, bytes).map(Compiled::from);
    }
    let scratch = scratch()?;
    let serialized = Component::new(&scratch, bytes)?.serialize()?;
    Ok(Compiled(Form::Serialized(serialized)))
}

/// What [`compile_apart`] made: a component, or the serialized code of one.
pub(crate) struct Compiled(Form);

enum Form {
    Component(wasmtime::component::Component),
    /// Only ever what `Component::serialize` wrote in [`compile_apart`].
    Serialized(Vec<u8>),
}

impl From<wasmtime::component::Component> for Compiled {
    fn from(component: wasmtime::component::Component) -> Self {
        Self(Form::Component(component))
    }
}

impl Compiled {
    /// The artefact's bytes: serialized now when this is a component.
    pub(crate) fn artefact(&self) -> wasmtime::Result<std::borrow::Cow<'_, [u8]>> {
        match &self.0 {
            Form::Component(component) => component.serialize().map(std::borrow::Cow::Owned),
            Form::Serialized(bytes) => Ok(std::borrow::Cow::Borrowed(bytes)),
        }
    }

    /// The component, in `engine` (which checks that the code was compiled with its
    /// settings, and refuses it with an error that names the setting otherwise).
    pub(crate) fn load(
        self,
        engine: &wasmtime::Engine,
    ) -> wasmtime::Result<wasmtime::component::Component> {
        match self.0 {
            Form::Component(component) => Ok(component),
            // SAFETY: the bytes are what `Component::serialize` wrote in `compile_apart` (the
            // only place that makes this form); `deserialize` checks the engine's settings.
            #[allow(unsafe_code)]
            Form::Serialized(bytes) => unsafe {
                wasmtime::component::Component::deserialize(engine, &bytes)
            },
        }
    }
}

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
    /// Compiles `bytes` for `engine` ([`compile_apart`], with `scratch` for a big component),
    /// on the calling (blocking) thread, after any other compilation of a big component when
    /// this one is big too, then returns the heap the compilation freed ([`trim`]).
    pub(crate) fn compile(
        &self,
        engine: &wasmtime::Engine,
        scratch: impl FnOnce() -> wasmtime::Result<wasmtime::Engine>,
        bytes: &[u8],
    ) -> wasmtime::Result<Compiled> {
        let _turn = (bytes.len() >= BIG_COMPONENT_BYTES).then(|| {
            self.big
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        });
        #[cfg(feature = "test-hooks")]
        let _counted = _turn.as_ref().map(|_| self.counts.enter());
        let compiled = compile_apart(engine, scratch, bytes);
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

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    /// glibc's chunk header: the word before a block holds its size, whose bit 1 says the
    /// block has a mapping of its own (`IS_MMAPPED`).
    #[allow(unsafe_code)]
    fn is_mmapped(block: *mut libc::c_void) -> bool {
        // SAFETY: `block` came from glibc's malloc and is live; the word before it is its
        // chunk header's size field.
        let size = unsafe { *block.cast::<usize>().sub(1) };
        size & 2 != 0
    }

    /// Set in the process [`big_blocks_keep_their_own_mapping_after_a_bigger_one_is_freed`]
    /// starts to run its checks.
    const CHILD: &str = "WASMOP_HEAP_TEST_CHILD";

    /// After a 31 MiB block (Cranelift's register allocator frees such blocks compiling
    /// CPython) is freed, a 2 MiB block still gets a mapping of its own, which goes back to the
    /// system when freed; with glibc's moving threshold it would come from an arena.
    ///
    /// The checks run in a process of their own (this test binary, running this test alone):
    /// here, other tests leave free chunks in the arenas, and glibc serves a request from those
    /// before it maps anything.
    #[test]
    #[allow(unsafe_code)]
    fn big_blocks_keep_their_own_mapping_after_a_bigger_one_is_freed() {
        if std::env::var_os(CHILD).is_none() {
            let name = "heap::tests::big_blocks_keep_their_own_mapping_after_a_bigger_one_is_freed";
            let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
                .args(["--exact", name, "--test-threads=1", "--nocapture"])
                .env(CHILD, "1")
                .output()
                .expect("run the test binary");
            assert!(
                out.status.success(),
                "the checks failed in their own process:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            return;
        }
        super::configure();
        // SAFETY: plain malloc/free pairs of blocks this test owns.
        unsafe {
            let huge = libc::malloc(31 << 20);
            assert!(!huge.is_null());
            assert!(
                is_mmapped(huge),
                "a 31 MiB block is always mapped on its own"
            );
            libc::free(huge);
            let big = libc::malloc(2 << 20);
            assert!(!big.is_null());
            let mapped = is_mmapped(big);
            libc::free(big);
            assert!(
                mapped,
                "a 2 MiB block came from an arena: glibc moved its mmap threshold"
            );
        }
    }
}

/// A component of [`BIG_COMPONENT_BYTES`] and a little more, which compiles in no time: a
/// module with a big data segment.
#[cfg(test)]
fn big_component() -> Vec<u8> {
    let pad = "a".repeat(BIG_COMPONENT_BYTES);
    let wat = format!(r#"(component (core module (memory 64) (data (i32.const 0) "{pad}")))"#);
    let bytes = wat::parse_str(wat).expect("wat");
    assert!(bytes.len() >= BIG_COMPONENT_BYTES);
    bytes
}

/// [`big_component`] and what a scratch engine with `engine`'s (default) settings made of it.
#[cfg(test)]
pub(crate) fn big_compiled_apart(engine: &wasmtime::Engine) -> (Vec<u8>, Compiled) {
    let bytes = big_component();
    let compiled = compile_apart(
        engine,
        || wasmtime::Engine::new(&wasmtime::Config::new()),
        &bytes,
    )
    .expect("compiles");
    (bytes, compiled)
}

#[cfg(test)]
mod compile_apart_tests {
    use super::{big_component, compile_apart};
    use wasmtime::{Config, Engine};

    /// A big component is compiled by the scratch engine and comes back as the main engine's
    /// (so the scratch engine, and the compiler contexts it kept, are gone with the call).
    #[test]
    fn a_big_component_is_compiled_apart_and_belongs_to_the_main_engine() {
        let engine = Engine::default();
        let mut scratches = 0;
        let component = compile_apart(
            &engine,
            || {
                scratches += 1;
                Engine::new(&Config::new())
            },
            &big_component(),
        )
        .and_then(|compiled| compiled.load(&engine))
        .expect("compiles");
        assert_eq!(
            scratches, 1,
            "a big component is compiled on a scratch engine"
        );
        assert!(Engine::same(component.engine(), &engine));

        // A small one is compiled by the main engine itself.
        let small = wat::parse_str("(component)").expect("wat");
        compile_apart(
            &engine,
            || panic!("no scratch engine for a small one"),
            &small,
        )
        .and_then(|compiled| compiled.load(&engine))
        .expect("compiles");
    }

    /// A scratch engine whose settings differ from the main engine's is refused when the
    /// main engine loads its code, not run.
    #[test]
    fn code_from_a_scratch_engine_with_other_settings_is_refused() {
        let engine = Engine::default();
        let error = compile_apart(
            &engine,
            || Engine::new(Config::new().consume_fuel(true)),
            &big_component(),
        )
        .and_then(|compiled| compiled.load(&engine))
        .expect_err("other settings");
        assert!(
            format!("{error:#}").contains("fuel"),
            "the error names the setting: {error:#}"
        );
    }
}
