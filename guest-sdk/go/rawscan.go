package wasmop

import (
	"bytes"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// scanRaw decodes data's apiVersion, kind and metadata into o, by splitting the text into
// members (decode.go's scanner) and decoding only the members RawObject has. For JSON text,
// o ends as json.Unmarshal leaves it, or scanRaw answers false (leaving o for the caller to
// reset) where it would not: a key that is not one of RawObject's but matches one but for
// case (encoding/json matches keys case-insensitively), a key given twice, a value of another
// type than the field's (encoding/json's error is then the answer), a string that is not
// valid UTF-8 (encoding/json replaces such bytes). It does not validate what it skips: text
// that is no JSON may pass (this reads the host's text, which its JSON serialiser wrote), and
// Decode reads the whole text with encoding/json anyway.
func scanRaw(src source, o *RawObject) bool {
	var seen [3]bool
	return scanMembers(src.b, takeMetadata(src, &o.ObjectMeta, &seen, nil), func(key, value []byte) bool {
		_, ok := scanHead(src, key, value, &o.TypeMeta, &seen)
		return ok
	}) >= 0
}

// takeMetadata is scanMembers's take for an object's members: it scans metadata into meta
// where the value starts (each key but metadata it leaves to scanHead), records the member
// in *all when all is not nil, and stops on metadata given twice or not scanned.
func takeMetadata(src source, meta *ObjectMeta, seen *[3]bool, all *objectText) func(key, rest []byte) int {
	return func(key, rest []byte) int {
		if string(key) != "metadata" {
			return 0
		}
		n := scanObjectMetaAt(src, rest, meta)
		if n < 0 || seen[2] {
			return -1
		}
		seen[2] = true
		if all != nil {
			*all = append(*all, member{"metadata", rest[:n]})
		}
		return n
	}
}

// scanHead decodes one member of an object's text when its key is apiVersion or kind (head
// is then true; takeMetadata scans metadata), as scanRaw says; ok is false where
// encoding/json would answer otherwise: such a key given twice (seen), a value it cannot
// take, or another key that matches apiVersion, kind or metadata but for case.
func scanHead(src source, key, value []byte, t *TypeMeta, seen *[3]bool) (head, ok bool) {
	i := -1
	switch string(key) {
	case "apiVersion":
		i, ok = 0, scanString(src, value, &t.APIVersion)
	case "kind":
		i, ok = 1, scanString(src, value, &t.Kind)
	default:
		return false, !foldsTo(key, "apiVersion", "kind", "metadata")
	}
	ok = ok && !seen[i]
	seen[i] = true
	return true, ok
}

// splitHead is scanRaw into t and meta, which answers the text of the object's other
// members too, as an object of its own ("{}" when there are none), for encoding/json to
// decode, and every member of the object as members answers them, for decode's check of
// required keys (so that the check does not split the text again): for JSON text, scanning
// the head and decoding the rest leaves a zero value of a type with the head's shape (headOf)
// as json.Unmarshal of the whole text would, or splitHead answers false. A key is written
// again as it was read, unquoted, which encoding/json reads alike; one that would need
// escapes answers false.
func splitHead(src source, t *TypeMeta, meta *ObjectMeta) ([]byte, objectText, bool) {
	var seen [3]bool
	var all objectText
	rest := make([]byte, 1, len(src.b))
	rest[0] = '{'
	ok := scanMembers(src.b, takeMetadata(src, meta, &seen, &all), func(key, value []byte) bool {
		all = append(all, member{string(key), value})
		head, ok := scanHead(src, key, value, t, &seen)
		if head || !ok {
			return ok
		}
		for _, b := range key {
			if b < 0x20 || b == '"' || b == '\\' {
				return false
			}
		}
		if len(rest) > 1 {
			rest = append(rest, ',')
		}
		rest = append(rest, '"')
		rest = append(rest, key...)
		rest = append(rest, '"', ':')
		rest = append(rest, value...)
		return true
	}) >= 0
	return append(rest, '}'), all, ok
}

// head is where a struct type keeps its TypeMeta and ObjectMeta, when it has the head's
// shape: TypeMeta embedded untagged, an exported ObjectMeta tagged "metadata", and no other
// field that encoding/json could match to apiVersion, kind or metadata (an untagged
// embedded struct other than TypeMeta could, so none is allowed). For such a type, decode
// scans the head with the SDK's scanner and leaves only the rest to encoding/json.
type head struct {
	typeMeta, objectMeta int
	ok                   bool
}

var (
	headCache      sync.Map // reflect.Type -> head
	typeMetaType   = reflect.TypeFor[TypeMeta]()
	objectMetaType = reflect.TypeFor[ObjectMeta]()
)

// headOf is t's head, computed once per type.
func headOf(t reflect.Type) head {
	if h, ok := headCache.Load(t); ok {
		return h.(head)
	}
	h, _ := headCache.LoadOrStore(t, computeHead(t))
	return h.(head)
}

func computeHead(t reflect.Type) head {
	if t.Kind() != reflect.Struct {
		return head{}
	}
	h := head{typeMeta: -1, objectMeta: -1}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, ignored := jsonTag(f)
		if ignored {
			continue
		}
		switch {
		case f.Anonymous && name == "" && f.Type == typeMetaType && h.typeMeta < 0:
			h.typeMeta = i
		case f.Type == objectMetaType && name == "metadata" && f.IsExported() && h.objectMeta < 0:
			h.objectMeta = i
		case f.Anonymous && name == "":
			return head{} // it may bring keys of its own, TypeMeta's twice among them
		case !f.IsExported():
			continue
		default:
			if name == "" {
				name = f.Name
			}
			for _, k := range [...]string{"apiVersion", "kind", "metadata"} {
				if strings.EqualFold(name, k) {
					return head{}
				}
			}
		}
	}
	h.ok = h.typeMeta >= 0 && h.objectMeta >= 0
	return h
}

