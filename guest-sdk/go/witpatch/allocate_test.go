//go:build wasmop_witpatch

// The alignment fix and the reserve guest-sdk/go/build adds to wit-bindgen-go 0.63's
// runtime package (witpatch/changes.py): setup copies this test beside the patched
// runtime.go, and the test suite runs it (`go test -tags wasmop_witpatch` in that copy;
// tests/go/tests/sdk.rs).
package runtime

import (
	"runtime"
	"testing"
	"unsafe"
)

// The generator allocates describe's export return area as 23*4 = 92 bytes aligned to 8;
// upstream panics ("size 92 is not compatible with alignment 8"), the fix rounds up to 96.
func TestAllocateRoundsAnUnalignedSizeUpToItsAlignment(t *testing.T) {
	var pinner runtime.Pinner
	defer pinner.Unpin()
	for _, c := range []struct{ size, align uintptr }{{92, 8}, {1, 8}, {6, 4}, {3, 2}, {96, 8}, {5, 1}} {
		p := Allocate(&pinner, c.size, c.align)
		if p == nil {
			t.Fatalf("size %d align %d: nil", c.size, c.align)
		}
		if uintptr(p)%c.align != 0 {
			t.Fatalf("size %d align %d: %p is not aligned", c.size, c.align, p)
		}
		// Every byte of the requested size is writable.
		b := unsafe.Slice((*byte)(p), c.size)
		for i := range b {
			b[i] = 0xff
		}
	}
	if Allocate(&pinner, 0, 8) != nil {
		t.Fatal("size 0 allocates nothing")
	}
}

// The reserve (RESERVE in changes.py): cabiRealloc's sbrk path hands out blocks of it, each
// aligned, none overlapping, until a block no longer fits; natively there is no sbrk to
// fall back on, so that block is nil (on wasm it comes from sbrk).
func TestPastHeapTakesAlignedBlocksOfTheReserveUntilItIsSpent(t *testing.T) {
	if runtime.GOARCH == "wasm" {
		t.Skip("the reserve is sbrk's there, taken by init")
	}
	backing := make([]uint64, reserveSize/8)
	reserve, reserveUsed = unsafe.Pointer(unsafe.SliceData(backing)), 1 // a misaligned start
	defer func() { reserve, reserveUsed = nil, 0 }()
	base := uintptr(reserve)
	var last uintptr = base + 1
	for _, c := range []struct{ size, align uintptr }{{100, 8}, {3, 1}, {64 << 10, 16}, {8, 4}} {
		p := uintptr(pastHeap(c.size, c.align))
		if p == 0 || p%c.align != 0 || p < last || p+c.size > base+reserveSize {
			t.Fatalf("size %d align %d: %#x (reserve %#x..%#x, last block ended at %#x)",
				c.size, c.align, p, base, base+reserveSize, last)
		}
		last = p + c.size
	}
	if p := pastHeap(reserveSize/2, 8); p != nil {
		t.Fatalf("a block past the reserve's end: %p", p)
	}
	// What is left still serves a block that fits.
	if p := uintptr(pastHeap(8, 8)); p == 0 || p+8 > base+reserveSize {
		t.Fatalf("the reserve's rest: %#x", p)
	}
}

// The kept blocks (KEPT in changes.py): what cabiRealloc allocates on the heap stays alive in
// kept until the package's Unpin, which each export calls once it has lifted its arguments,
// lets go of every one; a nil block (size 0) is not kept.
func TestKeptBlocksLiveUntilUnpin(t *testing.T) {
	defer Unpin()
	Unpin()
	blocks := []unsafe.Pointer{keep(allocateRaw(24, 8)), keep(allocateRaw(5, 1)), keep(allocateRaw(0, 4))}
	if blocks[2] != nil || len(kept) != 2 || kept[0] != blocks[0] || kept[1] != blocks[1] {
		t.Fatalf("kept %v after keeping %v", kept, blocks)
	}
	runtime.GC()
	// Still the same blocks, writable: the collector freed neither.
	*(*uint64)(kept[0]) = 1
	Unpin()
	if len(kept) != 0 || cap(kept) == 0 || kept[:1][0] != nil {
		t.Fatalf("Unpin left %d blocks kept (%v in the slice's first slot)", len(kept), kept[:1][0])
	}
}
