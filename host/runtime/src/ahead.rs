//! Compiling ahead: a source that sees a new version before it has settled (a directory
//! during its debounce) lets the runtime start compiling it, so that the load which follows
//! finds the work done or under way instead of starting it then. On a cold reload from a
//! directory this hides the debounce behind the compilation.
//!
//! # Guarantees
//! - A load takes the compilation of its own digest only (the bytes are the same by
//!   construction), and at most once; anything else compiles as usual.
//! - At most [`MAX_AHEAD`] compilations are kept; more hints are ignored.
//!
//! # Cancellation
//! A compilation nobody takes is dropped by [`Ahead::clear`]; the blocking task finishes its
//! work and the result is discarded (compilation cannot be interrupted).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use tokio::task::JoinHandle;
use wasmtime::component::Component;

use super::loader::{LoadError, LoadStats};
use wasmop_core::plugin::Digest;

/// Compilations started ahead and not yet taken. One burst of changes brings a few new
/// versions at most; 8 bounds the CPU and memory a flood of hints can waste.
pub(crate) const MAX_AHEAD: usize = 8;

/// What compiling a component gives.
pub(crate) type Compiled = Result<(Component, LoadStats), LoadError>;

/// The compilations under way or done, by digest.
#[derive(Default)]
pub(crate) struct Ahead {
    tasks: Mutex<HashMap<Digest, JoinHandle<Compiled>>>,
}

impl Ahead {
    /// Starts `compile` on the blocking pool for `digest`, unless it is already under way or
    /// [`MAX_AHEAD`] are.
    pub(crate) fn start(
        &self,
        digest: Digest,
        compile: impl FnOnce() -> Compiled + Send + 'static,
    ) {
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        if tasks.contains_key(&digest) || tasks.len() >= MAX_AHEAD {
            return;
        }
        tasks.insert(digest, tokio::task::spawn_blocking(compile));
    }

    /// The compilation of `digest`, if one was started ahead; it is no longer kept here.
    pub(crate) fn take(&self, digest: &Digest) -> Option<JoinHandle<Compiled>> {
        self.tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(digest)
    }

    /// Forgets every compilation nobody took (hints for versions that were never loaded).
    pub(crate) fn clear(&self) {
        self.tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// How many are kept (for [`Runtime::compiling_ahead`](crate::Runtime::compiling_ahead)).
    #[cfg(feature = "test-hooks")]
    pub(crate) fn len(&self) -> usize {
        self.tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}
