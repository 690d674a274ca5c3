package wasmop

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// Operation is an operation a webhook reviews.
type Operation string

// The operations, as the API server spells them.
const (
	Create  Operation = "CREATE"
	Update  Operation = "UPDATE"
	Delete  Operation = "DELETE"
	Connect Operation = "CONNECT"
)

// FailurePolicy is what the API server does when a review cannot be answered.
type FailurePolicy string

// The failure policies: Fail refuses the request (the default), Ignore lets it through with
// a warning.
const (
	Fail   FailurePolicy = "Fail"
	Ignore FailurePolicy = "Ignore"
)

// Webhook is one webhook on the Admission's kind: the operations it reviews, label selectors
// on the request's namespace and on the object, its failure policy (Fail when empty), how
// long the API server waits (1 to 30 s; 10 when 0), and a subresource instead of the object.
type Webhook struct {
	Operations        []Operation
	NamespaceSelector string
	ObjectSelector    string
	FailurePolicy     FailurePolicy
	TimeoutSeconds    uint8
	Subresource       string
}

// Webhooks are the webhooks a plugin asks the host to register (at least one), on Kind
// (the reviewed type's DefaultKind when it has one), and the reads (VerbGet, VerbList) its
// reviews make beyond the reviewed object that the reconciler's Info does not already ask
// for: all an admission-only plugin may read. The operator grants them as Info's; the host
// refuses other verbs at load.
type Webhooks struct {
	Kind        Kind
	Validating  *Webhook
	Mutating    *Webhook
	Permissions []Permission
}

// UserInfo is who made the request, as the API server authenticated them.
type UserInfo struct {
	Username string
	UID      string
	Groups   []string
	Extra    map[string][]string
}

// Review is one admission request: the operation, the object as it would be stored (nil on
// a delete), the object as it is stored (updates, deletes), who asked, and whether it is a
// dry run.
type Review[T Object] struct {
	UID         string
	Operation   Operation
	Name        string
	Namespace   string
	SubResource string
	User        UserInfo
	Object      T
	OldObject   T
	DryRun      bool
}

// Allowed admits a request, with warnings for the client (kubectl prints them).
type Allowed struct {
	Warnings []string
}

// Denied refuses a request: Message is what the user sees, Reason and Code the status
// (Forbidden, 403, from [Refuse]; Invalid, 422, from [Invalid]). Return it as the error of
// Validate or Mutate.
type Denied struct {
	Message  string
	Reason   string
	Code     uint16
	Warnings []string
}

func (d *Denied) Error() string { return d.Message }

// Refuse refuses a request: reason Forbidden, code 403.
func Refuse(format string, args ...any) *Denied {
	return &Denied{Message: fmt.Sprintf(format, args...), Reason: "Forbidden", Code: 403}
}

// RefuseInvalid refuses an invalid object: reason Invalid, code 422, what the API server
// says of a bad field.
func RefuseInvalid(format string, args ...any) *Denied {
	return &Denied{Message: fmt.Sprintf(format, args...), Reason: "Invalid", Code: 422}
}

// Admission is the admission half of a plugin, for objects of type T (a pointer to the
// reviewed kind's struct). Register it with [RegisterAdmission] beside the reconciler, or
// alone with [RegisterAdmissionOnly]. Embed [NoValidate] or [NoMutate] for the review it does
// not make.
type Admission[T Object] interface {
	// Webhooks says which webhooks to register. Called once per loaded version; it must not
	// call the host.
	Webhooks() Webhooks
	// Validate admits the request or refuses it (a *[Denied] error). Any other error, or a
	// panic, is a failed review, answered by the webhook's failure policy.
	Validate(ctx *Context, review Review[T]) (Allowed, error)
	// Mutate admits the request unchanged (a nil object), changed (the object), or refuses
	// it. Mutating webhooks run before validating ones.
	Mutate(ctx *Context, review Review[T]) (T, Allowed, error)
}

// NoValidate is a Validate that admits everything, to embed in an Admission with only a
// mutating webhook.
type NoValidate[T Object] struct{}

// Validate admits.
func (NoValidate[T]) Validate(*Context, Review[T]) (Allowed, error) { return Allowed{}, nil }

// NoMutate is a Mutate that changes nothing, to embed in an Admission with only a
// validating webhook.
type NoMutate[T Object] struct{}

// Mutate admits unchanged.
func (NoMutate[T]) Mutate(*Context, Review[T]) (T, Allowed, error) {
	var zero T
	return zero, Allowed{}, nil
}