// objectMetaKeys are ObjectMeta's JSON keys, in the order of its fields.
var objectMetaKeys = [...]string{"name", "generateName", "namespace", "uid", "resourceVersion", "generation",
	"creationTimestamp", "deletionTimestamp", "labels", "annotations", "ownerReferences", "finalizers"}

// scanObjectMetaAt is scanRaw for metadata, whose value starts data (and text may follow
// it): it answers the value's length, or -1. Each key names its field in one switch, and its
// position there is its slot in seen.
func scanObjectMetaAt(src source, data []byte, meta *ObjectMeta) int {
	if n := len("null"); len(data) >= n && string(data[:n]) == "null" {
		return n
	}
	var seen [len(objectMetaKeys)]bool
	return scanMembers(data, nil, func(key, value []byte) bool {
		var i int
		var ok bool
		switch string(key) {
		case "name":
			i, ok = 0, scanString(src, value, &meta.Name)
		case "generateName":
			i, ok = 1, scanString(src, value, &meta.GenerateName)
		case "namespace":
			i, ok = 2, scanString(src, value, &meta.Namespace)
		case "uid":
			i, ok = 3, scanString(src, value, &meta.UID)
		case "resourceVersion":
			i, ok = 4, scanString(src, value, &meta.ResourceVersion)
		case "generation":
			i, ok = 5, scanInt(value, &meta.Generation)
		case "creationTimestamp":
			i, ok = 6, scanString(src, value, &meta.CreationTimestamp)
		case "deletionTimestamp":
			i, ok = 7, scanString(src, value, &meta.DeletionTimestamp)
		case "labels":
			i, ok = 8, scanStringMap(src, value, &meta.Labels)
		case "annotations":
			i, ok = 9, scanStringMap(src, value, &meta.Annotations)
		case "ownerReferences":
			i, ok = 10, scanOwnerReferences(src, value, &meta.OwnerReferences)
		case "finalizers":
			i, ok = 11, scanStrings(src, value, &meta.Finalizers)
		default:
			return !foldsTo(key, objectMetaKeys[:]...)
		}
		ok = ok && !seen[i]
		seen[i] = true
		return ok
	})
}

// foldsTo reports whether key matches one of keys but for case (and is none of them).
func foldsTo(key []byte, keys ...string) bool {
	for _, k := range keys {
		if string(key) != k && bytes.EqualFold(key, []byte(k)) {
			return true
		}
	}
	return false
}

// scanString decodes a JSON string (null leaves into as it is, as encoding/json does).
func scanString(src source, data []byte, into *string) bool {
	if isNull(data) {
		return true
	}
	s, ok := src.quoted(data)
	if ok {
		*into = s
	}
	return ok
}

// source is the JSON text a scan reads, as bytes and as the string the host sent: a string
// the scan decodes is a substring of s where it can be (no escapes), not a copy; an object's
// labels and annotations were most of a scan's allocations. valid is whether the whole text
// is valid UTF-8, which each of its strings then is.
type source struct {
	b     []byte
	s     string
	valid bool
}

// sourceOf is the source of text, read from a copy of its bytes; b is never handed out
// ([RawObject.JSON] copies s), so b and s stay the same text.
func sourceOf(text string) source {
	return source{b: []byte(text), s: text, valid: utf8.ValidString(text)}
}

// str is the bytes v as a string: a substring of s when v is a slice of b, a copy otherwise.
func (src source) str(v []byte) string {
	if len(v) == 0 {
		return ""
	}
	if off := cap(src.b) - cap(v); off >= 0 && off+len(v) <= len(src.b) && &src.b[off] == &v[0] {
		return src.s[off : off+len(v)]
	}
	return string(v)
}

