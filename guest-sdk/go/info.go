package wasmop

// Verb is what a permission grants; the verbs mirror the host calls.
type Verb int

// The verbs (wit/plugin.wit, plugin-info.verb).
const (
	VerbGet Verb = iota
	VerbList
	VerbCreate
	VerbPatch
	VerbApply
	VerbDelete
	VerbPatchStatus
)

// Permission asks for verbs on a kind beyond what the primary, owned and watched kinds
// imply. Namespaces empty means the namespaces the plugin watches. The operator must grant
// it too.
type Permission struct {
	Kind       Kind
	Verbs      []Verb
	Namespaces []string
}

// MappingType says how a change to a watched kind selects primary objects.
type MappingType int

// The mappings (wit/plugin.wit, plugin-info.mapping).
const (
	// MapSameName: the primary object with the changed object's namespace and name.
	MapSameName MappingType = iota
	// MapLabel: the primary object named by the label Key's value, in the same namespace.
	MapLabel
	// MapAnnotation: the primary object named by the annotation Key's value ("name" or
	// "namespace/name").
	MapAnnotation
	// MapAllInNamespace: every primary object in the changed object's namespace.
	MapAllInNamespace
	// MapAll: every primary object.
	MapAll
)

// Mapping is how a change to a watched object selects the primary objects to reconcile.
type Mapping struct {
	Type MappingType
	// Key is the label or annotation key for MapLabel and MapAnnotation.
	Key string
}

// Watch is an extra kind the plugin watches, narrowed by a label Selector ("" for none).
type Watch struct {
	Kind     Kind
	Selector string
	Mapping  Mapping
}

// Info is everything a plugin declares when it is loaded, built with chained calls:
//
//	wasmop.NewInfo("database-config", "0.1.0", DatabaseKind).Owns(wasmop.ConfigMapKind)
//
// The host checks it against the operator's policy (wit/plugin.wit, plugin-info.info).
type Info struct {
	Name                      string
	Version                   string
	Primary                   Kind
	PrimarySelector           string
	OwnedKinds                []Kind
	Watched                   []Watch
	FinalizerName             string
	ReconcileOnMetadataChange bool
	Permissions               []Permission
}

// NewInfo declares a plugin called name (a DNS-1123 label) at version, reconciling
// objects of primary.
func NewInfo(name, version string, primary Kind) Info {
	return Info{Name: name, Version: version, Primary: primary}
}

// Selector reconciles only primary objects matching this label selector.
func (i Info) Selector(selector string) Info { i.PrimarySelector = selector; return i }

// Owns declares that the plugin creates objects of kind with a controller reference to the
// primary object; a change to one reconciles its owner.
func (i Info) Owns(kind Kind) Info {
	i.OwnedKinds = append(append([]Kind(nil), i.OwnedKinds...), kind)
	return i
}

// Watches makes a change to an object of kind (matching selector, "" for all) reconcile the
// primary objects mapping selects.
func (i Info) Watches(kind Kind, mapping Mapping, selector string) Info {
	i.Watched = append(append([]Watch(nil), i.Watched...), Watch{Kind: kind, Selector: selector, Mapping: mapping})
	return i
}

// Finalizer makes the host add this finalizer (a qualified name with a prefix,
// "example.com/cleanup") to every primary object and call Cleanup when one is deleted.
func (i Info) Finalizer(name string) Info { i.FinalizerName = name; return i }

// OnMetadataChange also reconciles on changes that do not bump metadata.generation.
func (i Info) OnMetadataChange() Info { i.ReconcileOnMetadataChange = true; return i }

// Permission asks for verbs on kind in namespaces (none: those the plugin watches).
func (i Info) Permission(kind Kind, verbs []Verb, namespaces ...string) Info {
	i.Permissions = append(append([]Permission(nil), i.Permissions...), Permission{Kind: kind, Verbs: verbs, Namespaces: namespaces})
	return i
}
