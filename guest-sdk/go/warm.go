package wasmop

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// warm fills, for t and every type reachable from its fields, the caches that decoding and
// encoding fill on first use: encoding/json's per-type field lists and encoders, and the
// SDK's own field lists (cachedFields), needsCheck's answers and headOf's. A plugin's
// component is pre-initialised at build time (guest-sdk/go/build): what init functions leave
// in memory, every call starts with, and what a call computes is lost with its instance.
// Filled here, from Register and this package's init, the caches are part of that state,
// where a call would otherwise rebuild them with reflection every time (the bigger part of
// a small reconcile's cost).
//
// Best effort: a type whose encoding fails or panics on its zero value is left for the
// call to cache as before.
func warm(t reflect.Type) {
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		if seen[t] {
			return
		}
		seen[t] = true
		needsCheck(t)
		headOf(t)
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			walk(t.Elem())
		case reflect.Map:
			walk(t.Key())
			walk(t.Elem())
		case reflect.Struct:
			for _, f := range cachedFields(t) {
				walk(f.typ)
			}
			for i := range t.NumField() {
				if f := t.Field(i); f.Anonymous {
					walk(f.Type)
				}
			}
		}
	}
	walk(t)
	func() {
		defer func() { _ = recover() }()
		v := reflect.New(t).Interface()
		_, _ = json.Marshal(v)
		_ = json.Unmarshal([]byte("{}"), v)
	}()
}

// The SDK's own types, which every call decodes or writes (statusPatch, the body of every
// status write), and map[string]any, the body of most merge patches: unwarmed, encoding/json
// built its encoder in every call that wrote a status (4 % of a database-config call in perf).
func init() {
	for _, v := range []any{RawObject{}, ConfigMap{}, Namespace{}, Condition{}, OwnerReference{},
		statusPatch{}, map[string]any{}} {
		warm(reflect.TypeOf(v))
	}
	// And leave encoding/json's pool an encoder state whose buffer has room for a status or
	// patch body: a call's first encoding otherwise allocated a state (and its map of
	// pointers seen) and grew its buffer from nothing, 64 bytes at first, doubling. The pool
	// keeps it across the one collection the glue may make at the end of init (it drops what
	// two collections in a row found unused), and a call makes none before its first write.
	_, _ = json.Marshal(strings.Repeat(" ", encoderRoom))
	// And fmt's pool a printer whose buffer has grown, for the plugin's Sprintf and Errorf
	// (a fresh printer a call is an allocation, and its buffer grows from nothing).
	_ = fmt.Sprintf("%s", strings.Repeat(" ", printerRoom))
}

// printerRoom is the buffer the pooled printer keeps from init.
const printerRoom = 256

// encoderRoom is the buffer the pooled encoder state keeps from init.
const encoderRoom = 4 << 10
