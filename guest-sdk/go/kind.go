package wasmop

import "strings"

// Kind is a Kubernetes group/version/kind and whether its objects live in a namespace.
// Group is "" for the core group (ConfigMap, Namespace, Secret, ...).
type Kind struct {
	Group      string
	Version    string
	Kind       string
	Namespaced bool
}

// Kinds of the core group that plugins commonly use.
var (
	ConfigMapKind = Kind{Version: "v1", Kind: "ConfigMap", Namespaced: true}
	SecretKind    = Kind{Version: "v1", Kind: "Secret", Namespaced: true}
	NamespaceKind = Kind{Version: "v1", Kind: "Namespace"}
)

// APIVersion is the kind's apiVersion as objects carry it: "v1", "apps/v1".
func (k Kind) APIVersion() string {
	if k.Group == "" {
		return k.Version
	}
	return k.Group + "/" + k.Version
}

// String is "apiVersion/Kind", as error messages name kinds.
func (k Kind) String() string { return k.APIVersion() + "/" + k.Kind }

// Ref is the identity of one object: its kind, its namespace ("" for cluster-scoped kinds)
// and its name.
type Ref struct {
	Kind      Kind
	Namespace string
	Name      string
}

// Ref names the object of this kind called name in namespace, checking the scope: a
// namespaced kind needs a namespace, a cluster-scoped one must not have one.
func (k Kind) Ref(namespace, name string) (Ref, error) {
	if k.Namespaced && namespace == "" {
		return Ref{}, usageErrorf("%s %s is namespaced: a namespace is required", k.Kind, name)
	}
	if !k.Namespaced && namespace != "" {
		return Ref{}, usageErrorf("%s is cluster-scoped: namespace `%s` cannot apply", k.Kind, namespace)
	}
	return Ref{Kind: k, Namespace: namespace, Name: name}, nil
}

// String is "Kind namespace/name" (or "Kind name"), as messages name objects.
func (r Ref) String() string {
	if r.Namespace == "" {
		return r.Kind.Kind + " " + r.Name
	}
	return r.Kind.Kind + " " + r.Namespace + "/" + r.Name
}

// parseAPIVersion splits "group/version" ("v1" for the core group).
func parseAPIVersion(apiVersion string) (group, version string) {
	if i := strings.LastIndexByte(apiVersion, '/'); i >= 0 {
		return apiVersion[:i], apiVersion[i+1:]
	}
	return "", apiVersion
}
