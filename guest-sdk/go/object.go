package wasmop

import "encoding/json"

// TypeMeta is an object's apiVersion and kind; embed it (untagged, so its fields are
// inlined) in a type for a Kubernetes object, as k8s.io/api types embed metav1.TypeMeta.
type TypeMeta struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
}

// GetTypeMeta returns the TypeMeta itself, so that every type embedding it is part of an
// [Object].
func (t *TypeMeta) GetTypeMeta() *TypeMeta { return t }

// ObjectMeta is the metadata every object has (the fields of metav1.ObjectMeta a controller
// uses, with the same JSON). Embed it tagged `json:"metadata"`.
type ObjectMeta struct {
	Name              string            `json:"name,omitempty"`
	GenerateName      string            `json:"generateName,omitempty"`
	Namespace         string            `json:"namespace,omitempty"`
	UID               string            `json:"uid,omitempty"`
	ResourceVersion   string            `json:"resourceVersion,omitempty"`
	Generation        int64             `json:"generation,omitempty"`
	CreationTimestamp string            `json:"creationTimestamp,omitempty"`
	DeletionTimestamp string            `json:"deletionTimestamp,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	OwnerReferences   []OwnerReference  `json:"ownerReferences,omitempty"`
	Finalizers        []string          `json:"finalizers,omitempty"`
}

// GetObjectMeta returns the ObjectMeta itself, so that every type embedding it is part of
// an [Object].
func (m *ObjectMeta) GetObjectMeta() *ObjectMeta { return m }

// IsBeingDeleted reports whether deletion was requested (deletionTimestamp is set).
func (m *ObjectMeta) IsBeingDeleted() bool { return m.DeletionTimestamp != "" }

// OwnerReference is one entry of metadata.ownerReferences (metav1.OwnerReference).
type OwnerReference struct {
	APIVersion         string `json:"apiVersion"`
	Kind               string `json:"kind"`
	Name               string `json:"name"`
	UID                string `json:"uid"`
	Controller         *bool  `json:"controller,omitempty"`
	BlockOwnerDeletion *bool  `json:"blockOwnerDeletion,omitempty"`
}

// Object is a Kubernetes object: a pointer to a struct embedding [TypeMeta] and
// [ObjectMeta], like client.Object in controller-runtime.
type Object interface {
	GetTypeMeta() *TypeMeta
	GetObjectMeta() *ObjectMeta
}

// KindOf is the kind of obj from its apiVersion and kind (its scope from whether it has a
// namespace).
func KindOf(obj Object) Kind {
	t := obj.GetTypeMeta()
	group, version := parseAPIVersion(t.APIVersion)
	return Kind{Group: group, Version: version, Kind: t.Kind, Namespaced: obj.GetObjectMeta().Namespace != ""}
}

// RefOf is obj's identity, for host calls.
func RefOf(obj Object) (Ref, error) {
	m := obj.GetObjectMeta()
	kind := KindOf(obj)
	if m.Name == "" {
		what := kind.Kind
		if what == "" {
			what = "object"
		}
		return Ref{}, usageErrorf("the %s has no metadata.name", what)
	}
	return Ref{Kind: kind, Namespace: m.Namespace, Name: m.Name}, nil
}

// RawObject is an object as the host handed it over: its type and metadata decoded, the
// rest kept as JSON until [RawObject.Decode] asks for it.
type RawObject struct {
	TypeMeta
	ObjectMeta `json:"metadata"`
	src        source
}

// parseRaw decodes the type and metadata of an object the host sent. Every write's reply and
// every listed item passes through here, and the text is mostly what RawObject does not keep
// (spec, status, managedFields), so the usual text is read by scanRaw, which skips those
// parts without decoding them; anything it does not take as encoding/json would (see there)
// goes to encoding/json, whose answer, or error, is then the one.
func parseRaw(text string) (RawObject, error) {
	src := sourceOf(text)
	var o RawObject
	if !scanRaw(src, &o) {
		o = RawObject{}
		if err := json.Unmarshal(src.b, &o); err != nil {
			return RawObject{}, &DecodeError{Message: "cannot decode an object from the host: " + err.Error()}
		}
	}
	o.src = src
	return o, nil
}

// JSON is the object's JSON text, as the host sent it: a copy, so that changing it changes
// nothing of the object (its decoded strings are substrings of the host's text, and Decode
// reads that text).
func (o RawObject) JSON() []byte { return []byte(o.src.s) }

// Decode decodes the object into into (a pointer to a struct): every field whose JSON tag
// has no omitempty and that is not a pointer is required. A permanent [*DecodeError]
// "cannot decode <Kind> <ns>/<name> from the host as <apiVersion>/<Kind>: <what>" says what
// does not fit.
func (o RawObject) Decode(into any) error {
	if err := decode(o.src, into, false); err != nil {
		return o.decodeError(err)
	}
	return nil
}

// decodeError is the permanent error of a failed decode of this object.
func (o RawObject) decodeError(err error) error {
	ref := Ref{Kind: KindOf(&o), Namespace: o.Namespace, Name: o.Name}
	return &DecodeError{Message: "cannot decode " + ref.String() + " from the host as " + ref.Kind.String() + ": " + err.Error()}
}

// Stored is an object as the API server stored it after a write ([Context.Apply],
// [Context.Create], [Context.Patch], [Context.UpdateStatus] and the rest): the host's JSON
// text, read only when asked. Most reconcilers never read a write's reply, and reading every
// one took a tenth of a Go plugin's call; the Rust and Python SDKs return the same.
type Stored struct {
	text string
}

// Raw reads the stored object's type and metadata. A reply the SDK cannot read is a
// permanent [*DecodeError].
func (s Stored) Raw() (RawObject, error) { return parseRaw(s.text) }

// Decode decodes the stored object into into (a pointer to a struct): [Stored.Raw], then
// [RawObject.Decode], with their errors.
func (s Stored) Decode(into any) error {
	o, err := s.Raw()
	if err != nil {
		return err
	}
	return o.Decode(into)
}

// JSON is the stored object's JSON text, as the host sent it (a copy).
func (s Stored) JSON() []byte { return []byte(s.text) }

// ConfigMap is a core/v1 ConfigMap.
type ConfigMap struct {
	TypeMeta
	ObjectMeta `json:"metadata"`
	Data       map[string]string `json:"data,omitempty"`
	BinaryData map[string][]byte `json:"binaryData,omitempty"`
	Immutable  *bool             `json:"immutable,omitempty"`
}

// DefaultKind makes the SDK fill in apiVersion and kind when they are empty.
func (*ConfigMap) DefaultKind() Kind { return ConfigMapKind }

// Namespace is a core/v1 Namespace (its spec and status left out).
type Namespace struct {
	TypeMeta
	ObjectMeta `json:"metadata"`
}

// DefaultKind makes the SDK fill in apiVersion and kind when they are empty.
func (*Namespace) DefaultKind() Kind { return NamespaceKind }

// Kinded is an object type that knows its kind, so that a write fills in an empty
// apiVersion and kind (give a CRD's type a DefaultKind method to get the same).
type Kinded interface {
	DefaultKind() Kind
}

func withKind(obj Object) {
	t := obj.GetTypeMeta()
	if k, ok := obj.(Kinded); ok && t.APIVersion == "" && t.Kind == "" {
		kind := k.DefaultKind()
		t.APIVersion, t.Kind = kind.APIVersion(), kind.Kind
	}
}

func boolPtr(b bool) *bool { return &b }

// OwnerReferenceTo is a controller reference to owner (controller and blockOwnerDeletion
// true), for metadata.ownerReferences of an object the plugin creates. owner must have been
// read from the cluster (it needs its uid). A namespaced owner owns objects in its own
// namespace only; a cluster-scoped one (a Namespace) owns objects anywhere.
func OwnerReferenceTo(owner Object) (OwnerReference, error) {
	ref, err := RefOf(owner)
	if err != nil {
		return OwnerReference{}, err
	}
	m := owner.GetObjectMeta()
	if m.UID == "" {
		return OwnerReference{}, usageErrorf("%s has no metadata.uid, so it cannot own objects; use the object the host passed", ref)
	}
	return OwnerReference{
		APIVersion:         ref.Kind.APIVersion(),
		Kind:               ref.Kind.Kind,
		Name:               m.Name,
		UID:                m.UID,
		Controller:         boolPtr(true),
		BlockOwnerDeletion: boolPtr(true),
	}, nil
}

// OwnedMeta is metadata for an object called name owned by owner: in the owner's namespace
// (none for a cluster-scoped owner), with a controller reference to it.
func OwnedMeta(owner Object, name string) (ObjectMeta, error) {
	or, err := OwnerReferenceTo(owner)
	if err != nil {
		return ObjectMeta{}, err
	}
	return ObjectMeta{
		Name:            name,
		Namespace:       owner.GetObjectMeta().Namespace,
		OwnerReferences: []OwnerReference{or},
	}, nil
}

// IsControlledBy reports whether obj has a controller reference to owner (by uid).
func IsControlledBy(obj, owner Object) bool {
	uid := owner.GetObjectMeta().UID
	for _, r := range obj.GetObjectMeta().OwnerReferences {
		if r.UID == uid && uid != "" && r.Controller != nil && *r.Controller {
			return true
		}
	}
	return false
}
