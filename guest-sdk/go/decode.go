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
	var tree any
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if err := d.Decode(&tree); err != nil {
		return fmt.Errorf("invalid JSON: %v", err)
	}
	if err := check(rv.Type().Elem(), tree, "", denyUnknown); err != nil {
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

// check walks value (decoded with UseNumber) against t for what encoding/json lets pass.
func check(t reflect.Type, value any, path string, strict bool) error {
	for t.Kind() == reflect.Pointer {
		if value == nil {
			return nil
		}
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := value.(map[string]any)
		if !ok {
			return nil // not an object: encoding/json reports the type
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
		items, ok := value.([]any)
		if !ok {
			return nil
		}
		for i, item := range items {
			if err := check(t.Elem(), item, fmt.Sprintf("%s[%d]", path, i), strict); err != nil {
				return err
			}
		}
	case reflect.Map:
		m, ok := value.(map[string]any)
		if !ok {
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
