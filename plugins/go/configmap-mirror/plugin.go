// Package configmapmirror is `configmap-mirror` in Go: a ConfigMap labelled
// `demo.wasmop.dev/mirror=true` is copied into every namespace matching the configured
// selector (default: namespaces labelled `demo.wasmop.dev/mirror-target=true`), and the
// copies follow it. The same logic as the Rust plugin, passing the same golden cases
// (plugins/rust/configmap-mirror/tests/cases).
//
// Copies live in other namespaces, where an ownerReference to the source would be ignored,
// so they are tracked by a label (`demo.wasmop.dev/mirror-copy`) and an annotation naming
// the source (`demo.wasmop.dev/mirror-source: <namespace>/<name>`), and the plugin's
// finalizer on the source removes them when the source is deleted.
//
// Build: guest-sdk/go/build plugins/go/configmap-mirror -o configmap-mirror.wasm
package configmapmirror

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"wasmop.dev/wasmop"
)

const (
	// SourceLabel marks a ConfigMap as a source to mirror.
	SourceLabel = "demo.wasmop.dev/mirror"
	// CopyLabel is on every copy, so copies can be listed.
	CopyLabel = "demo.wasmop.dev/mirror-copy"
	// SourceAnnotation on a copy names its source, `<namespace>/<name>`.
	SourceAnnotation = "demo.wasmop.dev/mirror-source"
	// Finalizer lets the plugin delete the copies before the source goes.
	Finalizer = "demo.wasmop.dev/mirror-cleanup"
	// ConflictRetry is how soon to look again at a namespace whose ConfigMap of the same
	// name blocks a copy: someone has to rename or delete it, which the plugin does not
	// watch for.
	ConflictRetry = 300 * time.Second
)

// Config is the plugin's configuration.
type Config struct {
	// NamespaceSelector is a label selector for the namespaces that receive copies
	// (opt-in by default).
	NamespaceSelector string `json:"namespaceSelector,omitempty"`
}

// namespace is a Namespace with the status phase the plugin looks at.
type namespace struct {
	wasmop.TypeMeta
	wasmop.ObjectMeta `json:"metadata"`
	Status            *struct {
		Phase string `json:"phase,omitempty"`
	} `json:"status,omitempty"`
}

// ConfigMapMirror is the reconciler.
type ConfigMapMirror struct{}

func init() { wasmop.Register[*wasmop.ConfigMap](ConfigMapMirror{}) }

// Describe declares the plugin: labelled ConfigMaps, every Namespace and the copies
// watched, the finalizer, and delete on ConfigMaps (the primary kind brings get, list and
// apply).
func (ConfigMapMirror) Describe() wasmop.Info {
	return wasmop.NewInfo("configmap-mirror", "0.1.0", wasmop.ConfigMapKind).
		Selector(SourceLabel+"=true").
		Watches(wasmop.NamespaceKind, wasmop.Mapping{Type: wasmop.MapAll}, "").
		Watches(wasmop.ConfigMapKind, wasmop.Mapping{Type: wasmop.MapAnnotation, Key: SourceAnnotation}, CopyLabel+"=true").
		Finalizer(Finalizer).
		Permission(wasmop.ConfigMapKind, []wasmop.Verb{wasmop.VerbDelete})
}

