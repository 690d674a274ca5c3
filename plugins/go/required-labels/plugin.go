// Package requiredlabels is `required-labels` in Go: an admission-only plugin (no
// reconciler; world admission-plugin) that refuses a Deployment lacking any of the labels
// its settings require (`labels`, by default `team`). The same logic as the Rust plugin,
// passing the same golden cases (plugins/rust/required-labels/tests/admission).
//
// Build: guest-sdk/go/build plugins/go/required-labels -o required-labels.wasm
package requiredlabels

import (
	"encoding/json"
	"strings"

	"wasmop.dev/wasmop"
)

// DeploymentKind is the reviewed kind.
var DeploymentKind = wasmop.Kind{Group: "apps", Version: "v1", Kind: "Deployment", Namespaced: true}

// Deployment is a Deployment as the review needs it: its metadata (the labels).
type Deployment struct {
	wasmop.TypeMeta
	wasmop.ObjectMeta `json:"metadata"`
}

// DefaultKind is the reviewed kind.
func (*Deployment) DefaultKind() wasmop.Kind { return DeploymentKind }

// DefaultLabels are the labels required when the settings name none.
var DefaultLabels = []string{"team"}

// RequiredLabels is the plugin: a validating webhook on Deployments.
type RequiredLabels struct {
	wasmop.NoMutate[*Deployment]
}

func init() {
	wasmop.RegisterAdmissionOnly[*Deployment]("required-labels", "0.1.0", RequiredLabels{})
}

// Webhooks: one validating webhook on creates and updates, failing closed, that answers
// within 5 s.
func (RequiredLabels) Webhooks() wasmop.Webhooks {
	return wasmop.Webhooks{Validating: &wasmop.Webhook{
		Operations:     []wasmop.Operation{wasmop.Create, wasmop.Update},
		FailurePolicy:  wasmop.Fail,
		TimeoutSeconds: 5,
	}}
}

// Validate refuses a Deployment that lacks a required label or has it empty, naming every
// one, in the settings' order.
func (RequiredLabels) Validate(ctx *wasmop.Context, r wasmop.Review[*Deployment]) (wasmop.Allowed, error) {
	if r.Object == nil {
		return wasmop.Allowed{}, nil // no object to check (the webhook reviews no deletes)
	}
	required, denied := requiredLabels(ctx.ConfigJSON())
	if denied != nil {
		return wasmop.Allowed{}, denied
	}
	var missing []string
	for _, key := range required {
		if r.Object.Labels[key] == "" {
			missing = append(missing, key)
		}
	}
	if len(missing) == 0 {
		return wasmop.Allowed{}, nil
	}
	name := r.Name
	if name == "" {
		name = "(generated name)"
	}
	return wasmop.Allowed{}, wasmop.RefuseInvalid("Deployment %s lacks the labels this cluster requires: %s", name, strings.Join(missing, ", "))
}

// requiredLabels is the settings' `labels` (DefaultLabels when absent or null, as the Rust
// plugin's optional field reads it; other keys are ignored), or the refusal of settings that
// are no JSON object or whose `labels` is not a list of label keys: a fault of the
// operator's, not of the request, so InternalError, 500.
func requiredLabels(settings string) ([]string, *wasmop.Denied) {
	invalid := &wasmop.Denied{
		Message: "the plugin's settings are invalid: `labels` must be a list of label keys",
		Reason:  "InternalError",
		Code:    500,
	}
	var keys map[string]json.RawMessage
	if strings.TrimSpace(settings) != "" {
		if err := json.Unmarshal([]byte(settings), &keys); err != nil {
			return nil, invalid
		}
	}
	raw, ok := keys["labels"]
	if !ok || string(raw) == "null" {
		return DefaultLabels, nil
	}
	// Each item checked as a string: encoding/json would read a null item as "".
	var items []any
	if json.Unmarshal(raw, &items) != nil {
		return nil, invalid
	}
	labels := make([]string, len(items))
	for i, item := range items {
		key, ok := item.(string)
		if !ok {
			return nil, invalid
		}
		labels[i] = key
	}
	return labels, nil
}
