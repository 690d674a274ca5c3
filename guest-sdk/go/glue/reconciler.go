//go:build wasmop_glue

// Package export_wasmop_plugin_reconciler is the glue between the SDK's reconciler and
// wit-bindgen's generated bindings, compiled only into a plugin built against a world with a
// reconciler (plugin, plugin-with-admission): guest-sdk/go/build copies this file into the
// generated module as the package the generated exports call
// (wit_component/export_wasmop_plugin_reconciler; the generator fixes both names) and builds
// with -tags wasmop_glue. It turns the SDK's Info, Action and errors into the contract's
// records over the imports' Host (wasmop_host, glue/host.go), so a plugin never sees the
// generated Option, Result and tag types.
package export_wasmop_plugin_reconciler

import (
	witTypes "go.bytecodealliance.org/pkg/wit/types"
	"wasmop.dev/wasmop"
	"wit_component/wasmop_host"
	"wit_component/wasmop_plugin_plugin_info"
	"wit_component/wasmop_plugin_reconciler"
	"wit_component/wasmop_plugin_types"
)

type actionResult = witTypes.Result[wasmop_plugin_reconciler.Action, wasmop_plugin_reconciler.Error]

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
	action, failure := wasmop.Serve(wasmop_host.Host, cleanup, target, req.Object)
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

func toInfo(i wasmop.Info) wasmop_plugin_plugin_info.Info {
	owns := make([]wasmop_plugin_types.Gvk, len(i.OwnedKinds))
	for n, k := range i.OwnedKinds {
		owns[n] = wasmop_host.Gvk(k)
	}
	watches := make([]wasmop_plugin_plugin_info.Watch, len(i.Watched))
	for n, w := range i.Watched {
		watches[n] = wasmop_plugin_plugin_info.Watch{Kind: wasmop_host.Gvk(w.Kind), Selector: wasmop_host.Opt(w.Selector), Mapping: mapping(w.Mapping)}
	}
	return wasmop_plugin_plugin_info.Info{
		Name:                      i.Name,
		Version:                   i.Version,
		Primary:                   wasmop_host.Gvk(i.Primary),
		PrimarySelector:           wasmop_host.Opt(i.PrimarySelector),
		Owns:                      owns,
		Watches:                   watches,
		Finalizer:                 wasmop_host.Opt(i.FinalizerName),
		ReconcileOnMetadataChange: i.ReconcileOnMetadataChange,
		Permissions:               wasmop_host.Permissions(i.Permissions),
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
