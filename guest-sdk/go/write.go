package wasmop

import (
	"encoding/base64"
	"slices"
	"strconv"
	"unicode/utf8"
)

// The SDK writes its own object types ([ConfigMap], [Namespace], and the [ObjectMeta] and
// [OwnerReference]s in them) itself, byte for byte as encoding/json writes them with HTML
// escaping off (what marshal writes for any other type): in Go on wasm, encoding/json's
// reflection made a ConfigMap's write 12 % of a database-config reconcile in `perf` (about
// 20 µs), the costliest step of the call after reading the object. A plugin's own types are
// still written by encoding/json. write_test.go checks every field of these types, and random
// values of them, against encoding/json.

// ownJSON is v's JSON text when v is a *ConfigMap or a *Namespace, and false for anything
// else (before it allocates anything). Exactly those types: a plugin's type that embeds one
// of them, or ObjectMeta, has fields of its own (so these are functions, not methods a type
// embedding one would be given).
func ownJSON(v any) ([]byte, bool) {
	switch o := v.(type) {
	case *ConfigMap:
		return appendConfigMap(make([]byte, 0, 512), o), true
	case *Namespace:
		return appendNamespace(make([]byte, 0, 256), o), true
	}
	return nil, false
}

func appendConfigMap(dst []byte, c *ConfigMap) []byte {
	if c == nil {
		return append(dst, "null"...)
	}
	dst, comma := appendTypeMeta(append(dst, '{'), &c.TypeMeta)
	dst = appendObjectMeta(appendKey(dst, "metadata", comma), &c.ObjectMeta)
	if len(c.Data) > 0 {
		dst = appendStringMap(appendKey(dst, "data", true), c.Data)
	}
	if len(c.BinaryData) > 0 {
		dst = appendBytesMap(appendKey(dst, "binaryData", true), c.BinaryData)
	}
	if c.Immutable != nil {
		dst = strconv.AppendBool(appendKey(dst, "immutable", true), *c.Immutable)
	}
	return append(dst, '}')
}

func appendNamespace(dst []byte, n *Namespace) []byte {
	if n == nil {
		return append(dst, "null"...)
	}
	dst, comma := appendTypeMeta(append(dst, '{'), &n.TypeMeta)
	dst = appendObjectMeta(appendKey(dst, "metadata", comma), &n.ObjectMeta)
	return append(dst, '}')
}

// appendTypeMeta appends TypeMeta's members (each omitted when empty) and answers whether
// it appended any.
func appendTypeMeta(dst []byte, t *TypeMeta) ([]byte, bool) {
	comma := false
	dst, comma = appendStringField(dst, "apiVersion", t.APIVersion, comma)
	dst, comma = appendStringField(dst, "kind", t.Kind, comma)
	return dst, comma
}

// appendObjectMeta appends the metadata as an object, each field omitted when empty (every
// one is omitempty).
func appendObjectMeta(dst []byte, m *ObjectMeta) []byte {
	dst = append(dst, '{')
	comma := false
	dst, comma = appendStringField(dst, "name", m.Name, comma)
	dst, comma = appendStringField(dst, "generateName", m.GenerateName, comma)
	dst, comma = appendStringField(dst, "namespace", m.Namespace, comma)
	dst, comma = appendStringField(dst, "uid", m.UID, comma)
	dst, comma = appendStringField(dst, "resourceVersion", m.ResourceVersion, comma)
	if m.Generation != 0 {
		dst = strconv.AppendInt(appendKey(dst, "generation", comma), m.Generation, 10)
		comma = true
	}
	dst, comma = appendStringField(dst, "creationTimestamp", m.CreationTimestamp, comma)
	dst, comma = appendStringField(dst, "deletionTimestamp", m.DeletionTimestamp, comma)
	if len(m.Labels) > 0 {
		dst = appendStringMap(appendKey(dst, "labels", comma), m.Labels)
		comma = true
	}
	if len(m.Annotations) > 0 {
		dst = appendStringMap(appendKey(dst, "annotations", comma), m.Annotations)
		comma = true
	}
	if len(m.OwnerReferences) > 0 {
		dst = append(appendKey(dst, "ownerReferences", comma), '[')
		for i := range m.OwnerReferences {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendOwnerReference(dst, &m.OwnerReferences[i])
		}
		dst = append(dst, ']')
		comma = true
	}
	if len(m.Finalizers) > 0 {
		dst = append(appendKey(dst, "finalizers", comma), '[')
		for i, f := range m.Finalizers {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, f)
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

// appendOwnerReference appends the reference: its four keys always, controller and
// blockOwnerDeletion when set.
func appendOwnerReference(dst []byte, r *OwnerReference) []byte {
	dst = appendJSONString(appendKey(append(dst, '{'), "apiVersion", false), r.APIVersion)
	dst = appendJSONString(appendKey(dst, "kind", true), r.Kind)
	dst = appendJSONString(appendKey(dst, "name", true), r.Name)
	dst = appendJSONString(appendKey(dst, "uid", true), r.UID)
	if r.Controller != nil {
		dst = strconv.AppendBool(appendKey(dst, "controller", true), *r.Controller)
	}
	if r.BlockOwnerDeletion != nil {
		dst = strconv.AppendBool(appendKey(dst, "blockOwnerDeletion", true), *r.BlockOwnerDeletion)
	}
	return append(dst, '}')
}

// appendKey appends `"key":`, after a comma when comma is set; key needs no escapes.
func appendKey(dst []byte, key string, comma bool) []byte {
	if comma {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, key...)
	return append(dst, '"', ':')
}

// appendStringField appends an omitempty string member; the answer is whether a member has
// been appended, this one or one before.
func appendStringField(dst []byte, key, value string, comma bool) ([]byte, bool) {
	if value == "" {
		return dst, comma
	}
	return appendJSONString(appendKey(dst, key, comma), value), true
}

// appendMap appends m as encoding/json writes a map with string keys: the keys sorted, each
// value written by value.
func appendMap[V any](dst []byte, m map[string]V, value func([]byte, V) []byte) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = value(append(appendJSONString(dst, k), ':'), m[k])
	}
	return append(dst, '}')
}

func appendStringMap(dst []byte, m map[string]string) []byte {
	return appendMap(dst, m, appendJSONString)
}

// appendBytesMap appends m as encoding/json writes a map of byte slices: each value in
// standard base64, a nil one as null.
func appendBytesMap(dst []byte, m map[string][]byte) []byte {
	return appendMap(dst, m, func(dst []byte, v []byte) []byte {
		if v == nil {
			return append(dst, "null"...)
		}
		return append(base64.StdEncoding.AppendEncode(append(dst, '"'), v), '"')
	})
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s quoted as encoding/json quotes a string with HTML escaping off:
// `"` and `\` escaped, control characters as \b, \f, \n, \r, \t or \u00XX, each byte of
// invalid UTF-8 as \ufffd, and U+2028 and U+2029 as \u2028 and \u2029; the rest as it is.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b >= 0x20 && b != '"' && b != '\\' && b < utf8.RuneSelf {
			i++
			continue
		}
		if b < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(append(dst, s[start:i]...), `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(append(dst, s[start:i]...), '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
