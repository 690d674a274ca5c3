// Package namespacedefaults is `namespace-defaults` in Go: every Namespace labelled
// `demo.wasmop.dev/defaults=enabled` gets a ResourceQuota, a LimitRange with container
// defaults and a default-deny NetworkPolicy, all named `namespace-defaults` and owned by the
// Namespace. The values come from the plugin's configuration. The same logic as the Rust
// plugin, passing the same golden cases (plugins/rust/namespace-defaults/tests/cases).
//
// Build: guest-sdk/go/build plugins/go/namespace-defaults -o namespace-defaults.wasm
package namespacedefaults

import "wasmop.dev/wasmop"

// Name is the name of every object the plugin creates.
const Name = "namespace-defaults"

// The kinds it owns.
var (
	ResourceQuotaKind = wasmop.Kind{Version: "v1", Kind: "ResourceQuota", Namespaced: true}
	LimitRangeKind    = wasmop.Kind{Version: "v1", Kind: "LimitRange", Namespaced: true}
	NetworkPolicyKind = wasmop.Kind{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy", Namespaced: true}
)

// Config is the plugin's configuration. Each field left out takes its default; a field given
// replaces the default as a whole (a quota with only pods sets only pods). The defaults are
// sized for a small team; ingress is denied, egress stays open so workloads keep reaching
// DNS and the API server.
type Config struct {
	// Quota is the ResourceQuota's spec.hard.
	Quota map[string]string `json:"quota,omitempty"`
	// ContainerLimits are the LimitRange's default container limits.
	ContainerLimits map[string]string `json:"containerLimits,omitempty"`
	// ContainerRequests are the LimitRange's default container requests.
	ContainerRequests map[string]string `json:"containerRequests,omitempty"`
	// Deny is the traffic ("Ingress", "Egress") the NetworkPolicy denies to every pod by
	// default; empty means no NetworkPolicy (an existing one is deleted).
	Deny []string `json:"deny,omitempty"`
}

// withDefaults fills in what the operator left out (absent, not empty: `deny: []` stays).
func (c Config) withDefaults() Config {
	if c.Quota == nil {
		c.Quota = map[string]string{"requests.cpu": "4", "requests.memory": "8Gi", "limits.cpu": "8", "limits.memory": "16Gi", "pods": "50"}
	}
	if c.ContainerLimits == nil {
		c.ContainerLimits = map[string]string{"cpu": "500m", "memory": "512Mi"}
	}
	if c.ContainerRequests == nil {
		c.ContainerRequests = map[string]string{"cpu": "100m", "memory": "128Mi"}
	}
	if c.Deny == nil {
		c.Deny = []string{"Ingress"}
	}
	return c
}

// Namespace is the primary object, with the status phase the plugin looks at.
type Namespace struct {
	wasmop.TypeMeta
	wasmop.ObjectMeta `json:"metadata"`
	Status            *struct {
		Phase string `json:"phase,omitempty"`
	} `json:"status,omitempty"`
}

// owned is an object the plugin applies: its kind, metadata and spec.
type owned struct {
	wasmop.TypeMeta
	wasmop.ObjectMeta `json:"metadata"`
	Spec              any `json:"spec"`
}

func newOwned(kind wasmop.Kind, meta wasmop.ObjectMeta, spec any) *owned {
	return &owned{TypeMeta: wasmop.TypeMeta{APIVersion: kind.APIVersion(), Kind: kind.Kind}, ObjectMeta: meta, Spec: spec}
}

// NamespaceDefaults is the reconciler.
type NamespaceDefaults struct {
	wasmop.NoCleanup[*Namespace]
}

func init() { wasmop.Register[*Namespace](NamespaceDefaults{}) }

// Describe declares the plugin: labelled Namespaces, and the three kinds it owns.
func (NamespaceDefaults) Describe() wasmop.Info {
	return wasmop.NewInfo(Name, "0.1.0", wasmop.NamespaceKind).
		Selector("demo.wasmop.dev/defaults=enabled").
		Owns(ResourceQuotaKind).
		Owns(LimitRangeKind).
		Owns(NetworkPolicyKind)
}

// Reconcile applies the quota, the limits and the policy (or deletes the policy).
func (NamespaceDefaults) Reconcile(ctx *wasmop.Context, ns *Namespace) (wasmop.Action, error) {
	if (ns.Status != nil && ns.Status.Phase == "Terminating") || ns.IsBeingDeleted() {
		// The API server refuses new objects in a terminating namespace, and the garbage
		// collector removes the ones there are.
		return wasmop.Done(), nil
	}
	var config Config
	if err := ctx.Config(&config); err != nil {
		return wasmop.Done(), err
	}
	config = config.withDefaults()
	meta, err := wasmop.OwnedMeta(ns, Name)
	if err != nil {
		return wasmop.Done(), err
	}
	meta.Namespace = ns.Name

	if _, err := ctx.Apply(newOwned(ResourceQuotaKind, meta, map[string]any{"hard": config.Quota})); err != nil {
		return wasmop.Done(), err
	}
	limits := map[string]any{"type": "Container", "default": config.ContainerLimits, "defaultRequest": config.ContainerRequests}
	if _, err := ctx.Apply(newOwned(LimitRangeKind, meta, map[string]any{"limits": []any{limits}})); err != nil {
		return wasmop.Done(), err
	}
	if len(config.Deny) == 0 {
		ref, err := NetworkPolicyKind.Ref(ns.Name, Name)
		if err != nil {
			return wasmop.Done(), err
		}
		return wasmop.Done(), ctx.Delete(ref, wasmop.DeleteOptions{})
	}
	// An empty selector selects every pod; no rules means nothing is allowed.
	spec := map[string]any{"podSelector": map[string]any{}, "policyTypes": config.Deny}
	if _, err := ctx.Apply(newOwned(NetworkPolicyKind, meta, spec)); err != nil {
		return wasmop.Done(), err
	}
	return wasmop.Done(), nil
}
