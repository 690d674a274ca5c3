package wasmop

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeHost records writes and answers reads from a map of JSON objects by "ns/name".
type fakeHost struct {
	objects map[string]string
	writes  []string
	logs    []string
	config  string
	fail    *HostError
}

func (h *fakeHost) Get(ref Ref) (string, error) {
	if h.fail != nil {
		return "", h.fail
	}
	if o, ok := h.objects[ref.Namespace+"/"+ref.Name]; ok {
		return o, nil
	}
	return "", &HostError{Reason: ReasonNotFound, Message: "no such object"}
}
func (h *fakeHost) List(Kind, string, string) ([]string, error)      { return nil, nil }
func (h *fakeHost) ListOwned(Kind, string, string) ([]string, error) { return nil, nil }
func (h *fakeHost) Create(o string) (string, error)                  { return h.Apply(o) }
func (h *fakeHost) Apply(o string) (string, error) {
	if h.fail != nil {
		return "", h.fail
	}
	h.writes = append(h.writes, "apply "+o)
	return o, nil
}
func (h *fakeHost) Patch(ref Ref, t PatchType, body, rv string) (string, error) {
	h.writes = append(h.writes, fmt.Sprintf("patch %s %d %s %q", ref, t, body, rv))
	return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`, nil
}
func (h *fakeHost) PatchStatus(ref Ref, t PatchType, body, rv string) (string, error) {
	return h.Patch(ref, t, body, rv)
}
func (h *fakeHost) Delete(ref Ref, o DeleteOptions) error {
	h.writes = append(h.writes, "delete "+ref.String())
	return nil
}
func (h *fakeHost) Emit(ref Ref, e Event) error {
	h.writes = append(h.writes, "event "+ref.String()+" "+e.Reason)
	return nil
}
func (h *fakeHost) Log(l Level, m string) { h.logs = append(h.logs, m) }
func (h *fakeHost) Config() string {
	if h.config == "" {
		return "{}"
	}
	return h.config
}

type spec struct {
	Engine string `json:"engine"`
	Port   int    `json:"port"`
	Note   string `json:"note,omitempty"`
}

type db struct {
	TypeMeta
	ObjectMeta `json:"metadata"`
	Spec       spec `json:"spec"`
}

const orders = `{"apiVersion":"demo.wasmop.dev/v1","kind":"Database","metadata":{"name":"orders","namespace":"shop","uid":"u-1","generation":3,"resourceVersion":"7"},"spec":{"engine":"postgres","port":5432}}`

func TestDecodeNamesAMissingRequiredFieldAsTheRustSDKDoes(t *testing.T) {
	raw, err := parseRaw(`{"apiVersion":"demo.wasmop.dev/v1","kind":"Database","metadata":{"name":"orders","namespace":"shop"},"spec":{"engine":"postgres"}}`)
	if err != nil {
		t.Fatal(err)
	}
	var d db
	err = raw.Decode(&d)
	want := "cannot decode Database shop/orders from the host as demo.wasmop.dev/v1/Database: missing field `port`"
	var de *DecodeError
	if !errors.As(err, &de) || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	if retryable, _ := verdict(err); retryable {
		t.Fatal("a decode error must be permanent")
	}
}

func TestDecodeChecksTypesAndOptionalFields(t *testing.T) {
	var s spec
	if err := decode(sourceOf(`{"engine":"pg","port":1}`), &s, false); err != nil || s.Port != 1 {
		t.Fatalf("optional note: %v %+v", err, s)
	}
	err := decode(sourceOf(`{"engine":"pg","port":"x"}`), &s, false)
	if err == nil || err.Error() != "invalid type: string, expected int at `port`" {
		t.Fatalf("got %v", err)
	}
	err = decode(sourceOf(`{"engine":"pg","port":1,"zz":1,"extra":2}`), &s, true)
	if err == nil || err.Error() != "unknown field `extra`, expected one of `engine`, `port`, `note`" {
		t.Fatalf("got %v", err)
	}
}

func TestConfigRefusesUnknownKeysAsPermanent(t *testing.T) {
	ctx := NewContext(&fakeHost{config: `{"prefx":"a"}`}, Ref{})
	var cfg struct {
		Prefix string `json:"prefix,omitempty"`
	}
	err := ctx.Config(&cfg)
	if err == nil || !strings.HasPrefix(err.Error(), "invalid plugin configuration: unknown field `prefx`, expected `prefix`") {
		t.Fatalf("got %v", err)
	}
}

func TestKubeErrorsAreTestableAndNameTheCall(t *testing.T) {
	h := &fakeHost{objects: map[string]string{}}
	ctx := NewContext(h, Ref{})
	var cm ConfigMap
	err := ctx.Get(ConfigMapKind, "shop", "missing", &cm)
	if !IsNotFound(err) || IsConflict(err) {
		t.Fatalf("want not-found, got %v", err)
	}
	if err.Error() != "get ConfigMap shop/missing: not found: no such object" {
		t.Fatalf("message: %s", err)
	}
	h.fail = &HostError{Reason: ReasonDenied, Message: "not granted"}
	_, err = ctx.Apply(&ConfigMap{ObjectMeta: ObjectMeta{Name: "x", Namespace: "shop"}})
	if !IsDenied(err) {
		t.Fatalf("want denied, got %v", err)
	}
	if retryable, msg := verdict(fmt.Errorf("wrapped: %w", err)); retryable || msg != "wrapped: apply ConfigMap shop/x: denied by the wasmop policy: not granted" {
		t.Fatalf("denied must be permanent: %v %s", retryable, msg)
	}
	h.fail = &HostError{Reason: ReasonConflict, Message: "modified"}
	_, err = ctx.Apply(&ConfigMap{ObjectMeta: ObjectMeta{Name: "x", Namespace: "shop"}})
	if retryable, _ := verdict(err); !IsConflict(err) || !retryable {
		t.Fatalf("conflict must be retryable: %v", err)
	}
	if _, err := NamespaceKind.Ref("shop", "x"); err == nil {
		t.Fatal("a cluster-scoped kind with a namespace must be refused")
	}
}

func TestApplyFillsTheKindAndOwnedMetaPointsAtTheOwner(t *testing.T) {
	h := &fakeHost{}
	var owner db
	raw, _ := parseRaw(orders)
	if err := raw.Decode(&owner); err != nil {
		t.Fatal(err)
	}
	meta, err := OwnedMeta(&owner, "orders-config")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewContext(h, Ref{}).Apply(&ConfigMap{ObjectMeta: meta, Data: map[string]string{"a": "<b>"}}); err != nil {
		t.Fatal(err)
	}
	want := `apply {"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"orders-config","namespace":"shop","ownerReferences":[{"apiVersion":"demo.wasmop.dev/v1","kind":"Database","name":"orders","uid":"u-1","controller":true,"blockOwnerDeletion":true}]},"data":{"a":"<b>"}}`
	if len(h.writes) != 1 || h.writes[0] != want {
		t.Fatalf("got %v", h.writes)
	}
	var cm ConfigMap
	if err := (RawObject{src: sourceOf(want[6:])}).Decode(&cm); err != nil || !IsControlledBy(&cm, &owner) {
		t.Fatalf("controlled: %v", err)
	}
	owner.UID = ""
	if _, err := OwnerReferenceTo(&owner); err == nil {
		t.Fatal("an owner without a uid must be refused")
	}
}

// garbledHost answers every write with text that is no object.
type garbledHost struct{ fakeHost }

func (h *garbledHost) Apply(string) (string, error) { return `{"metadata": 7`, nil }

func TestAWritesReplyIsReadOnlyWhenAsked(t *testing.T) {
	ctx := NewContext(&fakeHost{}, Ref{})
	stored, err := ctx.Apply(&ConfigMap{ObjectMeta: ObjectMeta{Name: "x", Namespace: "shop"}, Data: map[string]string{"a": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := stored.Raw()
	if err != nil || raw.Name != "x" || raw.Namespace != "shop" || raw.Kind != "ConfigMap" {
		t.Fatalf("raw: %+v %v", raw, err)
	}
	var cm ConfigMap
	if err := stored.Decode(&cm); err != nil || cm.Data["a"] != "b" {
		t.Fatalf("decode: %+v %v", cm, err)
	}
	var wrong struct {
		TypeMeta
		ObjectMeta `json:"metadata"`
		Spec       struct{} `json:"spec"`
	}
	err = stored.Decode(&wrong)
	var decodeErr *DecodeError
	if !errors.As(err, &decodeErr) || !strings.HasPrefix(err.Error(), "cannot decode ConfigMap shop/x from the host as v1/ConfigMap: ") {
		t.Fatalf("a missing field must name the object: %v", err)
	}
	text := stored.JSON()
	text[0] = 'X'
	if again, _ := stored.Raw(); again.Name != "x" || stored.JSON()[0] != '{' {
		t.Fatal("JSON must be a copy")
	}

	garbled := NewContext(&garbledHost{}, Ref{})
	stored, err = garbled.Apply(&ConfigMap{ObjectMeta: ObjectMeta{Name: "x", Namespace: "shop"}})
	if err != nil {
		t.Fatalf("a reply nobody reads is no error: %v", err)
	}
	if _, err := stored.Raw(); !errors.As(err, &decodeErr) || !strings.HasPrefix(err.Error(), "cannot decode an object from the host: ") {
		t.Fatalf("raw of a garbled reply: %v", err)
	}
	if err := stored.Decode(&cm); !errors.As(err, &decodeErr) {
		t.Fatalf("decode of a garbled reply: %v", err)
	}
}

func TestSetConditionKeepsTheTransitionTimeWhileTheStatusHolds(t *testing.T) {
	conditions := []Condition{{Type: "Ready", Status: ConditionTrue, LastTransitionTime: "2024-01-01T00:00:00Z", Reason: "A", ObservedGeneration: 1}}
	if !SetCondition(&conditions, NewCondition("Ready", true, "A", "", 2)) {
		t.Fatal("a new generation is a change")
	}
	if conditions[0].LastTransitionTime != "2024-01-01T00:00:00Z" || conditions[0].ObservedGeneration != 2 {
		t.Fatalf("got %+v", conditions[0])
	}
	if SetCondition(&conditions, NewCondition("Ready", true, "A", "", 2)) {
		t.Fatal("the same condition again is no change")
	}
	if !SetCondition(&conditions, NewCondition("Ready", false, "B", "", 2)) || conditions[0].LastTransitionTime == "2024-01-01T00:00:00Z" {
		t.Fatalf("a status change moves the time: %+v", conditions[0])
	}
	if !SetCondition(&conditions, NewCondition("Synced", true, "C", "", 2)) || len(conditions) != 2 || !IsConditionTrue(conditions, "Synced") {
		t.Fatalf("a new type is appended: %+v", conditions)
	}
}

func TestNowIsAKubernetesTimeInWholeSecondsUTC(t *testing.T) {
	now := Now()
	parsed, err := time.Parse("2006-01-02T15:04:05Z", now)
	if err != nil || len(now) != len("2025-01-01T00:00:00Z") {
		t.Fatalf("Now() = %q, not a time as Kubernetes stores it: %v", now, err)
	}
	if d := time.Since(parsed); d < 0 || d > time.Minute {
		t.Fatalf("Now() = %q is %v away from the clock", now, d)
	}
}

type panicky struct{ NoCleanup[*db] }

func (panicky) Describe() Info {
	return NewInfo("panicky", "0.1.0", Kind{Group: "demo.wasmop.dev", Version: "v1", Kind: "Database", Namespaced: true})
}
func (panicky) Reconcile(ctx *Context, d *db) (Action, error) {
	switch d.Spec.Engine {
	case "panic":
		var m map[string]int
		m["x"] = 1 // a runtime error: assignment to entry in nil map
	case "fail":
		return Done(), Permanent("bad engine %s", d.Spec.Engine)
	case "plain":
		return Done(), errors.New("some error")
	}
	return RequeueAfter(-5), nil
}

func serve(t *testing.T, engine string) (Action, *ReconcileError) {
	t.Helper()
	registered = nil
	Register[*db](panicky{})
	obj := strings.Replace(orders, "postgres", engine, 1)
	return Serve(&fakeHost{}, false, Ref{}, obj)
}

func TestAPanicInReconcileIsARetryableErrorWithItsMessageAndFrames(t *testing.T) {
	_, failure := serve(t, "panic")
	if failure == nil || !failure.Retryable {
		t.Fatalf("want a retryable failure, got %+v", failure)
	}
	if !strings.HasPrefix(failure.Message, "panic: assignment to entry in nil map\ngoroutine (innermost ") {
		t.Fatalf("message: %s", failure.Message)
	}
	if !strings.Contains(failure.Message, "sdk_test.go:") || !strings.Contains(failure.Message, "panicky.Reconcile") {
		t.Fatalf("the frames must name the plugin's code: %s", failure.Message)
	}
}

func TestReconcileErrorsGetTheirVerdict(t *testing.T) {
	if _, f := serve(t, "fail"); f == nil || f.Retryable || f.Message != "bad engine fail" {
		t.Fatalf("permanent: %+v", f)
	}
	if _, f := serve(t, "plain"); f == nil || !f.Retryable || f.Message != "some error" {
		t.Fatalf("a plain error is retryable: %+v", f)
	}
	a, f := serve(t, "postgres")
	if d, ok := a.Requeue(); f != nil || !ok || d != 0 {
		t.Fatalf("a negative delay is 0: %v %v %+v", d, ok, f)
	}
	registered = nil
	if _, err := Described(); err == nil {
		t.Fatal("no reconciler registered must be an error")
	}
}

// The fast path (encoding/json takes the text) still finds what it does not check: a
// missing required field deep inside a list, and what only the strict check refuses; a
// type with nothing required is not parsed again.
func TestDecodeChecksRequiredFieldsThatEncodingJSONAccepts(t *testing.T) {
	type port struct {
		Name   string `json:"name"`
		Number int    `json:"number"`
	}
	type service struct {
		Ports  []port            `json:"ports"`
		ByName map[string]*port  `json:"byName,omitempty"`
		Labels map[string]string `json:"labels,omitempty"`
	}
	var s service
	err := decode(sourceOf(`{"ports":[{"name":"a","number":1},{"name":"b"}]}`), &s, false)
	if err == nil || err.Error() != "missing field `number`" {
		t.Fatalf("in a list: got %v", err)
	}
	err = decode(sourceOf(`{"ports":[],"byName":{"z":{"number":1},"a":null}}`), &s, false)
	if err == nil || err.Error() != "missing field `name`" {
		t.Fatalf("in a map: got %v", err)
	}
	if err := decode(sourceOf(`{"ports":null,"labels":{"x":"y"}}`), &s, false); err != nil {
		t.Fatalf("null list: %v", err)
	}
	type labels struct {
		Labels map[string]string `json:"labels,omitempty"`
	}
	if needsCheck(reflect.TypeOf(labels{})) || !needsCheck(reflect.TypeOf(service{})) ||
		!needsCheck(reflect.TypeOf(ObjectMeta{})) {
		t.Fatal("needsCheck: labels has nothing required; service has, and ObjectMeta's owner references")
	}
	err = decode(sourceOf(`{"ports":[{"name":"a","number":1,"extra":true}]}`), &s, true)
	if err == nil || err.Error() != "unknown field `extra`, expected `name` or `number` in `ports[0]`" {
		t.Fatalf("strict: got %v", err)
	}
}

// The check's scan of the text agrees with encoding/json where it could differ: keys with
// escapes, brackets inside strings, duplicate keys (the last counts, as decoding keeps it),
// whitespace everywhere; and text it cannot scan is left to encoding/json.
func TestTheChecksScanReadsJSONAsEncodingJSONDoes(t *testing.T) {
	type port struct {
		Name   string `json:"name"`
		Number int    `json:"number"`
	}
	type service struct {
		Ports []port `json:"ports"`
	}
	var s service
	text := " { \"ports\" : [ { \"n\\u0061me\" : \"a}]\\\"[{\" , \"number\" : 1 } ] } "
	if err := decode(sourceOf(text), &s, true); err != nil || s.Ports[0].Name != "a}]\"[{" {
		t.Fatalf("escapes and brackets in strings: %v, %+v", err, s)
	}
	err := decode(sourceOf(`{"ports":[{"name":"a","number":1,"extra":{"name":"]"}}]}`), &s, true)
	if err == nil || err.Error() != "unknown field `extra`, expected `name` or `number` in `ports[0]`" {
		t.Fatalf("a nested unknown member: got %v", err)
	}
	// The last of two "ports" is what decoding keeps, and what is checked.
	err = decode(sourceOf(`{"ports":[{"name":"a","number":1}],"ports":[{"name":"b"}]}`), &s, false)
	if err == nil || err.Error() != "missing field `number`" {
		t.Fatalf("duplicate keys: got %v", err)
	}
	if err := decode(sourceOf(`{"ports":[{"name":"b"}],"ports":[]}`), &s, false); err != nil {
		t.Fatalf("duplicate keys, the last fine: %v", err)
	}
	for _, bad := range []string{``, `{`, `{"a"`, `{"a":}`, `{"a":1,}`, `[1,`, `{"a":"\`, `{"a" 1}`, `nul`} {
		if m, ok := members([]byte(bad)); ok {
			t.Errorf("members(%q) scanned as %v", bad, m)
		}
		if e, ok := elements([]byte(bad)); ok {
			t.Errorf("elements(%q) scanned as %q", bad, e)
		}
	}
	if m, ok := members([]byte(`{}`)); !ok || len(m) != 0 {
		t.Errorf("members({}) = %v, %v", m, ok)
	}
	if e, ok := elements([]byte(` [ ] `)); !ok || len(e) != 0 {
		t.Errorf("elements([]) = %q, %v", e, ok)
	}
}

// Text that is no JSON is named as such, with encoding/json's reason.
func TestDecodeNamesTextThatIsNoJSON(t *testing.T) {
	var s spec
	err := decode(sourceOf(`{"engine":`), &s, false)
	if err == nil || err.Error() != "invalid JSON: unexpected EOF" {
		t.Fatalf("got %v", err)
	}
}

type reviewedDB struct {
	TypeMeta
	ObjectMeta `json:"metadata"`
	Spec       struct {
		Port     int  `json:"port"`
		Replicas *int `json:"replicas,omitempty"`
	} `json:"spec"`
}

func (*reviewedDB) DefaultKind() Kind {
	return Kind{Group: "demo.wasmop.dev", Version: "v1", Kind: "Database", Namespaced: true}
}

type reviewer struct{}

func (reviewer) Webhooks() Webhooks {
	return Webhooks{Validating: &Webhook{Operations: []Operation{Create}}}
}

func (reviewer) Validate(_ *Context, r Review[*reviewedDB]) (Allowed, error) {
	switch r.Object.Spec.Port {
	case 0:
		return Allowed{}, RefuseInvalid("spec.port: Invalid value: %d", 0)
	case 1:
		panic("a bug in the validator")
	case 2:
		return Allowed{}, errors.New("the validator broke")
	}
	return Allowed{Warnings: []string{"port " + strconv.Itoa(r.Object.Spec.Port)}}, nil
}

func (reviewer) Mutate(_ *Context, r Review[*reviewedDB]) (*reviewedDB, Allowed, error) {
	if r.Object.Spec.Replicas != nil {
		return nil, Allowed{}, nil
	}
	one := 1
	r.Object.Spec.Replicas = &one
	return r.Object, Allowed{}, nil
}

func TestAdmissionReviewsAreTypedRefusalsAreAnswersAndFailuresAreNot(t *testing.T) {
	fresh(t)
	RegisterAdmission[*reviewedDB](reviewer{})
	if k := registeredAdmission.webhooks().Kind; k.Kind != "Database" {
		t.Fatalf("the kind comes from DefaultKind: %+v", k)
	}
	review := func(port string) WireReview {
		text := `{"apiVersion":"demo.wasmop.dev/v1","kind":"Database","metadata":{"name":"a","namespace":"s"},"spec":{"port":` + port + `,"extra":"kept"}}`
		return WireReview{Operation: Create, Object: &text}
	}
	answer, failure := ServeReview(&fakeHost{}, false, Ref{}, review("5432"))
	if failure != "" || answer.Denied != nil || len(answer.Warnings) != 1 || answer.Warnings[0] != "port 5432" {
		t.Fatalf("admitted with a warning: %+v %q", answer, failure)
	}
	answer, _ = ServeReview(&fakeHost{}, false, Ref{}, review("0"))
	if answer.Denied == nil || answer.Denied.Code != 422 || answer.Denied.Reason != "Invalid" {
		t.Fatalf("refused as invalid: %+v", answer)
	}
	if _, failure = ServeReview(&fakeHost{}, false, Ref{}, review("1")); !strings.Contains(failure, "a bug in the validator") {
		t.Fatalf("a panic is a failed review with its message: %q", failure)
	}
	if _, failure = ServeReview(&fakeHost{}, false, Ref{}, review("2")); failure != "the validator broke" {
		t.Fatalf("an error that is not a refusal is a failed review: %q", failure)
	}
	if answer, _ = ServeReview(&fakeHost{}, false, Ref{}, review(`"x"`)); answer.Denied == nil || answer.Denied.Code != 400 {
		t.Fatalf("an object that does not decode is a bad request: %+v", answer)
	}
	answer, failure = ServeReview(&fakeHost{}, true, Ref{}, review("5432"))
	if failure != "" || answer.Object == nil {
		t.Fatalf("mutated: %+v %q", answer, failure)
	}
	var changed map[string]any
	if err := json.Unmarshal([]byte(*answer.Object), &changed); err != nil {
		t.Fatal(err)
	}
	spec := changed["spec"].(map[string]any)
	if spec["replicas"] != float64(1) || spec["extra"] != "kept" {
		t.Fatalf("the change laid over the object, unknown fields kept: %v", spec)
	}
}

// fresh forgets every registration, now and when the test ends.
func fresh(t *testing.T) {
	t.Helper()
	registered, registeredAdmission = nil, nil
	t.Cleanup(func() { registered, registeredAdmission = nil, nil })
}

// panicMessageOf is what f panics with; "" when it does not.
func panicMessageOf(f func()) (message string) {
	defer func() {
		if v := recover(); v != nil {
			message = fmt.Sprint(v)
		}
	}()
	f()
	return ""
}

// An admission-only plugin names itself: its describe carries its own name and version,
// there is no reconciler, and it reviews as one beside a reconciler does.
func TestAnAdmissionOnlyPluginNamesItselfAndReviewsWithoutAReconciler(t *testing.T) {
	fresh(t)
	RegisterAdmissionOnly[*reviewedDB]("port-check", "1.2.3-rc.1+build.5", reviewer{})
	name, version, hooks, err := DescribedAdmission()
	if err != nil || name != "port-check" || version != "1.2.3-rc.1+build.5" || hooks.Kind.Kind != "Database" || hooks.Validating == nil {
		t.Fatalf("described: %q %q %+v %v", name, version, hooks, err)
	}
	if _, err := Described(); err == nil {
		t.Fatal("an admission-only plugin has no reconciler to describe")
	}
	text := `{"apiVersion":"demo.wasmop.dev/v1","kind":"Database","metadata":{"name":"a"},"spec":{"port":0}}`
	answer, failure := ServeReview(&fakeHost{}, false, Ref{}, WireReview{Operation: Create, Object: &text})
	if failure != "" || answer.Denied == nil || answer.Denied.Code != 422 {
		t.Fatalf("refused as invalid: %+v %q", answer, failure)
	}
	if err := checkWorld("admission-plugin"); err != nil {
		t.Fatalf("its world: %v", err)
	}
	if err := checkWorld("plugin-with-admission"); err == nil || !strings.Contains(err.Error(), "need the world admission-plugin, but guest-sdk/go/build built it against plugin-with-admission") {
		t.Fatalf("another world names the one it needs: %v", err)
	}
}

// The existing form still names the plugin after its reconciler, and needs both.
func TestAnAdmissionHalfBesideAReconcilerSharesItsNameAndWorld(t *testing.T) {
	fresh(t)
	Register[*db](panicky{})
	RegisterAdmission[*reviewedDB](reviewer{})
	if name, version, _, err := DescribedAdmission(); err != nil || name != "panicky" || version != "0.1.0" {
		t.Fatalf("the reconciler's name and version: %q %q %v", name, version, err)
	}
	if err := checkWorld("plugin-with-admission"); err != nil {
		t.Fatal(err)
	}
	registeredAdmission = nil
	if err := checkWorld("plugin"); err != nil {
		t.Fatal(err)
	}
}

// Each misuse fails in init (so the build, which runs init functions, fails) and says what
// to do instead.
func TestMisregistrationsFailClearly(t *testing.T) {
	only := func() { RegisterAdmissionOnly[*reviewedDB]("port-check", "0.1.0", reviewer{}) }
	cases := []struct {
		name  string
		first func()
		then  func()
		want  string
	}{
		{"reconciler then admission-only", func() { Register[*db](panicky{}) }, only,
			"wasmop.RegisterAdmissionOnly: the plugin registers a reconciler (wasmop.Register); register its admission half with wasmop.RegisterAdmission instead"},
		{"admission-only then reconciler", only, func() { Register[*db](panicky{}) },
			"wasmop.Register: the plugin registered itself as admission-only (wasmop.RegisterAdmissionOnly), which has no reconciler"},
		{"admission-only twice", only, only,
			"wasmop.RegisterAdmissionOnly: the plugin registered its admission half already (wasmop.RegisterAdmissionOnly): a plugin has one"},
		{"admission then admission-only", func() { RegisterAdmission[*reviewedDB](reviewer{}) }, only,
			"wasmop.RegisterAdmissionOnly: the plugin registered its admission half already (wasmop.RegisterAdmission): a plugin has one"},
		{"admission-only then admission", only, func() { RegisterAdmission[*reviewedDB](reviewer{}) },
			"wasmop.RegisterAdmission: the plugin registered its admission half already (wasmop.RegisterAdmissionOnly): a plugin has one"},
		{"a name that is no DNS label", func() {}, func() { RegisterAdmissionOnly[*reviewedDB]("Port_Check", "0.1.0", reviewer{}) },
			`wasmop.RegisterAdmissionOnly: the plugin's name "Port_Check" is not a DNS-1123 label`},
		{"a name ending in '-'", func() {}, func() { RegisterAdmissionOnly[*reviewedDB]("port-", "0.1.0", reviewer{}) },
			`the plugin's name "port-" is not a DNS-1123 label`},
		{"a name too long", func() {}, func() { RegisterAdmissionOnly[*reviewedDB](strings.Repeat("a", 64), "0.1.0", reviewer{}) },
			"is not a DNS-1123 label"},
		{"no name", func() {}, func() { RegisterAdmissionOnly[*reviewedDB]("", "0.1.0", reviewer{}) },
			`the plugin's name "" is not a DNS-1123 label`},
		{"no version", func() {}, func() { RegisterAdmissionOnly[*reviewedDB]("port-check", "", reviewer{}) },
			`the plugin's version "" is not 1 to 64 characters of 0-9, A-Z, a-z, '.', '+', '_' and '-'`},
		{"a version with a space", func() {}, func() { RegisterAdmissionOnly[*reviewedDB]("port-check", "1.0 beta", reviewer{}) },
			`the plugin's version "1.0 beta" is not`},
		{"a type that is no pointer", func() {}, func() { RegisterAdmissionOnly[Object]("port-check", "0.1.0", nil) },
			"wasmop.RegisterAdmissionOnly: the object type <nil> must be a pointer to a struct"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fresh(t)
			c.first()
			if got := panicMessageOf(c.then); !strings.Contains(got, c.want) {
				t.Fatalf("want a panic containing %q, got %q", c.want, got)
			}
		})
	}
	if name := strings.Repeat("a", 63); checkIdentity(name, strings.Repeat("v", 64)) != nil {
		t.Fatal("a 63-character name and a 64-character version are fine")
	}
}

// What the build's glue checks once the plugin's init functions have run.
func TestCheckWorldRefusesNothingAndAnAdmissionHalfWithoutItsReconciler(t *testing.T) {
	fresh(t)
	if err := checkWorld("plugin"); err == nil || !strings.HasPrefix(err.Error(), "the plugin registers nothing: call wasmop.Register") {
		t.Fatalf("nothing: %v", err)
	}
	if got := panicMessageOf(func() { CheckWorld("plugin") }); !strings.HasPrefix(got, "the plugin registers nothing") {
		t.Fatalf("CheckWorld panics with it: %q", got)
	}
	RegisterAdmission[*reviewedDB](reviewer{})
	if err := checkWorld("plugin-with-admission"); err == nil || !strings.Contains(err.Error(),
		"but no reconciler: call wasmop.Register too, or register the admission half alone with wasmop.RegisterAdmissionOnly(name, version, admission)") {
		t.Fatalf("an admission half alone: %v", err)
	}
	if _, _, _, err := DescribedAdmission(); err == nil || err.Error() != "no reconciler registered: call wasmop.Register in the plugin's init function" {
		t.Fatalf("its describe: %v", err)
	}
}
