package wasmop_test

import (
	"fmt"

	"wasmop.dev/wasmop"
)

// A Team (a CRD of the author's own) gets a ConfigMap `<name>-info`, and a Ready condition
// once it is written.
type Team struct {
	wasmop.TypeMeta
	wasmop.ObjectMeta `json:"metadata"`
	Spec              struct {
		Lead string `json:"lead"`
	} `json:"spec"`
	Status *TeamStatus `json:"status,omitempty"`
}

type TeamStatus struct {
	Conditions []wasmop.Condition `json:"conditions,omitempty"`
}

var TeamKind = wasmop.Kind{Group: "example.com", Version: "v1", Kind: "Team", Namespaced: true}

type TeamInfo struct {
	wasmop.NoCleanup[*Team]
}

func (TeamInfo) Describe() wasmop.Info {
	return wasmop.NewInfo("team-info", "1.0.0", TeamKind).Owns(wasmop.ConfigMapKind)
}

func (TeamInfo) Reconcile(ctx *wasmop.Context, team *Team) (wasmop.Action, error) {
	meta, err := wasmop.OwnedMeta(team, team.Name+"-info")
	if err != nil {
		return wasmop.Done(), err
	}
	if _, err := ctx.Apply(&wasmop.ConfigMap{ObjectMeta: meta, Data: map[string]string{"lead": team.Spec.Lead}}); err != nil {
		return wasmop.Done(), err // a conflict or an unavailable API server is retried
	}
	status := TeamStatus{}
	if team.Status != nil {
		status = *team.Status
	}
	if wasmop.SetCondition(&status.Conditions, wasmop.NewCondition("Ready", true, "InfoWritten", "", team.Generation)) {
		if _, err := ctx.UpdateStatus(team, status); err != nil {
			return wasmop.Done(), err
		}
	}
	return wasmop.Done(), nil
}

// A plugin registers its reconciler from its package's init function; the build links the
// package into a component.
func ExampleRegister() {
	// In the plugin's package: func init() { wasmop.Register[*Team](TeamInfo{}) }
	var _ wasmop.Reconciler[*Team] = TeamInfo{}
}

// A condition keeps its lastTransitionTime while its status holds.
func ExampleSetCondition() {
	conditions := []wasmop.Condition{{Type: "Ready", Status: wasmop.ConditionTrue, LastTransitionTime: "2025-01-01T00:00:00Z"}}
	changed := wasmop.SetCondition(&conditions, wasmop.NewCondition("Ready", true, "Applied", "ok", 2))
	fmt.Println(changed, conditions[0].LastTransitionTime, conditions[0].ObservedGeneration)
	// Output: true 2025-01-01T00:00:00Z 2
}

// TeamLeads refuses a Team without a lead: an admission-only plugin, with a validating
// webhook and no reconciler.
type TeamLeads struct {
	wasmop.NoMutate[*Team]
}

func (TeamLeads) Webhooks() wasmop.Webhooks {
	return wasmop.Webhooks{Kind: TeamKind, Validating: &wasmop.Webhook{Operations: []wasmop.Operation{wasmop.Create, wasmop.Update}}}
}

func (TeamLeads) Validate(_ *wasmop.Context, r wasmop.Review[*Team]) (wasmop.Allowed, error) {
	if r.Object.Spec.Lead == "" {
		return wasmop.Allowed{}, wasmop.RefuseInvalid("Team %s: spec.lead: Required value", r.Name)
	}
	return wasmop.Allowed{}, nil
}

// A plugin that only reviews admission requests names itself when it registers its
// admission half, from its package's init function; the build then makes a component that
// exports admission and no reconciler.
func ExampleRegisterAdmissionOnly() {
	// In the plugin's package: func init() { wasmop.RegisterAdmissionOnly[*Team]("team-leads", "1.0.0", TeamLeads{}) }
	var _ wasmop.Admission[*Team] = TeamLeads{}
}
