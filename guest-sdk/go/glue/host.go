//go:build wasmop_glue

// Package wasmop_host is the glue's wasmop.Host over the component's imports (kube, events,
// log, config), and the records both exports share (gvk, permission): all of it in every
// world of the contract. guest-sdk/go/build copies this file into the generated module as
// wit_component/wasmop_host (a name no generated package has: theirs start with
// wasmop_plugin_ or export_) and builds with -tags wasmop_glue. The export glues (the
// reconciler's, the admission half's) make their calls' host calls through [Host], so an
// admission-only plugin, which exports no reconciler, has them too.
package wasmop_host

import (
	witTypes "go.bytecodealliance.org/pkg/wit/types"
	"wasmop.dev/wasmop"
	"wit_component/wasmop_plugin_config"
	"wit_component/wasmop_plugin_events"
	"wit_component/wasmop_plugin_kube"
	"wit_component/wasmop_plugin_log"
	"wit_component/wasmop_plugin_plugin_info"
	"wit_component/wasmop_plugin_types"
)

// Host is the imports as the SDK's Host.
var Host wasmop.Host = host{}

type kubeError = wasmop_plugin_types.KubeError

// Opt is the contract's option of a string the SDK leaves empty for none.
func Opt(s string) witTypes.Option[string] {
	if s == "" {
		return witTypes.None[string]()
	}
	return witTypes.Some(s)
}

// Gvk is the contract's gvk of a kind.
func Gvk(k wasmop.Kind) wasmop_plugin_types.Gvk {
	return wasmop_plugin_types.Gvk{Group: k.Group, Version: k.Version, Kind: k.Kind}
}

// Permissions are the contract's permissions: the reconciler's Info's, or an admission
// half's.
func Permissions(ps []wasmop.Permission) []wasmop_plugin_plugin_info.Permission {
	permissions := make([]wasmop_plugin_plugin_info.Permission, len(ps))
	for n, p := range ps {
		verbs := make([]wasmop_plugin_plugin_info.Verb, len(p.Verbs))
		for v, verb := range p.Verbs {
			verbs[v] = wasmop_plugin_plugin_info.Verb(verb) // the SDK's Verb values are the contract's
		}
		permissions[n] = wasmop_plugin_plugin_info.Permission{Group: p.Kind.Group, Kind: p.Kind.Kind, Verbs: verbs, Namespaces: append([]string{}, p.Namespaces...)}
	}
	return permissions
}

func ref(r wasmop.Ref) wasmop_plugin_types.ObjectRef {
	return wasmop_plugin_types.ObjectRef{Kind: Gvk(r.Kind), Namespace: Opt(r.Namespace), Name: r.Name}
}

// hostError is the SDK's error for a contract kube-error.
func hostError(e kubeError) error {
	switch e.Tag() {
	case wasmop_plugin_types.KubeError_NotFound:
		return &wasmop.HostError{Reason: wasmop.ReasonNotFound, Message: e.NotFound()}
	case wasmop_plugin_types.KubeError_Conflict:
		return &wasmop.HostError{Reason: wasmop.ReasonConflict, Message: e.Conflict()}
	case wasmop_plugin_types.KubeError_AlreadyExists:
		return &wasmop.HostError{Reason: wasmop.ReasonAlreadyExists, Message: e.AlreadyExists()}
	case wasmop_plugin_types.KubeError_Forbidden:
		return &wasmop.HostError{Reason: wasmop.ReasonForbidden, Message: e.Forbidden()}
	case wasmop_plugin_types.KubeError_Denied:
		return &wasmop.HostError{Reason: wasmop.ReasonDenied, Message: e.Denied()}
	case wasmop_plugin_types.KubeError_Invalid:
		return &wasmop.HostError{Reason: wasmop.ReasonInvalid, Message: e.Invalid()}
	case wasmop_plugin_types.KubeError_Unavailable:
		return &wasmop.HostError{Reason: wasmop.ReasonUnavailable, Message: e.Unavailable()}
	default:
		return &wasmop.HostError{Reason: wasmop.ReasonOther, Message: e.Other()}
	}
}

func unwrap[T any](r witTypes.Result[T, kubeError]) (T, error) {
	if r.IsErr() {
		var zero T
		return zero, hostError(r.Err())
	}
	return r.Ok(), nil
}

func patchBody(t wasmop.PatchType, body string) wasmop_plugin_kube.PatchBody {
	switch t {
	case wasmop.PatchJSON:
		return wasmop_plugin_kube.MakePatchBodyJson(body)
	case wasmop.PatchStrategic:
		return wasmop_plugin_kube.MakePatchBodyStrategic(body)
	case wasmop.PatchApply:
		return wasmop_plugin_kube.MakePatchBodyApply(body)
	default:
		return wasmop_plugin_kube.MakePatchBodyMerge(body)
	}
}

// host is wasmop.Host over the component's imports.
type host struct{}

func (host) Get(r wasmop.Ref) (string, error) { return unwrap(wasmop_plugin_kube.Get(ref(r))) }

func (host) List(k wasmop.Kind, namespace, selector string) ([]string, error) {
	return unwrap(wasmop_plugin_kube.List(Gvk(k), Opt(namespace), Opt(selector)))
}

func (host) ListOwned(k wasmop.Kind, namespace, uid string) ([]string, error) {
	return unwrap(wasmop_plugin_kube.ListOwned(Gvk(k), Opt(namespace), uid))
}

func (host) Create(object string) (string, error) { return unwrap(wasmop_plugin_kube.Create(object)) }

func (host) Apply(object string) (string, error) { return unwrap(wasmop_plugin_kube.Apply(object)) }

func (host) Patch(r wasmop.Ref, t wasmop.PatchType, body, rv string) (string, error) {
	return unwrap(wasmop_plugin_kube.Patch(ref(r), patchBody(t, body), Opt(rv)))
}

func (host) PatchStatus(r wasmop.Ref, t wasmop.PatchType, body, rv string) (string, error) {
	return unwrap(wasmop_plugin_kube.PatchStatus(ref(r), patchBody(t, body), Opt(rv)))
}

func (host) Delete(r wasmop.Ref, o wasmop.DeleteOptions) error {
	grace := witTypes.None[uint32]()
	if o.GracePeriodSeconds != nil {
		grace = witTypes.Some(*o.GracePeriodSeconds)
	}
	options := wasmop_plugin_kube.DeleteOptions{
		Propagation:        wasmop_plugin_kube.Propagation(o.Propagation), // the same order as the contract's enum
		Preconditions:      wasmop_plugin_kube.Preconditions{Uid: Opt(o.UID), ResourceVersion: Opt(o.ResourceVersion)},
		GracePeriodSeconds: grace,
	}
	_, err := unwrap(wasmop_plugin_kube.Delete(ref(r), options))
	return err
}

func (host) Emit(r wasmop.Ref, e wasmop.Event) error {
	eventType := wasmop_plugin_events.EventType_Normal
	if e.Type == wasmop.EventWarning {
		eventType = wasmop_plugin_events.EventType_Warning
	}
	_, err := unwrap(wasmop_plugin_events.Emit(wasmop_plugin_events.Event{
		Regarding: ref(r), EventType: eventType, Reason: e.Reason, Action: e.Action, Note: e.Note,
	}))
	return err
}

func (host) Log(level wasmop.Level, message string) {
	wasmop_plugin_log.Log(wasmop_plugin_log.Level(level), message) // the same order as the contract's enum
}

func (host) Config() string { return wasmop_plugin_config.Get() }
