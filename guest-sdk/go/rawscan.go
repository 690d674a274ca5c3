package wasmop

import (
	"bytes"
	"encoding/json"
	"strconv"
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
func scanRaw(data []byte, o *RawObject) bool {
	var seen [3]bool
	return eachMember(data, func(key, value []byte) bool {
		i, ok := -1, false
		switch string(key) {
		case "apiVersion":
			i, ok = 0, scanString(value, &o.APIVersion)
		case "kind":
			i, ok = 1, scanString(value, &o.Kind)
		case "metadata":
			i, ok = 2, scanObjectMeta(value, &o.ObjectMeta)
		default:
			ok = !foldsTo(key, "apiVersion", "kind", "metadata")
		}
		if i >= 0 {
			ok = ok && !seen[i]
			seen[i] = true
		}
		return ok
	})
}

// objectMetaKeys are ObjectMeta's JSON keys, in the order of its fields.
var objectMetaKeys = [...]string{"name", "generateName", "namespace", "uid", "resourceVersion", "generation",
	"creationTimestamp", "deletionTimestamp", "labels", "annotations", "ownerReferences", "finalizers"}

// scanObjectMeta is scanRaw for metadata: each key names its field in one switch, and its
// position there is its slot in seen.
func scanObjectMeta(data []byte, meta *ObjectMeta) bool {
	if isNull(data) {
		return true
	}
	var seen [len(objectMetaKeys)]bool
	return eachMember(data, func(key, value []byte) bool {
		var i int
		var ok bool
		switch string(key) {
		case "name":
			i, ok = 0, scanString(value, &meta.Name)
		case "generateName":
			i, ok = 1, scanString(value, &meta.GenerateName)
		case "namespace":
			i, ok = 2, scanString(value, &meta.Namespace)
		case "uid":
			i, ok = 3, scanString(value, &meta.UID)
		case "resourceVersion":
			i, ok = 4, scanString(value, &meta.ResourceVersion)
		case "generation":
			i, ok = 5, scanInt(value, &meta.Generation)
		case "creationTimestamp":
			i, ok = 6, scanString(value, &meta.CreationTimestamp)
		case "deletionTimestamp":
			i, ok = 7, scanString(value, &meta.DeletionTimestamp)
		case "labels":
			i, ok = 8, scanStringMap(value, &meta.Labels)
		case "annotations":
			i, ok = 9, scanStringMap(value, &meta.Annotations)
		case "ownerReferences": // rare and small, left to encoding/json
			i, ok = 10, json.Unmarshal(value, &meta.OwnerReferences) == nil
		case "finalizers":
			i, ok = 11, scanStrings(value, &meta.Finalizers)
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
func scanString(data []byte, into *string) bool {
	if isNull(data) {
		return true
	}
	s, ok := scanQuoted(data)
	if ok {
		*into = s
	}
	return ok
}

// scanQuoted is the JSON string literal data as a Go string; false for another value or for
// one that is not valid UTF-8.
func scanQuoted(data []byte) (string, bool) {
	if len(data) < 2 || data[0] != '"' || skipString(data, 0) != len(data) || !utf8.Valid(data) {
		return "", false
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
func scanStringMap(data []byte, into *map[string]string) bool {
	if isNull(data) {
		*into = nil
		return true
	}
	out := map[string]string{}
	ok := eachMember(data, func(key, value []byte) bool {
		if _, dup := out[string(key)]; dup || !utf8.Valid(key) {
			return false
		}
		s, ok := scanQuoted(value)
		out[string(key)] = s
		return ok
	})
	if ok {
		*into = out
	}
	return ok
}

// scanStrings decodes a JSON array of strings (null: nil).
func scanStrings(data []byte, into *[]string) bool {
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
		s, ok := scanQuoted(e)
		if !ok {
			return false
		}
		out = append(out, s)
	}
	*into = out
	return true
}
