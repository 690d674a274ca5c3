"""What wasmop changes in wit-bindgen-go 0.63's Go: five changes to the copy of its runtime
package (`go.bytecodealliance.org/pkg/wit/runtime`) that `guest-sdk/go/build --setup` makes,
and one file the build adds to each generated main package. guest-sdk/go/README.md says why
each is there and what it measured; `allocate_test.go` beside this file is copied in with the
runtime package and run by the test suite (tests/go/tests/sdk.rs).

Each change names the upstream text it replaces, and applying it refuses text that no longer
has it exactly once: a new wit-bindgen-go must be looked at, not patched blindly.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

ALLOCATE_TEST = Path(__file__).resolve().parent / "allocate_test.go"

# The alignment fix's pin: setup refuses a runtime.go whose allocateRaw is not this code.
UNALIGNED = """\tif size%align != 0 {
\t\tpanic(fmt.Sprintf("size %v is not compatible with alignment %v", size, align))
\t}
"""
ALIGNED = """\t// wasmop: round the size up to the alignment instead of panicking. wit-bindgen-go
\t// 0.63 allocates the export return area with a size that need not be a multiple of
\t// its alignment (describe's: 92 bytes, 8-aligned); see guest-sdk/go/README.md.
\tsize = (size + align - 1) / align * align
"""

# The re-entrancy fix, which pre-initialisation needs: in a pre-initialised module, Go's
# package init functions have run, so `cabi_realloc` allocates on the GC heap from the first
# call on and tells the WASI adapter to pause its clock first; that first call into the
# adapter makes the adapter allocate its own stack and state through `cabi_realloc` again,
# which would call the adapter again before its state exists (it asserts). Without
# pre-initialisation the adapter is set up during `_initialize`, before the GC heap is used.
# The fix: a `cabi_realloc` made while one is under way (the adapter setting itself up)
# takes memory past the heap (`sbrk`), as allocations during start-up do.
UNGUARDED = """\tif useGCAllocations {
\t\t// Here we call"""
GUARDED = """\tif useGCAllocations && !reallocating {
\t\treallocating = true
\t\tdefer func() { reallocating = false }()
\t\t// Here we call"""
PINNER = "var pinner = runtime.Pinner{}\n"
REALLOCATING = PINNER + """
// wasmop: set while cabiRealloc allocates on the GC heap; a cabiRealloc made meanwhile is the
// WASI adapter setting itself up on its first call (in a pre-initialised module, during the
// first allocation of a call), and takes memory past the heap instead of re-entering the
// adapter before its state exists. See guest-sdk/go/witpatch/changes.py.
var reallocating = false

// wasmop: leave a pinner in the per-P cache of Go's runtime, for the import wrappers' Pinners.
// See PINNERS in guest-sdk/go/witpatch/changes.py.
func init() {
\tvar other runtime.Pinner
\tother.Pin(new(byte))
\tother.Unpin()
}
"""

# The reserve, which pre-initialisation makes worth having: a call's first allocation sets the
# WASI adapter up (above), and what the adapter allocates then, its state and its stack, took
# sbrk's path, which grew linear memory past the snapshot's size by two 64 KiB pages in every
# call. The host then made those pages accessible as the call grew into them and inaccessible
# again before the slot's next instance (three `mprotect` calls a call, each with a TLB
# shootdown). The runtime package's init takes that much past the heap before the snapshot, and
# the sbrk path hands it out first, so a call runs in the memory its instance starts with;
# anything beyond the reserve still comes from sbrk.
UNRESERVED = """\t} else {
\t\talignedSize := newSize + offset(newSize, align)
\t\tunaligned := sbrk(alignedSize)
\t\toff := offset(uintptr(unaligned), align)
\t\treturn unsafe.Add(unaligned, off)
\t}
"""
RESERVED = """\t} else {
\t\treturn pastHeap(newSize, align)
\t}
"""
RESERVE = """
// wasmop: memory past the heap, taken before the snapshot, for what cabiRealloc's sbrk path
// allocates in a call (the WASI adapter's state and stack, as it sets itself up in each
// fresh instance): the call then grows no linear memory. Go's garbage collector ignores a
// pointer outside its heap. See RESERVE in guest-sdk/go/witpatch/changes.py.
var reserve unsafe.Pointer
var reserveUsed uintptr

// wasmop: what the adapter takes (wasi-preview1-component-adapter-provider 48.0.1: its
// state and stack fit two 64 KiB pages; with a 64 KiB reserve a call still grew memory).
const reserveSize = 128 << 10

func init() {
\t// runtime.sbrk is wasm's (and plan9's): natively, where the package's tests run, the
\t// constant condition leaves no reference to it.
\tif runtime.GOARCH == "wasm" {
\t\treserve = sbrk(reserveSize)
\t}
}

// pastHeap is size bytes aligned to align, outside Go's heap: from the reserve while it
// lasts, then from sbrk.
func pastHeap(size, align uintptr) unsafe.Pointer {
\tif reserve != nil {
\t\tstart := reserveUsed + offset(uintptr(reserve)+reserveUsed, align)
\t\tif start <= reserveSize && size <= reserveSize-start {
\t\t\treserveUsed = start + size
\t\t\treturn unsafe.Add(reserve, start)
\t\t}
\t}
\tif runtime.GOARCH != "wasm" {
\t\treturn nil
\t}
\tunaligned := sbrk(size + align - 1)
\tif unaligned == nil {
\t\treturn nil
\t}
\treturn unsafe.Add(unaligned, offset(uintptr(unaligned), align))
}
"""

# The pinners, filled before the snapshot. wit-bindgen-go's code pins on two kinds of
# runtime.Pinner: the main package's syncExportPinner (an export's results) and a new one in
# each import's wrapper (every string a host call takes); the runtime package's own, which
# pinned each block cabi_realloc hands the host, no longer pins anything (KEPT below). The first Pin of a Pinner with none of its own takes the
# one Go's runtime caches per P, or allocates one and sets a finalizer on it, and an Unpin
# gives it back to the cache only if the cache is empty. In a pre-initialised module, every
# call starts from the snapshot, where no Pinner had been used: each call allocated one per
# kind, each with its finalizer (`SetFinalizer` alone took 1.2 % of a database-config call;
# guest-sdk/go/README.md has the measurement). Filled before the snapshot, syncExportPinner
# keeps its own (an Unpin into a full cache keeps it) and the cache holds the one every
# wrapper takes and gives back. The runtime package's init (REALLOCATING above) fills the
# cache; the main package's (PINNERS, a generated file) runs after it, moves the cached
# pinner into syncExportPinner and fills the cache again.
EXPORT_PINNER = "var syncExportPinner = runtime.Pinner{}\n"
PINNERS = """package main

import "runtime"

// wasmop: leave syncExportPinner holding a pinner of its own, and one in the per-P cache of
// Go's runtime, in the snapshot. See PINNERS in guest-sdk/go/witpatch/changes.py.
func init() {
\tx := new(byte)
\tsyncExportPinner.Pin(x)
\tvar other runtime.Pinner
\tother.Pin(x)
\tother.Unpin()
\tsyncExportPinner.Unpin()
}
"""

# The kept blocks: each block cabi_realloc hands the host (a request's strings, a host call's
# results) must outlive the allocation until the code the generator wrote lifts it into Go
# values, which the runtime package's pinner did: Pin, then Unpin (the package's `Unpin`,
# which each export calls once it has lifted its arguments). Go's garbage collector never
# moves an object, so pinning one only keeps it alive, and a slice does that for the price of
# an append: `runtime.Pinner.Pin` sets the object's bit in its span's pinner bits, under the
# span's lock, allocating the bits for each span it first pins in (2 % of a database-config
# call in `perf`). cabiRealloc keeps its blocks in `kept`, and `Unpin` lets them go.
UNKEPT = """\t\tpointer := Allocate(&pinner, newSize, align)
"""
KEPT = """\t\tpointer := keep(allocateRaw(newSize, align))
"""
UNPIN = """func Unpin() {
\tpinner.Unpin()
}
"""
UNKEEP = """func Unpin() {
\tpinner.Unpin()
\t// wasmop: and let go of the blocks cabiRealloc kept. See KEPT in
\t// guest-sdk/go/witpatch/changes.py.
\tclear(kept)
\tkept = kept[:0]
}

// wasmop: the blocks cabiRealloc handed the host since the last Unpin, kept alive by this
// slice rather than pinned (Go's collector moves nothing; a Pin takes a span lock and bits).
var kept = make([]unsafe.Pointer, 0, 16)

// keep is p, kept alive until the next Unpin.
func keep(p unsafe.Pointer) unsafe.Pointer {
\tif p != nil {
\t\tkept = append(kept, p)
\t}
\treturn p
}
"""

# The runtime package's changes: (upstream text, replacement, what the upstream text is).
RUNTIME_CHANGES = (
    (UNALIGNED, ALIGNED, "the allocateRaw check the alignment fix"),
    (UNGUARDED, GUARDED, "the cabiRealloc the re-entrancy fix"),
    (PINNER, REALLOCATING + RESERVE,
     "the pinner declaration the re-entrancy fix, the pinners and the reserve follow"),
    (UNRESERVED, RESERVED, "cabiRealloc's sbrk path the reserve"),
    (UNKEPT, KEPT, "cabiRealloc's GC allocation the kept blocks"),
    (UNPIN, UNKEEP, "the package's Unpin the kept blocks"),
)


def patched_runtime(text: str) -> str:
    """runtime.go's text with the changes made; ValueError naming what is missing when the
    text has not exactly one of an upstream text a change replaces."""
    for old, new, what in RUNTIME_CHANGES:
        if text.count(old) != 1:
            raise ValueError(f"it no longer has {what} replaces")
        text = text.replace(old, new)
    return text


def main_package_file(exports: str) -> str:
    """The file the build adds to a generated main package whose wit_exports.go is
    `exports`; ValueError when that declares no syncExportPinner."""
    if EXPORT_PINNER not in exports:
        raise ValueError(f"it no longer declares `{EXPORT_PINNER.strip()}`, which the build "
                         "fills before the snapshot")
    return PINNERS


def fix_digest() -> str:
    """Names the patched runtime package's directory content: the fixes and the test."""
    made = "".join(new for _, new, _ in RUNTIME_CHANGES)
    return hashlib.sha256(made.encode() + ALLOCATE_TEST.read_bytes()).hexdigest()[:12]
