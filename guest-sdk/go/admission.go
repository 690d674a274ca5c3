package wasmop

import (
	"encoding/json"
	"fmt"
	"reflect"
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
// (the reviewed type's DefaultKind when it has one).
type Webhooks struct {
	Kind       Kind
	Validating *Webhook
	Mutating   *Webhook
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
// reviewed kind's struct). Register it with [RegisterAdmission] beside the reconciler.
// Embed [NoValidate] or [NoMutate] for the review it does not make.
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
	webhooks func() Webhooks
	review   func(ctx *Context, mutate bool, r WireReview) (Answer, error)
}

var registeredAdmission *admission

// RegisterAdmission makes a the plugin's admission half. Call it once, from the plugin
// package's init function, beside [Register]; a second call panics. The plugin is then
// built against the world plugin-with-admission (guest-sdk/go/build sees the call).
func RegisterAdmission[T Object](a Admission[T]) {
	if registeredAdmission != nil {
		panic("wasmop.RegisterAdmission called twice: a plugin has one admission half")
	}
	var zero T
	t := reflect.TypeOf(zero)
	if t == nil || t.Kind() != reflect.Pointer {
		panic(fmt.Sprintf("wasmop.RegisterAdmission: the object type %v must be a pointer to a struct", t))
	}
	decodeObject := func(which string, text *string) (T, *Denied) {
		var none T
		if text == nil {
			return none, nil
		}
		obj := reflect.New(t.Elem()).Interface().(T)
		if err := decode([]byte(*text), obj, false); err != nil {
			return none, &Denied{Message: fmt.Sprintf("cannot decode the %s: %v", which, err), Reason: "BadRequest", Code: 400}
		}
		return obj, nil
	}
	registeredAdmission = &admission{
		webhooks: func() Webhooks {
			hooks := a.Webhooks()
			if hooks.Kind.Kind == "" {
				k, ok := any(reflect.New(t.Elem()).Interface()).(Kinded)
				if !ok {
					panic(fmt.Sprintf("wasmop.RegisterAdmission: %v has no DefaultKind method; set Webhooks.Kind", t))
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

// DescribedAdmission is the registered admission half's webhooks and the reconciler's name
// and version, for the build's glue. A panic in Webhooks is an error.
func DescribedAdmission() (info Info, hooks Webhooks, err error) {
	if registeredAdmission == nil {
		return Info{}, Webhooks{}, fmt.Errorf("no admission half registered: call wasmop.RegisterAdmission in the plugin's init function")
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%s", panicMessage(v))
		}
	}()
	info, err = Described()
	if err != nil {
		return Info{}, Webhooks{}, err
	}
	return info, registeredAdmission.webhooks(), nil
}

// ServeReview runs one review (validate, or mutate when mutate is set) for the build's
// glue. A panic or an error other than a *[Denied] is a failed review: its message is
// returned, for the glue to trap with.
func ServeReview(host Host, mutate bool, target Ref, w WireReview) (answer Answer, failure string) {
	if registeredAdmission == nil {
		return Answer{}, "no admission half registered: call wasmop.RegisterAdmission in the plugin's init function"
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