// WireReview is a review as the host sends it, for the build's glue.
type WireReview struct {
	UID, Name, Namespace, SubResource string
	Operation                         Operation
	User                              UserInfo
	Object, OldObject                 *string
	DryRun                            bool
}

// Answer is how a review ended, for the build's glue: a refusal, or an admission with its
// warnings and, for a mutation, the changed object's JSON.
type Answer struct {
	Denied   *Denied
	Warnings []string
	Object   *string
}

type admission struct {
	// name and version of an admission-only plugin ([RegisterAdmissionOnly]); beside a
	// reconciler (standalone false) the reconciler's Info names the plugin.
	name, version string
	standalone    bool
	webhooks      func() Webhooks
	review        func(ctx *Context, mutate bool, r WireReview) (Answer, error)
}

var registeredAdmission *admission

// RegisterAdmission makes a the plugin's admission half. Call it once, from the plugin
// package's init function, beside [Register]: the admission half shares the reconciler's
// name and version. A second call panics. The plugin is then built against the world
// plugin-with-admission (guest-sdk/go/build sees the call).
func RegisterAdmission[T Object](a Admission[T]) {
	if registeredAdmission != nil {
		panic(secondAdmission("wasmop.RegisterAdmission"))
	}
	registeredAdmission = admissionOf("wasmop.RegisterAdmission", a)
}

// RegisterAdmissionOnly makes a the whole plugin: one that reviews admission requests and
// reconciles nothing, called name (a DNS-1123 label: lowercase letters, digits and '-', at
// most 63 characters) at version (1 to 64 characters of 0-9, A-Z, a-z, '.', '+', '_' and
// '-'), the name and version its reviews, metrics and logs carry. Call it once, from the
// plugin package's init function, instead of [Register] and [RegisterAdmission]. The plugin
// is then built against the world admission-plugin (guest-sdk/go/build sees the call), which
// exports no reconciler: the host serves its webhooks and runs no controller for it.
//
// A bad name or version, a second admission half, or a reconciler registered too panics in
// init, which fails the build: it runs the init functions when it pre-initialises the
// component.
func RegisterAdmissionOnly[T Object](name, version string, a Admission[T]) {
	const who = "wasmop.RegisterAdmissionOnly"
	if registeredAdmission != nil {
		panic(secondAdmission(who))
	}
	if registered != nil {
		panic(who + ": the plugin registers a reconciler (wasmop.Register); register its admission " +
			"half with wasmop.RegisterAdmission instead, which shares the reconciler's name and version")
	}
	if err := checkIdentity(name, version); err != nil {
		panic(fmt.Sprintf("%s: %v", who, err))
	}
	registeredAdmission = admissionOf(who, a)
	registeredAdmission.name, registeredAdmission.version, registeredAdmission.standalone = name, version, true
}

// secondAdmission is the panic of a registration that finds the admission half registered.
func secondAdmission(who string) string {
	first := "wasmop.RegisterAdmission"
	if registeredAdmission.standalone {
		first = "wasmop.RegisterAdmissionOnly"
	}
	return fmt.Sprintf("%s: the plugin registered its admission half already (%s): a plugin has one", who, first)
}

// checkIdentity checks an admission-only plugin's name and version by the contract's rules
// (wit/plugin.wit, plugin-info.info), so that a bad one fails the build, naming itself,
// instead of the host refusing the plugin at load. By hand rather than with regexp, which
// would add to every component's size.
func checkIdentity(name, version string) error {
	label := len(name) >= 1 && len(name) <= 63 && name[0] != '-' && name[len(name)-1] != '-'
	for _, c := range []byte(name) {
		label = label && (c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-')
	}
	if !label {
		return fmt.Errorf("the plugin's name %q is not a DNS-1123 label (lowercase letters, digits and '-', "+
			"starting and ending with a letter or digit, at most 63 characters)", name)
	}
	ok := len(version) >= 1 && len(version) <= 64
	for _, c := range []byte(version) {
		ok = ok && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(".+_-", c) >= 0)
	}
	if !ok {
		return fmt.Errorf("the plugin's version %q is not 1 to 64 characters of 0-9, A-Z, a-z, '.', '+', '_' and '-'", version)
	}
	return nil
}

