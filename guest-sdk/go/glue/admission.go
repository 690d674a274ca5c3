//go:build wasmop_glue

// Package export_wasmop_plugin_admission is the glue between the SDK's admission half and
// wit-bindgen's generated bindings, compiled only into a plugin built against a world that
// exports admission (admission-plugin, plugin-with-admission): guest-sdk/go/build copies this
// file into the generated module as the package the generated admission exports call. It
// turns the SDK's Webhooks, Answer and Denied into the contract's records; a review that
// fails (a panic, an error that is not a refusal) ends the call with its message on stderr,
// which the host quotes in the failed review's message before the webhook's failure policy
// answers. Its host calls go through the imports' Host (wasmop_host, glue/host.go), which
// needs no reconciler.
package export_wasmop_plugin_admission

import (
	"fmt"
	"os"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
	"wasmop.dev/wasmop"
	"wit_component/wasmop_host"
	adm "wit_component/wasmop_plugin_admission"
)

// Describe is the contract's admission describe: the plugin's name and version (an
// admission-only plugin's own, otherwise its reconciler's) and its webhooks.
func Describe() adm.AdmissionInfo {
	name, version, hooks, err := wasmop.DescribedAdmission()
	if err != nil {
		panic(err.Error())
	}
	return adm.AdmissionInfo{
		Name:        name,
		Version:     version,
		Validating:  registration(hooks.Kind, hooks.Validating),
		Mutating:    registration(hooks.Kind, hooks.Mutating),
		Permissions: wasmop_host.Permissions(hooks.Permissions),
	}
}

// Validate is the contract's validate.
func Validate(r adm.Review) witTypes.Result[adm.Allowed, adm.Denial] {
	answer := serve(false, r)
	if answer.Denied != nil {
		return witTypes.Err[adm.Allowed](denial(answer.Denied))
	}
	return witTypes.Ok[adm.Allowed, adm.Denial](adm.Allowed{Warnings: warnings(answer.Warnings)})
}

// Mutate is the contract's mutate.
func Mutate(r adm.Review) witTypes.Result[adm.Mutation, adm.Denial] {
	answer := serve(true, r)
	if answer.Denied != nil {
		return witTypes.Err[adm.Mutation](denial(answer.Denied))
	}
	object := witTypes.None[string]()
	if answer.Object != nil {
		object = witTypes.Some(*answer.Object)
	}
	return witTypes.Ok[adm.Mutation, adm.Denial](adm.Mutation{Object: object, Warnings: warnings(answer.Warnings)})
}

func serve(mutate bool, r adm.Review) wasmop.Answer {
	namespace := r.Namespace.SomeOr("")
	target := wasmop.Ref{
		Kind:      wasmop.Kind{Group: r.Kind.Group, Version: r.Kind.Version, Kind: r.Kind.Kind, Namespaced: namespace != ""},
		Namespace: namespace,
		Name:      r.Name.SomeOr(""),
	}
	extra := make(map[string][]string, len(r.UserInfo.Extra))
	for _, kv := range r.UserInfo.Extra {
		extra[kv.F0] = kv.F1
	}
	w := wasmop.WireReview{
		UID:         r.Uid,
		Name:        r.Name.SomeOr(""),
		Namespace:   namespace,
		SubResource: r.SubResource.SomeOr(""),
		Operation:   operations[r.Operation],
		User:        wasmop.UserInfo{Username: r.UserInfo.Username, UID: r.UserInfo.Uid, Groups: r.UserInfo.Groups, Extra: extra},
		Object:      optional(r.Object),
		OldObject:   optional(r.OldObject),
		DryRun:      r.DryRun,
	}
	answer, failure := wasmop.ServeReview(wasmop_host.Host, mutate, target, w)
	if failure != "" {
		// One line, the last the plugin writes: the host quotes it in the trap's message.
		fmt.Fprintln(os.Stderr, failure)
		os.Exit(1)
	}
	return answer
}

var operations = map[adm.Operation]wasmop.Operation{
	adm.Operation_Create:  wasmop.Create,
	adm.Operation_Update:  wasmop.Update,
	adm.Operation_Delete:  wasmop.Delete,
	adm.Operation_Connect: wasmop.Connect,
}

func optional(o witTypes.Option[string]) *string {
	if o.IsSome() {
		v := o.Some()
		return &v
	}
	return nil
}

func warnings(w []string) []string {
	if w == nil {
		return []string{}
	}
	return w
}

func denial(d *wasmop.Denied) adm.Denial {
	reason, code := witTypes.None[string](), witTypes.None[uint16]()
	if d.Reason != "" {
		reason = witTypes.Some(d.Reason)
	}
	if d.Code != 0 {
		code = witTypes.Some(d.Code)
	}
	return adm.Denial{Message: d.Message, Reason: reason, Code: code, Warnings: warnings(d.Warnings)}
}

func registration(k wasmop.Kind, w *wasmop.Webhook) witTypes.Option[adm.Registration] {
	if w == nil {
		return witTypes.None[adm.Registration]()
	}
	ops := make([]adm.Operation, len(w.Operations))
	for i, op := range w.Operations {
		for wire, o := range operations {
			if o == op {
				ops[i] = wire
			}
		}
	}
	policy := adm.FailurePolicy_Fail
	if w.FailurePolicy == wasmop.Ignore {
		policy = adm.FailurePolicy_Ignore
	}
	timeout := w.TimeoutSeconds
	if timeout == 0 {
		timeout = 10
	}
	return witTypes.Some(adm.Registration{
		Rules: []adm.Rule{{
			Kind:        wasmop_host.Gvk(k),
			Operations:  ops,
			Subresource: wasmop_host.Opt(w.Subresource),
		}},
		NamespaceSelector: wasmop_host.Opt(w.NamespaceSelector),
		ObjectSelector:    wasmop_host.Opt(w.ObjectSelector),
		FailurePolicy:     policy,
		TimeoutSeconds:    timeout,
	})
}
