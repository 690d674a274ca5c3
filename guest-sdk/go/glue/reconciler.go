//go:build wasmop_glue

// Package export_wasmop_plugin_reconciler is the glue between the SDK and wit-bindgen's
// generated bindings, compiled only into a plugin's component: guest-sdk/go/build copies
// this file into the generated module as the package the generated exports call
// (wit_component/export_wasmop_plugin_reconciler; the generator fixes both names) and builds
// with -tags wasmop_glue. It implements wasmop.Host over the imports and turns the SDK's
// Info, Action and errors into the contract's records, so a plugin never sees the
// generated Option, Result and tag types.
package export_wasmop_plugin_reconciler

import (
	witTypes "go.bytecodealliance.org/pkg/wit/types"
	"wasmop.dev/wasmop"
	"wit_component/wasmop_plugin_config"
	"wit_component/wasmop_plugin_events"
	"wit_component/wasmop_plugin_kube"
	"wit_component/wasmop_plugin_log"
	"wit_component/wasmop_plugin_plugin_info"
	"wit_component/wasmop_plugin_reconciler"
	"wit_component/wasmop_plugin_types"
)

// Host is the imports as the SDK's Host: the admission glue's reviews make their host calls
// through it too.
var Host wasmop.Host = host{}

type (
	actionResult = witTypes.Result[wasmop_plugin_reconciler.Action, wasmop_plugin_reconciler.Error]
	kubeError    = wasmop_plugin_types.KubeError
)

// Describe is the contract's describe: the registered reconciler's Info. A plugin with no
// reconciler, or whose Describe panics, traps with the reason (describe has no error case;
// the host refuses the version and logs the trap).
func Describe() wasmop_plugin_plugin_info.Info {
	info, err := wasmop.Described()
	if err != nil {
		panic(err.Error())
	}
	return toInfo(info)
}

// Reconcile is the contract's reconcile.
func Reconcile(req wasmop_plugin_reconciler.Request) actionResult { return serve(false, req) }

// Cleanup is the contract's cleanup.
func Cleanup(req wasmop_plugin_reconciler.Request) actionResult { return serve(true, req) }

func serve(cleanup bool, req wasmop_plugin_reconciler.Request) actionResult {
	t := req.Target
	target := wasmop.Ref{
		Kind:      wasmop.Kind{Group: t.Kind.Group, Version: t.Kind.Version, Kind: t.Kind.Kind, Namespaced: t.Namespace.IsSome()},
		Namespace: t.Namespace.SomeOr(""),
		Name:      t.Name,
	}
	action, failure := wasmop.Serve(host{}, cleanup, target, req.Object)
	if failure != nil {
		if failure.Retryable {
			return witTypes.Err[wasmop_plugin_reconciler.Action](wasmop_plugin_reconciler.MakeErrorRetryable(failure.Message))
		}
		return witTypes.Err[wasmop_plugin_reconciler.Action](wasmop_plugin_reconciler.MakeErrorPermanent(failure.Message))
	}
	if d, ok := action.Requeue(); ok {
		return witTypes.Ok[wasmop_plugin_reconciler.Action, wasmop_plugin_reconciler.Error](
			wasmop_plugin_reconciler.MakeActionRequeueAfter(uint64(d.Milliseconds())))
	}
	return witTypes.Ok[wasmop_plugin_reconciler.Action, wasmop_plugin_reconciler.Error](wasmop_plugin_reconciler.MakeActionDone())
}

func opt(s string) witTypes.Option[string] {
	if s == "" {
		return witTypes.None[string]()
	}
	return witTypes.Some(s)
}

func gvk(k wasmop.Kind) wasmop_plugin_types.Gvk {
	return wasmop_plugin_types.Gvk{Group: k.Group, Version: k.Version, Kind: k.Kind}
}

func ref(r wasmop.Ref) wasmop_plugin_types.ObjectRef {
	return wasmop_plugin_types.ObjectRef{Kind: gvk(r.Kind), Namespace: opt(r.Namespace), Name: r.Name}
}

