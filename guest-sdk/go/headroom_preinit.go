//go:build wasmop_preinit

package wasmop

// A pre-initialised build leaves heap headroom in its snapshot (headroom.go), before the
// plugin's init functions run.
func init() { LeaveHeadroom() }
