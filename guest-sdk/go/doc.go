// Package wasmop is the Go SDK for wasmop reconcile plugins: Kubernetes controllers that run
// as sandboxed WebAssembly components inside the wasmop host, built with stock Go
// (GOOS=wasip1 GOARCH=wasm) by guest-sdk/go/build.
//
// A plugin is a Go package that registers a [Reconciler] in its init function:
//
//	func init() { wasmop.Register(DatabaseConfig{}) }
//
// The host calls Describe once per loaded version, then Reconcile for each change to a
// primary object (and Cleanup for one being deleted, if the plugin declared a finalizer).
// Each call runs in a fresh instance: nothing carries over between calls, package variables
// included, so keep state in the cluster. Reconcile is level-based: given the object as it
// is now, make the world match it, idempotently.
//
// A plugin can also review requests before the API server stores them, as Kubernetes
// admission webhooks: an [Admission] registered with [RegisterAdmission] beside the
// reconciler, or alone with [RegisterAdmissionOnly] for a plugin that reconciles nothing.
//
// Objects are the author's own Go structs with JSON tags, embedding [TypeMeta] and
// [ObjectMeta] as k8s.io/api types do (the JSON is the same); [ConfigMap], [Namespace] and
// [Condition] are provided. The k8s.io/api types work too (every call takes any
// JSON-marshallable value), but cost a component five times the size (guest-sdk/go/README.md).
//
// How a call ends: the [Action] returned, or the error. A [*KubeError] is retryable unless
// it is denied or invalid; [Permanent] errors and decode and usage errors are permanent;
// [Retryable] errors and any other error are retried with backoff; a panic is recovered and
// becomes a retryable error carrying the panic's message and where it happened.
//
// Nothing in this package depends on the generated WebAssembly bindings: the build links a
// glue package that implements [Host] over the host's imports. Tests can call a reconciler
// directly with their own Host ([NewContext]).
package wasmop
