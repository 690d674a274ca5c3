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
//
// Either way it ends by filling the allocator's span cache (fillSpanCache).
func LeaveHeadroom() {
	defer fillSpanCache()
	if freeHeap() >= headroomBytes/2 {
		return
	}
	headroomSink = make([]byte, headroomBytes)
	headroomSink = nil
	runtime.GC()
}

// smallSizeClasses are the object sizes of Go's small size classes up to 2 KiB
// (runtime/sizeclasses.go, Go 1.26): one allocation of each size lands in its class.
var smallSizeClasses = [...]int{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208,
	224, 240, 256, 288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152,
	1280, 1408, 1536, 1792, 2048}

// spanCacheSink keeps the compiler from eliding fillSpanCache's allocations.
var spanCacheSink []any

// fillSpanCache leaves the snapshot's allocator a span with free slots for each small size
// class, with pointers and without. Go's allocator takes each class's objects from a span its
// per-P cache holds, and a collection empties that cache: left as init leaves it, every call's
// first allocation of each size took a span from the central lists (mcache.refill and
// mcentral.cacheSpan, 3.4 % of a database-config call in perf). One object of each size,
// allocated last, puts a span of each class in the cache the snapshot keeps. Classes above
// 2 KiB are left out: a span of each of those as well made a call slower (181 against
// 150 µs in the dispatch bench), their spans taking the heap's headroom. The objects are
// garbage at once; a call makes no collection.
func fillSpanCache() {
	for _, n := range smallSizeClasses {
		spanCacheSink = append(spanCacheSink, make([]byte, n), make([]*byte, n/8))
	}
	spanCacheSink = nil
}
