package wasmop

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Context is what one reconcile can do: Kubernetes reads and writes, Events, its
// configuration and logs. Every call is checked by the host against what the plugin
// declared; one outside it fails with a denied [*KubeError] ([IsDenied]).
type Context struct {
	// Target is the object being reconciled.
	Target Ref
	// Log writes into the host's log.
	Log  Logger
	host Host
}

// NewContext is a Context over host for the object target; the SDK makes one per call, and
// a test can make one over its own Host.
func NewContext(host Host, target Ref) *Context {
	return &Context{Target: target, Log: Logger{host: host}, host: host}
}

func wrap(call, target string, err error) error {
	var h *HostError
	if errors.As(err, &h) {
		return &KubeError{Call: call, Target: target, Reason: h.Reason, Message: h.Message}
	}
	return &KubeError{Call: call, Target: target, Reason: ReasonOther, Message: err.Error()}
}

// marshal writes v as compact JSON, without encoding/json's HTML escaping: the SDK's own
// object types itself (write.go), others with encoding/json.
func marshal(v any) (string, error) {
	if b, ok := ownJSON(v); ok {
		return string(b), nil
	}
	// Room for a usual body at once, rather than growing from 64 bytes, doubling.
	b := bytes.NewBuffer(make([]byte, 0, 1024))
	e := json.NewEncoder(b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return "", usageErrorf("cannot encode %T as JSON: %v", v, err)
	}
	return string(bytes.TrimRight(b.Bytes(), "\n")), nil
}