func toInfo(i wasmop.Info) wasmop_plugin_plugin_info.Info {
	owns := make([]wasmop_plugin_types.Gvk, len(i.OwnedKinds))
	for n, k := range i.OwnedKinds {
		owns[n] = gvk(k)
	}
	watches := make([]wasmop_plugin_plugin_info.Watch, len(i.Watched))
	for n, w := range i.Watched {
		watches[n] = wasmop_plugin_plugin_info.Watch{Kind: gvk(w.Kind), Selector: opt(w.Selector), Mapping: mapping(w.Mapping)}
	}
	permissions := make([]wasmop_plugin_plugin_info.Permission, len(i.Permissions))
	for n, p := range i.Permissions {
		verbs := make([]wasmop_plugin_plugin_info.Verb, len(p.Verbs))
		for v, verb := range p.Verbs {
			verbs[v] = wasmop_plugin_plugin_info.Verb(verb) // the SDK's Verb values are the contract's
		}
		permissions[n] = wasmop_plugin_plugin_info.Permission{Group: p.Kind.Group, Kind: p.Kind.Kind, Verbs: verbs, Namespaces: append([]string{}, p.Namespaces...)}
	}
	return wasmop_plugin_plugin_info.Info{
		Name:                      i.Name,
		Version:                   i.Version,
		Primary:                   gvk(i.Primary),
		PrimarySelector:           opt(i.PrimarySelector),
		Owns:                      owns,
		Watches:                   watches,
		Finalizer:                 opt(i.FinalizerName),
		ReconcileOnMetadataChange: i.ReconcileOnMetadataChange,
		Permissions:               permissions,
	}
}

func mapping(m wasmop.Mapping) wasmop_plugin_plugin_info.Mapping {
	switch m.Type {
	case wasmop.MapLabel:
		return wasmop_plugin_plugin_info.MakeMappingLabel(m.Key)
	case wasmop.MapAnnotation:
		return wasmop_plugin_plugin_info.MakeMappingAnnotation(m.Key)
	case wasmop.MapAllInNamespace:
		return wasmop_plugin_plugin_info.MakeMappingAllInNamespace()
	case wasmop.MapAll:
		return wasmop_plugin_plugin_info.MakeMappingAll()
	default:
		return wasmop_plugin_plugin_info.MakeMappingSameName()
	}
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
	return unwrap(wasmop_plugin_kube.List(gvk(k), opt(namespace), opt(selector)))
}

func (host) ListOwned(k wasmop.Kind, namespace, uid string) ([]string, error) {
	return unwrap(wasmop_plugin_kube.ListOwned(gvk(k), opt(namespace), uid))
}

func (host) Create(object string) (string, error) { return unwrap(wasmop_plugin_kube.Create(object)) }

func (host) Apply(object string) (string, error) { return unwrap(wasmop_plugin_kube.Apply(object)) }

func (host) Patch(r wasmop.Ref, t wasmop.PatchType, body, rv string) (string, error) {
	return unwrap(wasmop_plugin_kube.Patch(ref(r), patchBody(t, body), opt(rv)))
}

func (host) PatchStatus(r wasmop.Ref, t wasmop.PatchType, body, rv string) (string, error) {
	return unwrap(wasmop_plugin_kube.PatchStatus(ref(r), patchBody(t, body), opt(rv)))
}

func (host) Delete(r wasmop.Ref, o wasmop.DeleteOptions) error {
	grace := witTypes.None[uint32]()
	if o.GracePeriodSeconds != nil {
		grace = witTypes.Some(*o.GracePeriodSeconds)
	}
	options := wasmop_plugin_kube.DeleteOptions{
		Propagation:        wasmop_plugin_kube.Propagation(o.Propagation), // the same order as the contract's enum
		Preconditions:      wasmop_plugin_kube.Preconditions{Uid: opt(o.UID), ResourceVersion: opt(o.ResourceVersion)},
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
