package wasmop

import (
	"errors"
	"fmt"
)

// ErrorReason says why a host call failed, mirroring the contract's kube-error cases.
type ErrorReason int

// The reasons a host call fails (wit/plugin.wit, kube-error).
const (
	// ReasonOther is anything else.
	ReasonOther ErrorReason = iota
	// ReasonNotFound: the object does not exist (HTTP 404).
	ReasonNotFound
	// ReasonConflict: a write lost a race or a precondition failed (HTTP 409).
	ReasonConflict
	// ReasonAlreadyExists: create found an object of that name (HTTP 409 AlreadyExists).
	ReasonAlreadyExists
	// ReasonForbidden: the host's Kubernetes identity may not do this (HTTP 403).
	ReasonForbidden
	// ReasonDenied: the operator's wasmop policy does not grant this call to this plugin.
	ReasonDenied
	// ReasonInvalid: the request or the object was invalid (HTTP 400/422).
	ReasonInvalid
	// ReasonUnavailable: the API server is unavailable or throttling, retries ran out.
	ReasonUnavailable
)

// String is the reason in the words messages use ("not found", "conflict", ...), as the
// Rust and Python SDKs write them.
func (r ErrorReason) String() string {
	switch r {
	case ReasonNotFound:
		return "not found"
	case ReasonConflict:
		return "conflict"
	case ReasonAlreadyExists:
		return "already exists"
	case ReasonForbidden:
		return "forbidden"
	case ReasonDenied:
		return "denied by the wasmop policy"
	case ReasonInvalid:
		return "invalid"
	case ReasonUnavailable:
		return "unavailable"
	default:
		return ""
	}
}

// KubeError is a failed host call: Call is the call ("get", "apply", "patch-status", ...),
// Target what it was about, Reason the case and Message the API server's (or the host's)
// own words. Its Error() is "apply ConfigMap shop/orders-config: conflict: <message>".
type KubeError struct {
	Call    string
	Target  string
	Reason  ErrorReason
	Message string
}

func (e *KubeError) Error() string {
	prefix := e.Reason.String()
	if prefix != "" {
		prefix += ": "
	}
	return e.Call + " " + e.Target + ": " + prefix + e.Message
}

// HostError is what a [Host] returns for a failed call: the reason and the host's message.
// The Context wraps it into a [*KubeError] naming the call and the object.
type HostError struct {
	Reason  ErrorReason
	Message string
}

func (e *HostError) Error() string { return e.Reason.String() + ": " + e.Message }

func reasonOf(err error) (ErrorReason, bool) {
	var k *KubeError
	if errors.As(err, &k) {
		return k.Reason, true
	}
	var h *HostError
	if errors.As(err, &h) {
		return h.Reason, true
	}
	return 0, false
}

func is(err error, reason ErrorReason) bool {
	r, ok := reasonOf(err)
	return ok && r == reason
}

// IsNotFound reports whether err (or an error it wraps) is a host call's not-found.
func IsNotFound(err error) bool { return is(err, ReasonNotFound) }

// IsConflict reports whether err is a conflict: a write from a stale read, or a failed
// resourceVersion or uid precondition. Re-read, or return the error to be retried.
func IsConflict(err error) bool { return is(err, ReasonConflict) }

// IsAlreadyExists reports whether err is create's already-exists.
func IsAlreadyExists(err error) bool { return is(err, ReasonAlreadyExists) }

// IsForbidden reports whether err is an RBAC refusal of the host's identity.
func IsForbidden(err error) bool { return is(err, ReasonForbidden) }

// IsDenied reports whether err is a refusal by the operator's wasmop policy.
func IsDenied(err error) bool { return is(err, ReasonDenied) }

// IsInvalid reports whether err is an invalid request or object.
func IsInvalid(err error) bool { return is(err, ReasonInvalid) }

// IsUnavailable reports whether err is an unavailable or throttling API server.
func IsUnavailable(err error) bool { return is(err, ReasonUnavailable) }

// ReconcileError is an error with an explicit verdict: Retryable (the host retries with
// per-object backoff) or not (reported, and not retried until the object changes).
type ReconcileError struct {
	Retryable bool
	Message   string
	cause     error
}

func (e *ReconcileError) Error() string { return e.Message }

// Unwrap returns the error it was made from, if any.
func (e *ReconcileError) Unwrap() error { return e.cause }

// Retryable is an error for a passing problem: the host retries the object with
// per-object exponential backoff. Its message is fmt.Sprintf(format, args...).
func Retryable(format string, args ...any) error {
	return &ReconcileError{Retryable: true, Message: fmt.Sprintf(format, args...)}
}

// Permanent is an error for an object that cannot be reconciled as it is: the host reports
// it (Event, log, metric) and does not retry until the object changes.
func Permanent(format string, args ...any) error {
	return &ReconcileError{Retryable: false, Message: fmt.Sprintf(format, args...)}
}

// AsPermanent marks err as permanent, keeping its message (errors.Is/As still see err).
func AsPermanent(err error) error {
	return &ReconcileError{Retryable: false, Message: err.Error(), cause: err}
}

// DecodeError is an object or a configuration that does not have the shape the plugin
// expects. Permanent: the same input fails the same way until it changes.
type DecodeError struct{ Message string }

func (e *DecodeError) Error() string { return e.Message }

// UsageError is the SDK used in a way that cannot work: an owner without a uid, a
// namespaced kind without a namespace, a guarded write of an object never read. Permanent.
type UsageError struct{ Message string }

func (e *UsageError) Error() string { return e.Message }

func usageErrorf(format string, args ...any) error {
	return &UsageError{Message: fmt.Sprintf(format, args...)}
}

// verdict is how an error a reconcile returns ends the call: retryable or not, and the
// message the host reports.
func verdict(err error) (retryable bool, message string) {
	var r *ReconcileError
	if errors.As(err, &r) {
		return r.Retryable, err.Error()
	}
	var d *DecodeError
	var u *UsageError
	if errors.As(err, &d) || errors.As(err, &u) {
		return false, err.Error()
	}
	if reason, ok := reasonOf(err); ok {
		return reason != ReasonDenied && reason != ReasonInvalid, err.Error()
	}
	return true, err.Error()
}
