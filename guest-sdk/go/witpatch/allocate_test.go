//go:build wasmop_witpatch

// The alignment fix guest-sdk/go/build applies to wit-bindgen-go 0.63's runtime package:
// setup copies this test beside the patched runtime.go, and the test suite runs it
// (`go test -tags wasmop_witpatch` in that copy; tests/go/tests/toolchain.rs).
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
