package wasmop

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
)

// encodingJSON is what marshal wrote for every type before write.go: encoding/json, HTML
// escaping off.
func encodingJSON(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		t.Fatalf("encoding/json: %v", err)
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// Strings that exercise every branch of encoding/json's quoting: escapes, control bytes,
// what HTML escaping would change, invalid and truncated UTF-8, U+2028/U+2029, DEL.
var awkwardStrings = []string{
	"", "a", "orders-config", `"`, `\`, "\n\t\r\b\f", "\x00\x01\x1f", "<>&", "\u2028\u2029",
	"é", "\xff", "\xe2\x80", "日本語", "\x7f", "a\"b\\c", "x\u2028y\xc3", "\U0001F600",
}

func randomString(r *rand.Rand) string {
	var b []byte
	for range r.IntN(4) {
		if r.IntN(3) == 0 {
			b = append(b, byte(r.UintN(256)))
		} else {
			b = append(b, awkwardStrings[r.IntN(len(awkwardStrings))]...)
		}
	}
	return string(b)
}

// fill sets v (settable) to a random value, zero values (nil maps, empty maps, nil
// pointers, empty strings) among them; a field of a kind it does not know fails the test, so
// that a field added to one of the SDK's written types is noticed here.
func fill(t *testing.T, v reflect.Value, r *rand.Rand) {
	t.Helper()
	if r.IntN(5) == 0 {
		v.SetZero()
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(randomString(r))
	case reflect.Int64:
		v.SetInt(r.Int64N(1<<40) - 1<<39)
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(t, p.Elem(), r)
		v.Set(p)
	case reflect.Slice:
		n := r.IntN(3)
		s := reflect.MakeSlice(v.Type(), n, n)
		if v.Type().Elem().Kind() == reflect.Uint8 {
			for i := range n {
				s.Index(i).SetUint(uint64(r.UintN(256)))
			}
		} else {
			for i := range n {
				fill(t, s.Index(i), r)
			}
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range r.IntN(4) {
			k := reflect.New(v.Type().Key()).Elem()
			fill(t, k, r)
			e := reflect.New(v.Type().Elem()).Elem()
			fill(t, e, r)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(t, v.Field(i), r)
		}
	default:
		t.Fatalf("fill does not know %s (%s): does write.go write it?", v.Type(), v.Kind())
	}
}

func TestTheSDKWritesItsTypesAsEncodingJSONDoes(t *testing.T) {
	check := func(v any) {
		t.Helper()
		b, ok := ownJSON(v)
		if !ok {
			t.Fatalf("%T is not written by the SDK", v)
		}
		want := encodingJSON(t, v)
		if got := string(b); got != want {
			t.Fatalf("%T %+v:\n the SDK wrote  %s\n encoding/json %s", v, v, got, want)
		}
		if got, err := marshal(v); err != nil || got != want {
			t.Fatalf("marshal(%T) = %s, %v; encoding/json writes %s", v, got, err, want)
		}
	}
	check((*ConfigMap)(nil))
	check((*Namespace)(nil))
	check(&ConfigMap{})
	check(&Namespace{})
	check(&ConfigMap{Data: map[string]string{}, BinaryData: map[string][]byte{"nil": nil, "empty": {}}})
	for _, s := range awkwardStrings {
		check(&ConfigMap{TypeMeta: TypeMeta{Kind: s}, ObjectMeta: ObjectMeta{Name: s, Labels: map[string]string{s: s}},
			Data: map[string]string{s: s, s + "z": ""}})
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		var c ConfigMap
		fill(t, reflect.ValueOf(&c).Elem(), r)
		check(&c)
		var n Namespace
		fill(t, reflect.ValueOf(&n).Elem(), r)
		check(&n)
	}
}

// Each field alone, so that a field write.go leaves out fails with its name in the message
// rather than only at random.
func TestEveryFieldOfTheSDKsWrittenTypesIsWritten(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var walk func(v reflect.Value, path string, root any)
	walk = func(v reflect.Value, path string, root any) {
		for i := range v.NumField() {
			f, sf := v.Field(i), v.Type().Field(i)
			if f.Kind() == reflect.Struct {
				walk(f, path+"."+sf.Name, root)
				continue
			}
			for f.IsZero() {
				fill(t, f, r)
			}
			if got, _ := ownJSON(root); string(got) != encodingJSON(t, root) {
				t.Fatalf("with %s set, the SDK wrote %s; encoding/json writes %s", path+"."+sf.Name, got, encodingJSON(t, root))
			}
		}
	}
	for _, root := range []any{&ConfigMap{}, &Namespace{}, &ConfigMap{ObjectMeta: ObjectMeta{
		OwnerReferences: []OwnerReference{{}}}}} {
		walk(reflect.ValueOf(root).Elem(), reflect.TypeOf(root).Elem().Name(), root)
	}
}

func FuzzTheSDKWritesStringsAsEncodingJSONDoes(f *testing.F) {
	for _, s := range awkwardStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c := &ConfigMap{ObjectMeta: ObjectMeta{Name: s, Annotations: map[string]string{s: s}}}
		if got, want := string(appendConfigMap(nil, c)), encodingJSON(t, c); got != want {
			t.Fatalf("%q: the SDK wrote %s; encoding/json writes %s", s, got, want)
		}
	})
}

// A plugin's type that embeds one of the SDK's written types, or their metadata, has fields
// of its own: marshal leaves it to encoding/json, which writes them all (namespace-defaults'
// and configmap-mirror's objects are of this shape).
func TestTypesEmbeddingTheSDKsWrittenTypesAreWrittenWhole(t *testing.T) {
	type owned struct {
		TypeMeta
		ObjectMeta `json:"metadata"`
		Spec       any `json:"spec"`
	}
	type mirrored struct {
		ConfigMap
		Extra string `json:"extra"`
	}
	for _, v := range []any{
		&owned{TypeMeta{"v1", "ResourceQuota"}, ObjectMeta{Name: "q"}, map[string]any{"hard": 1}},
		&mirrored{ConfigMap{TypeMeta: TypeMeta{"v1", "ConfigMap"}, Data: map[string]string{"a": "b"}}, "kept"},
		ConfigMap{TypeMeta: TypeMeta{"v1", "ConfigMap"}},
	} {
		if _, ok := ownJSON(v); ok {
			t.Errorf("%T is taken as one of the SDK's own types", v)
		}
		if got, err := marshal(v); err != nil || got != encodingJSON(t, v) {
			t.Errorf("marshal(%T) = %s, %v; encoding/json writes %s", v, got, err, encodingJSON(t, v))
		}
	}
}
