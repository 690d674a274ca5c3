package wasmop

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// decode decodes JSON data into into (a non-nil pointer) as encoding/json does, after
// checking what encoding/json does not: required fields, and (with denyUnknown) keys the
// type does not have. A struct field is required unless its JSON tag has omitempty or
// omitzero, or its type is a pointer or an interface. Messages use serde's words, so a Go
// plugin reports what its Rust twin reports: "missing field `port`", "unknown field `x`,
// expected one of `a`, `b`, `c`", "invalid type: string, expected int64 at `spec.port`".
func decode(data []byte, into any, denyUnknown bool) error {
	rv := reflect.ValueOf(into)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("cannot decode into %T: a non-nil pointer is needed", into)
	}
	t := rv.Type().Elem()
	// The usual case, in one pass over the text: encoding/json takes it, and what it does
	// not check is checked on the parts of the text that can fail it (needsCheck).
	if json.Unmarshal(data, into) == nil {
		return check(t, data, "", denyUnknown)
	}
	// It did not: text that is no JSON at all, or the same checks first, then encoding/json's
	// error, as serde would say it.
	var text json.RawMessage
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&text); err != nil {
		return fmt.Errorf("invalid JSON: %v", err)
	}
	if err := check(t, data, "", denyUnknown); err != nil {
		return err
	}
	if err := json.Unmarshal(data, into); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			at := ""
			if te.Field != "" {
				at = " at `" + te.Field + "`"
			}
			return fmt.Errorf("invalid type: %s, expected %s%s", te.Value, te.Type, at)
		}
		return err
	}
	return nil
}

type field struct {
	key      string
	typ      reflect.Type
	required bool
}

// fieldCache holds fields' answer per struct type: computing it with reflection on every
// decode cost a Go plugin's call more than the decode itself.
var fieldCache sync.Map // reflect.Type -> []field

// cachedFields is fields(t), computed once per type.
func cachedFields(t reflect.Type) []field {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.([]field)
	}
	fs, _ := fieldCache.LoadOrStore(t, fields(t))
	return fs.([]field)
}

// fields lists a struct type's JSON fields, untagged embedded structs inlined.
func fields(t reflect.Type) []field {
	var out []field
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, fields(ft)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		optional := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		kind := f.Type.Kind()
		optional = optional || kind == reflect.Pointer || kind == reflect.Interface
		out = append(out, field{key: name, typ: f.Type, required: !optional})
	}
	return out
}

func expected(keys []string) string {
	quoted := make([]string, len(keys))
	for i, k := range keys {
		quoted[i] = "`" + k + "`"
	}
	switch len(quoted) {
	case 0:
		return "no fields"
	case 1:
		return quoted[0]
	case 2:
		return quoted[0] + " or " + quoted[1]
	}
	return "one of " + strings.Join(quoted, ", ")
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// needsCheckCache holds needsCheck's answer per type.
var needsCheckCache sync.Map // reflect.Type -> bool

// needsCheck is whether a value of type t can fail a non-strict check: t, or a type it
// holds, is a struct with a required field. Only those parts of an object's text are parsed
// again (a Database's spec, not its metadata).
func needsCheck(t reflect.Type) bool {
	if v, ok := needsCheckCache.Load(t); ok {
		return v.(bool)
	}
	v, _ := needsCheckCache.LoadOrStore(t, computeNeedsCheck(t, map[reflect.Type]bool{}))
	return v.(bool)
}

func computeNeedsCheck(t reflect.Type, visiting map[reflect.Type]bool) bool {
	if visiting[t] {
		return false // a cycle: whatever it holds is answered where it started
	}
	visiting[t] = true
	defer delete(visiting, t)
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return computeNeedsCheck(t.Elem(), visiting)
	case reflect.Struct:
		for _, f := range cachedFields(t) {
			if f.required || computeNeedsCheck(f.typ, visiting) {
				return true
			}
		}
	}
	return false
}

func isNull(data []byte) bool {
	return string(bytes.TrimSpace(data)) == "null"
}

// check walks the JSON text data against t for what encoding/json lets pass: required
// fields, and with strict, keys t does not have. Text of another shape than t (a string
// for a struct, say) passes: encoding/json reports the type.
func check(t reflect.Type, data []byte, path string, strict bool) error {
	if !strict && !needsCheck(t) {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		if isNull(data) {
			return nil
		}
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) != nil || m == nil {
			return nil
		}
		fs := cachedFields(t)
		keys := make([]string, len(fs))
		for i, f := range fs {
			keys[i] = f.key
		}
		if strict {
			for _, k := range slices.Sorted(maps.Keys(m)) {
				if !slices.Contains(keys, k) {
					where := ""
					if path != "" {
						where = " in `" + path + "`"
					}
					return fmt.Errorf("unknown field `%s`, expected %s%s", k, expected(keys), where)
				}
			}
		}
		for _, f := range fs {
			v, present := m[f.key]
			if !present {
				if f.required {
					return fmt.Errorf("missing field `%s`", f.key)
				}
				continue
			}
			if err := check(f.typ, v, join(path, f.key), strict); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		var items []json.RawMessage
		if json.Unmarshal(data, &items) != nil {
			return nil
		}
		for i, item := range items {
			if err := check(t.Elem(), item, fmt.Sprintf("%s[%d]", path, i), strict); err != nil {
				return err
			}
		}
	case reflect.Map:
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) != nil {
			return nil
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if err := check(t.Elem(), m[k], join(path, k), strict); err != nil {
				return err
			}
		}
	}
	return nil
}
