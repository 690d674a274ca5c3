// Package panicky is a test plugin for the Go SDK's promise on a built component: a panic
// in Reconcile ends the call as a retryable plugin error carrying the panic's message and
// where it happened, not as a bare trap (tests/go/tests/golden.rs). It reconciles
// ConfigMaps; the target's name picks what it does: `nil-map` writes to a nil map (a runtime
// error), `panic` panics with a message after one apply, anything else succeeds.
package panicky

import "wasmop.dev/wasmop"

// Panicky is the reconciler.
type Panicky struct {
	wasmop.NoCleanup[*wasmop.ConfigMap]
}

func init() { wasmop.Register[*wasmop.ConfigMap](Panicky{}) }

// Describe declares a ConfigMap reconciler.
func (Panicky) Describe() wasmop.Info {
	return wasmop.NewInfo("panicky", "0.1.0", wasmop.ConfigMapKind)
}

// Reconcile panics as the object's name says.
func (Panicky) Reconcile(ctx *wasmop.Context, cm *wasmop.ConfigMap) (wasmop.Action, error) {
	switch cm.Name {
	case "nil-map":
		var counts map[string]int
		counts[cm.Name]++
	case "panic":
		if _, err := ctx.Apply(&wasmop.ConfigMap{ObjectMeta: wasmop.ObjectMeta{Name: "before-panic", Namespace: cm.Namespace}}); err != nil {
			return wasmop.Done(), err
		}
		explode(cm.Name)
	}
	return wasmop.Done(), nil
}

func explode(name string) { panic("reconciling " + name + " went wrong") }