// admissionOf is a's webhooks and reviews over the wire's types; who registers it, for the
// messages of its panics.
func admissionOf[T Object](who string, a Admission[T]) *admission {
	var zero T
	t := reflect.TypeOf(zero)
	if t == nil || t.Kind() != reflect.Pointer {
		panic(fmt.Sprintf("%s: the object type %v must be a pointer to a struct", who, t))
	}
	decodeObject := func(which string, text *string) (T, *Denied) {
		var none T
		if text == nil {
			return none, nil
		}
		obj := reflect.New(t.Elem()).Interface().(T)
		if err := decode(sourceOf(*text), obj, false); err != nil {
			return none, &Denied{Message: fmt.Sprintf("cannot decode the %s: %v", which, err), Reason: "BadRequest", Code: 400}
		}
		return obj, nil
	}
	return &admission{
		webhooks: func() Webhooks {
			hooks := a.Webhooks()
			if hooks.Kind.Kind == "" {
				k, ok := any(reflect.New(t.Elem()).Interface()).(Kinded)
				if !ok {
					panic(fmt.Sprintf("%s: %v has no DefaultKind method; set Webhooks.Kind", who, t))
				}
				hooks.Kind = k.DefaultKind()
			}
			return hooks
		},
		review: func(ctx *Context, mutate bool, w WireReview) (Answer, error) {
			object, denied := decodeObject("object", w.Object)
			if denied != nil {
				return Answer{Denied: denied}, nil
			}
			old, denied := decodeObject("old object", w.OldObject)
			if denied != nil {
				return Answer{Denied: denied}, nil
			}
			review := Review[T]{
				UID: w.UID, Operation: w.Operation, Name: w.Name, Namespace: w.Namespace,
				SubResource: w.SubResource, User: w.User, Object: object, OldObject: old,
				DryRun: w.DryRun,
			}
			if !mutate {
				allowed, err := a.Validate(ctx, review)
				if err != nil {
					return refusal(err)
				}
				return Answer{Warnings: allowed.Warnings}, nil
			}
			changed, allowed, err := a.Mutate(ctx, review)
			if err != nil {
				return refusal(err)
			}
			answer := Answer{Warnings: allowed.Warnings}
			if v := reflect.ValueOf(changed); v.IsValid() && !v.IsNil() && w.Object != nil {
				text, err := overlay(*w.Object, changed)
				if err != nil {
					return Answer{}, err
				}
				answer.Object = &text
			}
			return answer, nil
		},
	}
}

// refusal is a *Denied error as the answer, any other error as a failed review.
func refusal(err error) (Answer, error) {
	if d, ok := err.(*Denied); ok {
		return Answer{Denied: d}, nil
	}
	return Answer{}, err
}

// overlay lays changed's JSON over the original object's: objects merge key by key, so a
// field the plugin's type does not know is kept, never stripped.
func overlay(original string, changed Object) (string, error) {
	var base, top any
	if err := json.Unmarshal([]byte(original), &base); err != nil {
		return "", err
	}
	data, err := json.Marshal(changed)
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(data, &top); err != nil {
		return "", err
	}
	out, err := json.Marshal(merge(base, top))
	return string(out), err
}

func merge(base, top any) any {
	b, okb := base.(map[string]any)
	t, okt := top.(map[string]any)
	if !okb || !okt {
		return top
	}
	for k, v := range t {
		b[k] = merge(b[k], v)
	}
	return b
}

// noAdmission is the error of a plugin with no admission half, in the words of whoever
// needs one.
const noAdmission = "no admission half registered: call wasmop.RegisterAdmission (beside wasmop.Register) " +
	"or wasmop.RegisterAdmissionOnly in the plugin's init function"

// DescribedAdmission is the registered admission half's webhooks and the plugin's name and
// version (an admission-only plugin's own, otherwise the reconciler's), for the build's
// glue. A panic in Webhooks (or in the reconciler's Describe) is an error.
func DescribedAdmission() (name, version string, hooks Webhooks, err error) {
	if registeredAdmission == nil {
		return "", "", Webhooks{}, fmt.Errorf("%s", noAdmission)
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%s", panicMessage(v))
		}
	}()
	name, version = registeredAdmission.name, registeredAdmission.version
	if !registeredAdmission.standalone {
		info, err := Described()
		if err != nil {
			return "", "", Webhooks{}, err
		}
		name, version = info.Name, info.Version
	}
	return name, version, registeredAdmission.webhooks(), nil
}

// ServeReview runs one review (validate, or mutate when mutate is set) for the build's
// glue. A panic or an error other than a *[Denied] is a failed review: its message is
// returned, for the glue to trap with.
func ServeReview(host Host, mutate bool, target Ref, w WireReview) (answer Answer, failure string) {
	if registeredAdmission == nil {
		return Answer{}, noAdmission
	}
	defer func() {
		if v := recover(); v != nil {
			answer, failure = Answer{}, capped(panicMessage(v))
		}
	}()
	answer, err := registeredAdmission.review(NewContext(host, target), mutate, w)
	if err != nil {
		return Answer{}, capped(err.Error())
	}
	return answer, ""
}
