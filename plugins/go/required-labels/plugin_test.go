package requiredlabels

import (
	"testing"

	"wasmop.dev/wasmop"
	"wasmop.dev/wasmop/wasmoptest"
)

// The reviews run natively over the SDK's fake host: the golden cases
// (tests/go/tests/golden.rs) run the built component; this is the quick loop an author
// edits against.
func review(t *testing.T, settings, name string, labels map[string]string) (wasmop.Allowed, error) {
	t.Helper()
	host := wasmoptest.NewHost()
	host.ConfigJSON = settings
	deployment := &Deployment{
		TypeMeta:   wasmop.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: wasmop.ObjectMeta{Name: name, Namespace: "shop", Labels: labels},
	}
	ref, err := DeploymentKind.Ref("shop", name)
	if err != nil {
		t.Fatal(err)
	}
	r := wasmop.Review[*Deployment]{Operation: wasmop.Create, Name: name, Namespace: "shop", Object: deployment}
	allowed, err := RequiredLabels{}.Validate(wasmop.NewContext(host, ref), r)
	if len(host.Logs) != 0 || len(host.Writes) != 0 {
		t.Fatalf("a review logs and writes nothing: %v %v", host.Logs, host.Writes)
	}
	return allowed, err
}

func denied(t *testing.T, err error) *wasmop.Denied {
	t.Helper()
	d, ok := err.(*wasmop.Denied)
	if !ok {
		t.Fatalf("want a refusal, got %v", err)
	}
	return d
}

func TestADeploymentWithTheDefaultLabelIsAdmitted(t *testing.T) {
	allowed, err := review(t, "{}", "web", map[string]string{"team": "shop", "app": "web"})
	if err != nil || len(allowed.Warnings) != 0 {
		t.Fatalf("admitted with no warnings: %+v %v", allowed, err)
	}
}

func TestMissingAndEmptyLabelsAreNamedInTheSettingsOrder(t *testing.T) {
	_, err := review(t, `{"labels":["team","cost-center","owner"]}`, "web", map[string]string{"team": "", "owner": "ann"})
	d := denied(t, err)
	want := "Deployment web lacks the labels this cluster requires: team, cost-center"
	if d.Message != want || d.Reason != "Invalid" || d.Code != 422 || len(d.Warnings) != 0 {
		t.Fatalf("want %q (Invalid, 422), got %+v", want, d)
	}
}

func TestAGeneratedNameIsSaidSo(t *testing.T) {
	_, err := review(t, "", "", nil)
	if d := denied(t, err); d.Message != "Deployment (generated name) lacks the labels this cluster requires: team" {
		t.Fatalf("got %q", d.Message)
	}
}

func TestSettingsWhoseLabelsAreNoListOfKeysRefuseEveryReview(t *testing.T) {
	for _, settings := range []string{`{"labels":"team"}`, `{"labels":["team",1]}`, `{"labels":["team",null]}`, `{"labels":{"team":true}}`, `[]`} {
		_, err := review(t, settings, "web", map[string]string{"team": "shop"})
		d := denied(t, err)
		if d.Message != "the plugin's settings are invalid: `labels` must be a list of label keys" || d.Reason != "InternalError" || d.Code != 500 {
			t.Fatalf("%s: got %+v", settings, d)
		}
	}
	if _, err := review(t, `{"labels":[]}`, "web", nil); err != nil {
		t.Fatalf("no labels required admits everything: %v", err)
	}
	if _, err := review(t, `{"labels":null,"other":1}`, "web", map[string]string{"team": "shop"}); err != nil {
		t.Fatalf("null labels are the default ones, other keys are ignored: %v", err)
	}
}

func TestOneValidatingWebhookOnDeployments(t *testing.T) {
	hooks := RequiredLabels{}.Webhooks()
	if hooks.Mutating != nil || hooks.Validating == nil || hooks.Validating.TimeoutSeconds != 5 ||
		hooks.Validating.FailurePolicy != wasmop.Fail || len(hooks.Validating.Operations) != 2 {
		t.Fatalf("webhooks: %+v", hooks)
	}
	name, version, described, err := wasmop.DescribedAdmission()
	if err != nil || name != "required-labels" || version != "0.1.0" || described.Kind != DeploymentKind {
		t.Fatalf("described: %q %q %+v %v", name, version, described, err)
	}
}