// quoted is the JSON string literal data (a slice of b) as a Go string; false for another
// value or for one that is not valid UTF-8. data is one value as eachMember or elements
// delimit it (with skipValue), so a value that starts with a quote is one whole string and
// is not scanned again here: that second scan was 1-2 % of a Go plugin's call.
func (src source) quoted(data []byte) (string, bool) {
	if len(data) < 2 || data[0] != '"' || !(src.valid || utf8.Valid(data)) {
		return "", false
	}
	inner := data[1 : len(data)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return src.str(inner), true
	}
	return unquote(data)
}

func scanInt(data []byte, into *int64) bool {
	if isNull(data) {
		return true
	}
	n, err := strconv.ParseInt(string(data), 10, 64)
	if err != nil {
		return false
	}
	*into = n
	return true
}

// scanStringMap decodes a JSON object of strings into a fresh map (null: nil, as
// encoding/json sets it).
func scanStringMap(src source, data []byte, into *map[string]string) bool {
	if isNull(data) {
		*into = nil
		return true
	}
	out := make(map[string]string, membersAtMost(data))
	ok := eachMember(data, func(key, value []byte) bool {
		if !src.valid && !utf8.Valid(key) {
			return false
		}
		s, ok := src.quoted(value)
		n := len(out)
		out[src.str(key)] = s
		return ok && len(out) > n // a key given twice is left to encoding/json
	})
	if ok {
		*into = out
	}
	return ok
}

// ownerReferenceKeys are OwnerReference's JSON keys, in the order of its fields.
var ownerReferenceKeys = [...]string{"apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion"}

// scanOwnerReferences decodes metadata.ownerReferences (null: nil): every object the plugin
// owns carries one, so every write's reply has it to read. It answers false for a reference
// without apiVersion, kind, name or uid, the keys an OwnerReference requires.
func scanOwnerReferences(src source, data []byte, into *[]OwnerReference) bool {
	if isNull(data) {
		*into = nil
		return true
	}
	es, ok := elements(data)
	if !ok {
		return false
	}
	out := make([]OwnerReference, len(es))
	for n, e := range es {
		if isNull(e) {
			continue // encoding/json leaves a struct as it is for null
		}
		r := &out[n]
		var seen [len(ownerReferenceKeys)]bool
		ok := eachMember(e, func(key, value []byte) bool {
			var i int
			var ok bool
			switch string(key) {
			case "apiVersion":
				i, ok = 0, scanString(src, value, &r.APIVersion)
			case "kind":
				i, ok = 1, scanString(src, value, &r.Kind)
			case "name":
				i, ok = 2, scanString(src, value, &r.Name)
			case "uid":
				i, ok = 3, scanString(src, value, &r.UID)
			case "controller":
				i, ok = 4, scanBoolPointer(value, &r.Controller)
			case "blockOwnerDeletion":
				i, ok = 5, scanBoolPointer(value, &r.BlockOwnerDeletion)
			default:
				return !foldsTo(key, ownerReferenceKeys[:]...)
			}
			ok = ok && !seen[i]
			seen[i] = true
			return ok
		})
		// A reference without a key check requires is left to encoding/json (and to check,
		// which names it), so that decode need not check the head again.
		if !ok || !seen[0] || !seen[1] || !seen[2] || !seen[3] {
			return false
		}
	}
	*into = out
	return true
}

// scanBoolPointer decodes true or false into a fresh *bool, null into nil, as
// encoding/json does for a pointer.
func scanBoolPointer(data []byte, into **bool) bool {
	switch string(data) {
	case "true":
		*into = boolPtr(true)
	case "false":
		*into = boolPtr(false)
	case "null":
		*into = nil
	default:
		return false
	}
	return true
}

// membersAtMost is one more than the commas in the JSON object text data: at least its
// members, to size a map so that it does not grow while it is filled. It counts with
// bytes.IndexByte, which Go's wasm port implements in assembly (bytes.Count is a Go loop
// there, and cost a call more than the growth it saved).
func membersAtMost(data []byte) int {
	n := 1
	for {
		i := bytes.IndexByte(data, ',')
		if i < 0 {
			return n
		}
		n++
		data = data[i+1:]
	}
}

// scanStrings decodes a JSON array of strings (null: nil).
func scanStrings(src source, data []byte, into *[]string) bool {
	if isNull(data) {
		*into = nil
		return true
	}
	es, ok := elements(data)
	if !ok {
		return false
	}
	out := make([]string, 0, len(es))
	for _, e := range es {
		s, ok := src.quoted(e)
		if !ok {
			return false
		}
		out = append(out, s)
	}
	*into = out
	return true
}