func parseList(items []string) ([]RawObject, error) {
	out := make([]RawObject, 0, len(items))
	for _, item := range items {
		o, err := parseRaw(item)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// Get reads the object of kind called name in namespace ("" for cluster-scoped kinds) into
// into (a pointer to its type, or to a [RawObject]). A missing object is an error for which
// [IsNotFound] is true.
func (c *Context) Get(kind Kind, namespace, name string, into any) error {
	ref, err := kind.Ref(namespace, name)
	if err != nil {
		return err
	}
	text, err := c.host.Get(ref)
	if err != nil {
		return wrap("get", ref.String(), err)
	}
	if raw, ok := into.(*RawObject); ok {
		*raw, err = parseRaw(text)
		return err
	}
	o, err := parseRaw(text)
	if err != nil {
		return err
	}
	return o.Decode(into)
}

// List returns the objects of kind in namespace ("": every namespace the plugin may read)
// matching the label selector ("": all). Decode each with [RawObject.Decode].
func (c *Context) List(kind Kind, namespace, selector string) ([]RawObject, error) {
	if namespace != "" && !kind.Namespaced {
		if _, err := kind.Ref(namespace, ""); err != nil {
			return nil, err
		}
	}
	what := kind.Kind
	if namespace != "" {
		what += " in " + namespace
	}
	if selector != "" {
		what += " matching '" + selector + "'"
	}
	items, err := c.host.List(kind, namespace, selector)
	if err != nil {
		return nil, wrap("list", what, err)
	}
	return parseList(items)
}

// ListOwned returns the objects of kind with an owner reference to owner (controller or
// not): in owner's namespace when kind is namespaced, everywhere the plugin may read
// otherwise. Answered from the host's owner index for owned and watched kinds.
func (c *Context) ListOwned(kind Kind, owner Object) ([]RawObject, error) {
	ref, err := RefOf(owner)
	if err != nil {
		return nil, err
	}
	uid := owner.GetObjectMeta().UID
	if uid == "" {
		return nil, usageErrorf("%s has no metadata.uid, so it cannot own objects; use the object the host passed", ref)
	}
	namespace := ""
	if kind.Namespaced {
		namespace = owner.GetObjectMeta().Namespace
	}
	items, err := c.host.ListOwned(kind, namespace, uid)
	if err != nil {
		return nil, wrap("list-owned", kind.Kind+" of "+ref.String(), err)
	}
	return parseList(items)
}

func (c *Context) write(call string, obj Object, f func(string) (string, error)) (Stored, error) {
	withKind(obj)
	ref, err := RefOf(obj)
	if err != nil {
		return Stored{}, err
	}
	body, err := marshal(obj)
	if err != nil {
		return Stored{}, err
	}
	text, err := f(body)
	if err != nil {
		return Stored{}, wrap(call, ref.String(), err)
	}
	return Stored{text: text}, nil
}

// Create creates obj (an empty apiVersion and kind are filled in for a [Kinded] type) and
// returns it as stored; one of that name existing already is an error for which
// [IsAlreadyExists] is true.
func (c *Context) Create(obj Object) (Stored, error) {
	return c.write("create", obj, c.host.Create)
}

// Apply server-side applies obj with the field manager wasmop/<plugin> (forced, as
// controllers do) and returns it as stored. Set only the fields the plugin manages.
func (c *Context) Apply(obj Object) (Stored, error) {
	return c.write("apply", obj, c.host.Apply)
}

// Patch is a patch body by type; build one with [MergePatch], [JSONPatch],
// [StrategicPatch] or [ApplyPatch].
type Patch struct {
	Type PatchType
	Body any
}

// MergePatch is a JSON merge patch (RFC 7386) of body: objects merge, nil deletes.
func MergePatch(body any) Patch { return Patch{Type: PatchMerge, Body: body} }

// JSONPatch is a JSON patch (RFC 6902): operations like {"op":"add","path":...,"value":...}.
func JSONPatch(operations any) Patch { return Patch{Type: PatchJSON, Body: operations} }

// StrategicPatch is a strategic merge patch (built-in kinds only).
func StrategicPatch(body any) Patch { return Patch{Type: PatchStrategic, Body: body} }

// ApplyPatch is a server-side apply patch; body must carry apiVersion and kind.
func ApplyPatch(body any) Patch { return Patch{Type: PatchApply, Body: body} }

// Patch patches the object ref names and returns it as stored. With ifResourceVersion
// (not ""), only if the object is still at that version (a conflict otherwise).
func (c *Context) Patch(ref Ref, patch Patch, ifResourceVersion string) (Stored, error) {
	return c.patch("patch", c.host.Patch, ref, patch, ifResourceVersion)
}

// PatchStatus patches the status subresource of the object ref names, guarded like Patch.
func (c *Context) PatchStatus(ref Ref, patch Patch, ifResourceVersion string) (Stored, error) {
	return c.patch("patch-status", c.host.PatchStatus, ref, patch, ifResourceVersion)
}

type patchFunc func(Ref, PatchType, string, string) (string, error)

func (c *Context) patch(call string, f patchFunc, ref Ref, patch Patch, rv string) (Stored, error) {
	if _, err := ref.Kind.Ref(ref.Namespace, ref.Name); err != nil {
		return Stored{}, err
	}
	body, err := marshal(patch.Body)
	if err != nil {
		return Stored{}, err
	}
	text, err := f(ref, patch.Type, body, rv)
	if err != nil {
		return Stored{}, wrap(call, ref.String(), err)
	}
	return Stored{text: text}, nil
}

// UpdateStatus sets obj's status with the merge patch {"status": status}.
func (c *Context) UpdateStatus(obj Object, status any) (Stored, error) {
	return c.updateStatus(obj, status, "")
}

// UpdateStatusIfUnchanged is UpdateStatus only if obj is still as it was read: a status
// computed from a stale read is a conflict ([IsConflict]) instead of overwriting a newer one.
func (c *Context) UpdateStatusIfUnchanged(obj Object, status any) (Stored, error) {
	rv := obj.GetObjectMeta().ResourceVersion
	if rv == "" {
		ref, _ := RefOf(obj)
		return Stored{}, usageErrorf("%s has no metadata.resourceVersion, so a write cannot be guarded by it; use the object as read from the cluster", ref)
	}
	return c.updateStatus(obj, status, rv)
}

func (c *Context) updateStatus(obj Object, status any, rv string) (Stored, error) {
	ref, err := RefOf(obj)
	if err != nil {
		return Stored{}, err
	}
	return c.PatchStatus(ref, MergePatch(statusPatch{status}), rv)
}

// statusPatch is the merge patch {"status": status}: encoding/json writes a struct's one
// field without the sorted walk over a map's keys that map[string]any{"status": status}
// took in every status write.
type statusPatch struct {
	Status any `json:"status"`
}

// Delete deletes the object ref names as options say (the zero value: background, no
// preconditions). Deleting an object that does not exist succeeds.
func (c *Context) Delete(ref Ref, options DeleteOptions) error {
	if _, err := ref.Kind.Ref(ref.Namespace, ref.Name); err != nil {
		return err
	}
	if err := c.host.Delete(ref, options); err != nil {
		return wrap("delete", ref.String(), err)
	}
	return nil
}

// Event records a Kubernetes Event about regarding. The host writes it in the background:
// a nil error means it was queued (or dropped by the host's rate limit).
func (c *Context) Event(regarding Object, event Event) error {
	ref, err := RefOf(regarding)
	if err != nil {
		return err
	}
	if err := c.host.Emit(ref, event); err != nil {
		return wrap("event on", ref.String(), err)
	}
	return nil
}

// Config decodes the plugin's configuration, as the operator wrote it, into into (a pointer
// to a struct; give its fields omitempty to make them optional). A key the type does not
// have is refused (a typo in the operator's file): a permanent [*DecodeError] "invalid
// plugin configuration: ...".
func (c *Context) Config(into any) error {
	if err := decode(sourceOf(c.host.Config()), into, true); err != nil {
		return &DecodeError{Message: "invalid plugin configuration: " + err.Error()}
	}
	return nil
}

// ConfigJSON is the plugin's configuration as JSON text ("{}" when the operator gave none).
func (c *Context) ConfigJSON() string { return c.host.Config() }
