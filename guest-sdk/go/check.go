package wasmop

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// What encoding/json does not check, checked on the JSON text after it decoded: required
// fields, and in the strict check (a plugin's configuration) keys the type does not have.

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

// subPath is path's member key for check, which names a path only in the strict check's
// message: the usual, non-strict check builds none.
func subPath(strict bool, path, key string) string {
	if !strict {
		return ""
	}
	return join(path, key)
}

// check walks the JSON text data against t for what encoding/json lets pass: required
// fields, and with strict, keys t does not have. Text of another shape than t (a string
// for a struct, say) passes: encoding/json reports the type. It reads data once, with
// members and elements, which slice the text without decoding it: parsing each part again
// with encoding/json cost more than the decode it checks.
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
		m, ok := members(data)
		if !ok {
			return nil
		}
		fs := cachedFields(t)
		if strict {
			var unknown []string
			for _, kv := range m {
				if !slices.ContainsFunc(fs, func(f field) bool { return f.key == kv.key }) {
					unknown = append(unknown, kv.key)
				}
			}
			if len(unknown) > 0 {
				keys := make([]string, len(fs))
				for i, f := range fs {
					keys[i] = f.key
				}
				where := ""
				if path != "" {
					where = " in `" + path + "`"
				}
				return fmt.Errorf("unknown field `%s`, expected %s%s", slices.Min(unknown), expected(keys), where)
			}
		}
		return checkMembers(fs, m, path, strict, nil)
	case reflect.Slice, reflect.Array:
		items, ok := elements(data)
		if !ok {
			return nil
		}
		for i, item := range items {
			at := ""
			if strict {
				at = fmt.Sprintf("%s[%d]", path, i)
			}
			if err := check(t.Elem(), item, at, strict); err != nil {
				return err
			}
		}
	case reflect.Map:
		m, ok := members(data)
		if !ok {
			return nil
		}
		// Each key once (the last of duplicates, as decoding keeps), in sorted order.
		slices.SortStableFunc(m, func(a, b member) int { return strings.Compare(a.key, b.key) })
		for i, kv := range m {
			if i+1 < len(m) && m[i+1].key == kv.key {
				continue
			}
			if err := check(t.Elem(), kv.value, subPath(strict, path, kv.key), strict); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkMembers is check of a struct's fields fs against its members m, but for the field
// skip (when not nil), which must only be present.
func checkMembers(fs []field, m objectText, path string, strict bool, skip *field) error {
	for i := range fs {
		f := &fs[i]
		v, present := m.last(f.key)
		if !present {
			if f.required {
				return fmt.Errorf("missing field `%s`", f.key)
			}
			continue
		}
		if skip != nil && f.key == skip.key && f.typ == skip.typ {
			continue
		}
		if err := check(f.typ, v, subPath(strict, path, f.key), strict); err != nil {
			return err
		}
	}
	return nil
}
