package wasmop

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"time"
)

// Action is what to do after a successful reconcile: nothing until something changes
// ([Done]), or reconcile again after a delay ([RequeueAfter]).
type Action struct {
	after   time.Duration
	requeue bool
}

// Done: nothing more until something changes (or the periodic resync).
func Done() Action { return Action{} }

// RequeueAfter reconciles the object again after d. The host raises a delay below its
// minRequeueAfter (1 s by default) and applies its per-object rate limit.
func RequeueAfter(d time.Duration) Action { return Action{after: max(d, 0), requeue: true} }

// Requeue is the delay of a RequeueAfter action, and whether it is one.
func (a Action) Requeue() (time.Duration, bool) { return a.after, a.requeue }

// Reconciler is a reconcile plugin for objects of type T (a pointer to the primary kind's
// struct, such as *Database). Register it with [Register] in the plugin's init function.
type Reconciler[T Object] interface {
	// Describe says what the plugin is and does. Called once per loaded version; it must
	// not call the host.
	Describe() Info
	// Reconcile brings the world in line with obj, the primary object as the host last saw
	// it.
	Reconcile(ctx *Context, obj T) (Action, error)
	// Cleanup is called instead of Reconcile for an object that is being deleted and
	// carries the plugin's finalizer; the host removes the finalizer when it returns Done.
	// Embed [NoCleanup] when the plugin has no finalizer.
	Cleanup(ctx *Context, obj T) (Action, error)
}

// NoCleanup is a Cleanup with nothing to clean up, to embed in a Reconciler without a
// finalizer.
type NoCleanup[T Object] struct{}

// Cleanup returns Done.
func (NoCleanup[T]) Cleanup(*Context, T) (Action, error) { return Done(), nil }

type plugin struct {
	describe func() Info
	call     func(ctx *Context, cleanup bool, object string) (Action, error)
}

var registered *plugin

// Register makes r the plugin's reconciler. Call it once, from the plugin package's init
// function; a second call panics.
func Register[T Object](r Reconciler[T]) {
	if registered != nil {
		panic("wasmop.Register called twice: a plugin has one reconciler")
	}
	if registeredAdmission != nil && registeredAdmission.standalone {
		panic("wasmop.Register: the plugin registered itself as admission-only (wasmop.RegisterAdmissionOnly), " +
			"which has no reconciler; register its admission half with wasmop.RegisterAdmission instead")
	}
	var zero T
	t := reflect.TypeOf(zero)
	if t == nil || t.Kind() != reflect.Pointer {
		panic(fmt.Sprintf("wasmop.Register: the object type %v must be a pointer to a struct", t))
	}
	warm(t.Elem())
	registered = &plugin{
		describe: r.Describe,
		call: func(ctx *Context, cleanup bool, object string) (Action, error) {
			obj := reflect.New(t.Elem()).Interface().(T)
			if err := decode(sourceOf(object), obj, false); err != nil {
				// Named by what the host sent (its kind and name), parsed only now: a call
				// that decodes reads the object's text once (decode's fast path).
				raw, perr := parseRaw(object)
				if perr != nil {
					return Action{}, perr
				}
				return Action{}, raw.decodeError(err)
			}
			if cleanup {
				return r.Cleanup(ctx, obj)
			}
			return r.Reconcile(ctx, obj)
		},
	}
}

// PanicFrames is how many frames of a recovered panic's stack its message keeps: the
// innermost ones, where the bug is.
const PanicFrames = 5

// MessageCap is the most bytes an error message carries; the host cuts and escapes it again.
const MessageCap = 2048

// Described is the registered plugin's Info, for the build's glue. An unregistered plugin
// or a panic in Describe is an error.
func Described() (info Info, err error) {
	if registered == nil {
		return Info{}, fmt.Errorf("no reconciler registered: call wasmop.Register in the plugin's init function")
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%s", panicMessage(v))
		}
	}()
	return registered.describe(), nil
}

// Serve runs one reconcile (or cleanup) of the object the host sent, for the build's glue:
// it decodes object, calls the registered reconciler with a Context over host, and turns
// what it returns into the contract's result. An error's verdict is as the package doc
// says; a panic is recovered into a retryable error with its message and innermost frames.
func Serve(host Host, cleanup bool, target Ref, object string) (action Action, failure *ReconcileError) {
	if registered == nil {
		return Action{}, &ReconcileError{Message: "no reconciler registered: call wasmop.Register in the plugin's init function"}
	}
	defer func() {
		if v := recover(); v != nil {
			action, failure = Action{}, &ReconcileError{Retryable: true, Message: capped(panicMessage(v))}
		}
	}()
	action, err := registered.call(NewContext(host, target), cleanup, object)
	if err != nil {
		retryable, message := verdict(err)
		return Action{}, &ReconcileError{Retryable: retryable, Message: capped(message)}
	}
	return action, nil
}

func capped(message string) string {
	if len(message) <= MessageCap {
		return message
	}
	return strings.ToValidUTF8(message[:MessageCap-3], "") + "..."
}

// panicMessage is "panic: <value>" and the innermost frames below the panic, called from
// the deferred recover (so the panicking goroutine's stack is still there).
func panicMessage(v any) string {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	var lines []string
	for {
		f, more := frames.Next()
		// The runtime's own frames (gopanic, the fault handlers) say nothing of the bug.
		if !strings.HasPrefix(f.Function, "runtime.") && f.Function != "" {
			if strings.HasPrefix(f.Function, "wasmop.dev/wasmop.Register[") || strings.HasPrefix(f.Function, "wasmop.dev/wasmop.admissionOf[") ||
				strings.HasPrefix(f.Function, "wasmop.dev/wasmop.Serve") {
				break // the SDK's call of the plugin: what is below it is the SDK's and the glue's
			}
			lines = append(lines, fmt.Sprintf("  %s:%d in %s", f.File, f.Line, f.Function))
			if len(lines) == PanicFrames {
				break
			}
		}
		if !more {
			break
		}
	}
	text := fmt.Sprintf("panic: %v", v)
	if len(lines) > 0 {
		text += fmt.Sprintf("\ngoroutine (innermost %d frames):\n", len(lines)) + strings.Join(lines, "\n")
	}
	return text
}