// Reconcile copies the source into every matching namespace and removes stale copies.
func (ConfigMapMirror) Reconcile(ctx *wasmop.Context, source *wasmop.ConfigMap) (wasmop.Action, error) {
	config := Config{NamespaceSelector: "demo.wasmop.dev/mirror-target=true"}
	if err := ctx.Config(&config); err != nil {
		return wasmop.Done(), err
	}
	key := sourceKey(source)
	namespaces, err := ctx.List(wasmop.NamespaceKind, "", config.NamespaceSelector)
	if err != nil {
		return wasmop.Done(), err
	}
	var targets []string
	for _, raw := range namespaces {
		var ns namespace
		if err := raw.Decode(&ns); err != nil {
			return wasmop.Done(), err
		}
		if ns.Name != source.Namespace && !isTerminating(&ns) {
			targets = append(targets, ns.Name)
		}
	}

	var blocked []string
	for _, target := range targets {
		var existing wasmop.RawObject
		err := ctx.Get(wasmop.ConfigMapKind, target, source.Name, &existing)
		if err != nil && !wasmop.IsNotFound(err) {
			return wasmop.Done(), err
		}
		if err == nil && existing.Annotations[SourceAnnotation] != key {
			blocked = append(blocked, target)
			continue
		}
		if _, err := ctx.Apply(copyOf(source, target, key)); err != nil {
			return wasmop.Done(), err
		}
	}

	copies, err := copiesOf(ctx, key)
	if err != nil {
		return wasmop.Done(), err
	}
	var removed []string
	for _, stale := range copies {
		if slices.Contains(targets, stale.Namespace) {
			continue
		}
		if err := deleteCopy(ctx, stale); err != nil {
			return wasmop.Done(), err
		}
		removed = append(removed, stale.Namespace)
	}
	if len(removed) > 0 {
		note := "removed the copies from namespaces that no longer match: " + strings.Join(removed, ", ")
		if err := ctx.Event(source, wasmop.NormalEvent("CopiesRemoved", "Delete", note)); err != nil {
			return wasmop.Done(), err
		}
	}

	if len(blocked) == 0 {
		return wasmop.Done(), nil
	}
	note := fmt.Sprintf("not copied into %s: a ConfigMap named %s that is not a copy of %s is in the way",
		strings.Join(blocked, ", "), source.Name, key)
	if err := ctx.Event(source, wasmop.WarningEvent("CopyBlocked", "Apply", note)); err != nil {
		return wasmop.Done(), err
	}
	return wasmop.RequeueAfter(ConflictRetry), nil
}

// Cleanup deletes every copy before the host removes the finalizer from the source.
func (ConfigMapMirror) Cleanup(ctx *wasmop.Context, source *wasmop.ConfigMap) (wasmop.Action, error) {
	copies, err := copiesOf(ctx, sourceKey(source))
	if err != nil {
		return wasmop.Done(), err
	}
	for _, c := range copies {
		if err := deleteCopy(ctx, c); err != nil {
			return wasmop.Done(), err
		}
	}
	return wasmop.Done(), nil
}

func sourceKey(source *wasmop.ConfigMap) string { return source.Namespace + "/" + source.Name }

func isTerminating(ns *namespace) bool {
	return ns.IsBeingDeleted() || (ns.Status != nil && ns.Status.Phase == "Terminating")
}

func deleteCopy(ctx *wasmop.Context, c wasmop.RawObject) error {
	ref, err := wasmop.ConfigMapKind.Ref(c.Namespace, c.Name)
	if err != nil {
		return err
	}
	return ctx.Delete(ref, wasmop.DeleteOptions{})
}

// copiesOf is every copy of the source named by key, in any namespace.
func copiesOf(ctx *wasmop.Context, key string) ([]wasmop.RawObject, error) {
	labelled, err := ctx.List(wasmop.ConfigMapKind, "", CopyLabel+"=true")
	if err != nil {
		return nil, err
	}
	var copies []wasmop.RawObject
	for _, c := range labelled {
		if c.Annotations[SourceAnnotation] == key {
			copies = append(copies, c)
		}
	}
	return copies, nil
}

// mirrored is a copy as the plugin applies it: a ConfigMap whose data and binaryData are
// written when the source has them, empty or not (`omitzero` drops only a missing map),
// as the Rust plugin writes them; the SDK's ConfigMap drops an empty map (`omitempty`),
// which would turn a source's `data: {}` into a copy without `data`.
type mirrored struct {
	wasmop.TypeMeta
	wasmop.ObjectMeta `json:"metadata"`
	Data              map[string]string `json:"data,omitzero"`
	BinaryData        map[string][]byte `json:"binaryData,omitzero"`
}

// DefaultKind makes the SDK fill in apiVersion and kind.
func (*mirrored) DefaultKind() wasmop.Kind { return wasmop.ConfigMapKind }

// copyOf is the copy of source for namespace: its data, its labels except the source label
// (a copy must not be mirrored itself), the copy label and the annotation naming the source.
func copyOf(source *wasmop.ConfigMap, namespace, key string) *mirrored {
	labels := map[string]string{}
	for k, v := range source.Labels {
		if k != SourceLabel {
			labels[k] = v
		}
	}
	labels[CopyLabel] = "true"
	return &mirrored{
		ObjectMeta: wasmop.ObjectMeta{
			Name:        source.Name,
			Namespace:   namespace,
			Labels:      labels,
			Annotations: map[string]string{SourceAnnotation: key},
		},
		Data:       source.Data,
		BinaryData: source.BinaryData,
	}
}
