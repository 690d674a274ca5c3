package wasmop

// PatchType is a patch body's type.
type PatchType int

// The patch types (wit/plugin.wit, kube.patch-body).
const (
	// PatchMerge is a JSON merge patch (RFC 7386): objects merge, null deletes.
	PatchMerge PatchType = iota
	// PatchJSON is a JSON patch (RFC 6902): a list of operations.
	PatchJSON
	// PatchStrategic is a strategic merge patch (built-in kinds only).
	PatchStrategic
	// PatchApply is a server-side apply patch with the plugin's field manager.
	PatchApply
)

// Propagation is what happens to the objects a deleted object owns.
type Propagation int

// The propagation policies; the zero value is background.
const (
	// PropagationBackground deletes the object at once and its dependents afterwards.
	PropagationBackground Propagation = iota
	// PropagationForeground keeps the object until its blocking dependents are gone.
	PropagationForeground
	// PropagationOrphan keeps the dependents, their owner reference removed.
	PropagationOrphan
)

// DeleteOptions say how to delete; the zero value is background propagation, no
// preconditions and the kind's default grace period. A failed precondition (UID,
// ResourceVersion) is a conflict and deletes nothing.
type DeleteOptions struct {
	Propagation        Propagation
	UID                string
	ResourceVersion    string
	GracePeriodSeconds *uint32
}

// EventType is an Event's type.
type EventType int

// The two Event types.
const (
	// EventNormal reports routine progress.
	EventNormal EventType = iota
	// EventWarning reports something an operator should look at.
	EventWarning
)

// Event is a Kubernetes Event: a CamelCase Reason and an Action (at most 128 characters
// each) and a Note (at most 1024; longer is cut by the host).
type Event struct {
	Type   EventType
	Reason string
	Action string
	Note   string
}

// NormalEvent is an Event reporting routine progress.
func NormalEvent(reason, action, note string) Event {
	return Event{Type: EventNormal, Reason: reason, Action: action, Note: note}
}

// WarningEvent is an Event reporting something an operator should look at.
func WarningEvent(reason, action, note string) Event {
	return Event{Type: EventWarning, Reason: reason, Action: action, Note: note}
}

// Host is the host's side of the contract (wit/plugin.wit), objects as JSON text and ""
// for an absent optional string. The build's glue implements it over the component's
// imports; a test can implement it to run a reconciler natively ([NewContext]). A failed
// call returns a [*HostError].
type Host interface {
	Get(ref Ref) (string, error)
	List(kind Kind, namespace, selector string) ([]string, error)
	ListOwned(kind Kind, namespace, ownerUID string) ([]string, error)
	Create(object string) (string, error)
	Apply(object string) (string, error)
	Patch(ref Ref, patchType PatchType, body string, ifResourceVersion string) (string, error)
	PatchStatus(ref Ref, patchType PatchType, body string, ifResourceVersion string) (string, error)
	Delete(ref Ref, options DeleteOptions) error
	Emit(regarding Ref, event Event) error
	Log(level Level, message string)
	Config() string
}
