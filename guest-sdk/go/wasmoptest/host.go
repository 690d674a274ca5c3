// Package wasmoptest is a fake wasmop host for a plugin's own Go tests, run natively with
// `go test` (controller-runtime's fake client, for wasmop): it answers reads from objects
// the test gives it and records every write, Event and log line.
//
//	host := wasmoptest.NewHost()
//	ctx := wasmop.NewContext(host, ref)
//	action, err := MyReconciler{}.Reconcile(ctx, obj)
//	// look at host.Writes
//
// It is no cluster: writes are recorded, not applied (a later Get does not see them), and
// nothing is checked against the plugin's grants. Golden cases (`wasmop test`) run the built
// component against the host's real in-memory cluster.
package wasmoptest

import (
	"encoding/json"
	"fmt"

	"wasmop.dev/wasmop"
)

// Write is one recorded write: the call ("apply", "create", "patch", "patch-status",
// "delete", "event"), the object it names and its body (JSON text; the Event's note).
type Write struct {
	Call   string
	Target string
	Body   string
}

// Host is a wasmop.Host over a fixed set of objects.
type Host struct {
	// Objects are JSON objects by "Kind namespace/name" (or "Kind name"), as Ref.String()
	// writes them.
	Objects map[string]string
	// ConfigJSON is the plugin's configuration ("{}" when empty).
	ConfigJSON string
	// Writes and Logs are what the plugin did, in order.
	Writes []Write
	Logs   []string
}

// NewHost is a Host with no objects and no configuration.
func NewHost() *Host { return &Host{Objects: map[string]string{}} }

// Add stores obj (encoded as JSON) for Get and List.
func (h *Host) Add(obj wasmop.Object) error {
	ref, err := wasmop.RefOf(obj)
	if err != nil {
		return err
	}
	text, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	h.Objects[ref.String()] = string(text)
	return nil
}

func (h *Host) record(call, target, body string) {
	h.Writes = append(h.Writes, Write{call, target, body})
}

func targetOf(object string) string {
	var o wasmop.RawObject
	if err := json.Unmarshal([]byte(object), &o); err != nil {
		return "?"
	}
	ref, err := wasmop.RefOf(&o)
	if err != nil {
		return "?"
	}
	return ref.String()
}

// Get answers from Objects; a missing object is not-found.
func (h *Host) Get(ref wasmop.Ref) (string, error) {
	if o, ok := h.Objects[ref.String()]; ok {
		return o, nil
	}
	return "", &wasmop.HostError{Reason: wasmop.ReasonNotFound, Message: fmt.Sprintf("%s not found", ref)}
}

// List answers with the Objects of kind in namespace ("" for all); the selector is ignored.
func (h *Host) List(kind wasmop.Kind, namespace, _ string) ([]string, error) {
	var out []string
	for _, text := range h.Objects {
		var o wasmop.RawObject
		if json.Unmarshal([]byte(text), &o) == nil && o.Kind == kind.Kind && o.APIVersion == kind.APIVersion() &&
			(namespace == "" || o.Namespace == namespace) {
			out = append(out, text)
		}
	}
	return out, nil
}

// ListOwned answers with the Objects of kind that have an owner reference with ownerUID.
func (h *Host) ListOwned(kind wasmop.Kind, namespace, ownerUID string) ([]string, error) {
	all, _ := h.List(kind, namespace, "")
	var out []string
	for _, text := range all {
		var o wasmop.RawObject
		_ = json.Unmarshal([]byte(text), &o)
		for _, r := range o.OwnerReferences {
			if r.UID == ownerUID {
				out = append(out, text)
				break
			}
		}
	}
	return out, nil
}

// Create records the object and returns it.
func (h *Host) Create(object string) (string, error) {
	h.record("create", targetOf(object), object)
	return object, nil
}

// Apply records the object and returns it.
func (h *Host) Apply(object string) (string, error) {
	h.record("apply", targetOf(object), object)
	return object, nil
}

func (h *Host) patch(call string, ref wasmop.Ref, body string) (string, error) {
	h.record(call, ref.String(), body)
	if o, ok := h.Objects[ref.String()]; ok {
		return o, nil
	}
	return fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"metadata":{"name":%q,"namespace":%q}}`,
		ref.Kind.APIVersion(), ref.Kind.Kind, ref.Name, ref.Namespace), nil
}

// Patch records the patch body and returns the stored object (unpatched).
func (h *Host) Patch(ref wasmop.Ref, _ wasmop.PatchType, body, _ string) (string, error) {
	return h.patch("patch", ref, body)
}

// PatchStatus records the patch body and returns the stored object (unpatched).
func (h *Host) PatchStatus(ref wasmop.Ref, _ wasmop.PatchType, body, _ string) (string, error) {
	return h.patch("patch-status", ref, body)
}

// Delete records the deletion.
func (h *Host) Delete(ref wasmop.Ref, _ wasmop.DeleteOptions) error {
	h.record("delete", ref.String(), "")
	return nil
}

// Emit records the Event's reason and note.
func (h *Host) Emit(ref wasmop.Ref, e wasmop.Event) error {
	h.record("event", ref.String(), e.Reason+": "+e.Note)
	return nil
}

// Log records the line.
func (h *Host) Log(_ wasmop.Level, message string) { h.Logs = append(h.Logs, message) }

// Config returns ConfigJSON, or "{}".
func (h *Host) Config() string {
	if h.ConfigJSON == "" {
		return "{}"
	}
	return h.ConfigJSON
}

var _ wasmop.Host = (*Host)(nil)
