package wasmop

import (
	"runtime"
	"runtime/metrics"
)

// Heap headroom in a pre-initialised component. The build (guest-sdk/go/build) snapshots the
// plugin after its init functions, and every call's fresh instance starts from that snapshot.
// Left as init leaves it, Go's heap is nearly full: the first allocation of every call (the
// host's copy of the object, through cabi_realloc) grows it by a new 4 MiB arena, and Go's
// wasm runtime clears the arena's alignment slack as it reserves it, so each call faulted in
// and zeroed megabytes it never used (memset was 62% of a call's page faults in perf, a
// call's ~99 page faults in all). With free pages left in the snapshot, a call's allocations
// take those instead: the pages it touches are the pages it uses.
//
// The pages are free heap, never written at build time: the snapshot stores nothing for them
// (its data segments hold only written memory), and an instance pays only for the pages its
// call touches. What it does change is each instance's starting linear memory (about 4 MiB
// more), which counts against the plugin's memory cap like any other memory.
//
// headroom_preinit.go (built with -tags wasmop_preinit, which the build sets when it
// pre-initialises) calls LeaveHeadroom from this package's init, before the plugin's own init
// functions, and the build's glue calls it again after them.

// headroomBytes is the heap a pre-initialised component leaves free: a whole arena of Go's
// heap on wasm (4 MiB), so that allocating it grows the heap by one.
const headroomBytes = 4 << 20

// headroomSink keeps the compiler from eliding the allocation that makes the headroom.
var headroomSink []byte

// freeHeap is the heap Go's runtime holds free and has not returned (on wasm, memory is never
// returned: released pages are ones the runtime would clear again before use).
func freeHeap() uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return sample[0].Value.Uint64()
}

// LeaveHeadroom makes sure the heap holds at least half of headroomBytes free, for the build's
// glue: a pre-initialised component's init functions call it, first from this package's init
// and last from the glue's, once the plugin's have run (and perhaps used up what the first
// call left). It allocates a heap arena and collects it again: GC is what returns the pages
// to the heap as free pages.
//
// Early is better than last: a collection at the end of init leaves free slots scattered over
// every span init used, and shrinks the goroutine stack the call will grow again, so a call
// writes into more of the snapshot's pages. The glue's call collects only when the plugin's
// init functions used up the headroom.
func LeaveHeadroom() {
	if freeHeap() >= headroomBytes/2 {
		return
	}
	headroomSink = make([]byte, headroomBytes)
	headroomSink = nil
	runtime.GC()
}
