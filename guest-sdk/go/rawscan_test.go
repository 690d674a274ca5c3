package wasmop

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

// rawObjects are JSON objects parseRaw must read as encoding/json does: the host's usual
// text, and every way a key or value can differ from it.
var rawObjects = []string{
	`{"apiVersion":"demo.wasmop.dev/v1","kind":"Database","metadata":{"name":"orders","namespace":"shop","uid":"u-1","resourceVersion":"42","generation":3,"creationTimestamp":"2025-01-01T00:00:00Z","labels":{"app":"shop","tier":"db"},"annotations":{"note":"a \"quoted\" \\ line\nnext"},"ownerReferences":[{"apiVersion":"v1","kind":"Namespace","name":"shop","uid":"n-1","controller":true}],"finalizers":["wasmop.dev/cleanup"],"managedFields":[{"manager":"kubectl","operation":"Update","fieldsV1":{"f:spec":{"f:port":{}}}}]},"spec":{"engine":"postgres","port":5432,"list":[1,2.5,-3e2,true,false,null,"}]"]},"status":{"conditions":[]}}`,
	` { "kind" : "ConfigMap" , "metadata" : { "name" : "a\u00e9\ud83d\ude00" , "labels" : { } , "finalizers" : [ ] } } `,
	`{}`,
	`{"metadata":null,"kind":null}`,
	`{"metadata":{"labels":null,"annotations":null,"finalizers":null,"ownerReferences":null,"generation":null,"name":null}}`,
	`{"metadata":{"generation":-0}}`,
	`{"metadata":{"generation":9223372036854775807}}`,
	// Keys that match a field but for case, and keys given twice.
	`{"Kind":"Upper","metadata":{"Name":"upper","NAMESPACE":"ns"}}`,
	`{"kind":"a","Kind":"b"}`,
	"{\"\u212aind\":\"kelvin\",\"metadata\":{\"\u017fpecial\":1,\"name\u017f\":\"x\"}}",
	`{"metadata":{"name":"a"},"metadata":{"uid":"b"}}`,
	`{"metadata":{"labels":{"a":"1"},"labels":{"b":"2"}}}`,
	`{"metadata":{"labels":{"a":"1","a":"2"}}}`,
	// Strings that are not valid UTF-8, and escapes that are not.
	"{\"kind\":\"bad\xffbyte\",\"metadata\":{\"labels\":{\"k\xfe\":\"v\"}}}",
	`{"kind":"lone \ud800 surrogate"}`,
	// Values of another type than the field's (encoding/json's error is the answer).
	`{"kind":1}`,
	`{"metadata":[]}`,
	`{"metadata":{"generation":1.5}}`,
	`{"metadata":{"generation":"3"}}`,
	`{"metadata":{"generation":1e2}}`,
	`{"metadata":{"generation":99999999999999999999}}`,
	`{"metadata":{"labels":{"a":1}}}`,
	`{"metadata":{"finalizers":"x"}}`,
	`{"metadata":{"ownerReferences":{}}}`,
	// Owner references: every object a plugin owns has them.
	`{"metadata":{"ownerReferences":[]}}`,
	`{"metadata":{"ownerReferences":[null,{"apiVersion":"v1","kind":"K","name":"n","uid":"u","controller":false,"blockOwnerDeletion":null,"extra":[1]}]}}`,
	`{"metadata":{"ownerReferences":[{"uid":null,"controller":null}]}}`,
	`{"metadata":{"ownerReferences":[{"Name":"x"}]}}`,
	`{"metadata":{"ownerReferences":[{"name":"x","name":"y"}]}}`,
	`{"metadata":{"ownerReferences":[{"controller":"true"}]}}`,
	`{"metadata":{"ownerReferences":[{"controller":1}]}}`,
	`{"metadata":{"ownerReferences":[1]}}`,
	`{"metadata":{"ownerReferences":["x"]}}`,
	`{"metadata":{"ownerReferences":[[]]}}`,
	`[]`,
	`"text"`,
	`null`,
}

// unmarshalRaw is what encoding/json makes of text, as parseRaw answers it.
func unmarshalRaw(text string) (RawObject, string) {
	var o RawObject
	if err := json.Unmarshal([]byte(text), &o); err != nil {
		return RawObject{}, "cannot decode an object from the host: " + err.Error()
	}
	o.src = sourceOf(text)
	return o, ""
}

func checkParseRaw(t *testing.T, text string) {
	t.Helper()
	want, wantErr := unmarshalRaw(text)
	got, err := parseRaw(text)
	gotErr := ""
	if err != nil {
		gotErr = err.Error()
	}
	if gotErr != wantErr || !reflect.DeepEqual(got, want) {
		t.Fatalf("parseRaw(%q) = %+v, %q; encoding/json makes %+v, %q", text, got, gotErr, want, wantErr)
	}
}

func TestParseRawReadsJSONAsEncodingJSONDoes(t *testing.T) {
	for _, text := range rawObjects {
		checkParseRaw(t, text)
	}
}

func TestParseRawScansTheHostsUsualTextItself(t *testing.T) {
	var o RawObject
	if !scanRaw(sourceOf(rawObjects[0]), &o) {
		t.Fatal("the usual text went to encoding/json")
	}
}

func FuzzParseRawReadsJSONAsEncodingJSONDoes(f *testing.F) {
	for _, text := range rawObjects {
		f.Add(text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if json.Valid([]byte(text)) {
			checkParseRaw(t, text)
		}
	})
}

// skipString ends a string at the first quote that an even run of backslashes (none
// included) precedes, and answers -1 for a string that does not end.
func TestSkipStringEndsAtTheFirstUnescapedQuote(t *testing.T) {
	ends := []string{`""`, `"a"`, `"\\"`, `"\""`, `"a\\\"b"`, `"\\\\"`, `"\\\\\"\\"`, `"}]\"[{"`, `"\u0022"`}
	for _, literal := range ends {
		var s string
		if err := json.Unmarshal([]byte(literal), &s); err != nil {
			t.Fatalf("%s is no JSON string: %v", literal, err)
		}
		text := []byte(` ` + literal + `,"next":"x"}`)
		if got := skipString(text, 1); got != 1+len(literal) {
			t.Errorf("skipString(%s) = %d, want %d", text, got, 1+len(literal))
		}
	}
	for _, open := range []string{`"`, `"abc`, `"abc\"`, `"\\\"`, `"a\`} {
		if got := skipString([]byte(open), 0); got != -1 {
			t.Errorf("skipString(%s) = %d, want -1 (it does not end)", open, got)
		}
	}
}

// headed has the head's shape (headOf), as a plugin's own object types do.
type headed struct {
	TypeMeta
	ObjectMeta `json:"metadata"`
	Spec       struct {
		Engine string `json:"engine"`
		Port   int    `json:"port"`
		List   []any  `json:"list,omitempty"`
	} `json:"spec"`
	Status map[string]any `json:"status,omitempty"`
}

// headedObjects are rawObjects with a spec and status each, and texts whose other members
// differ from what the head's scanner takes.
func headedObjects() []string {
	out := append([]string(nil), rawObjects...)
	for _, text := range rawObjects {
		if len(text) > 2 && text[0] == '{' && text[len(text)-1] == '}' {
			out = append(out, `{"spec":{"engine":"pg","port":1},"status":{"x":[1]},`+text[1:])
		}
	}
	return append(out,
		`{"kind":"K","spec":{"engine":"pg","port":"1"}}`,
		`{"kind":"K","spec":{"engine":"pg"}}`,
		`{"kind":"K","spec":{"engine":"pg","port":1},"spec":{"port":2}}`,
		`{"kind":"K","SPEC":{"engine":"pg","port":1},"status":null}`,
		`{"kind":"K","sp\u0065c":{"engine":"pg","port":1}}`,
		`{"kind":"K","a\"b":1,"spec":{"engine":"pg","port":1}}`,
		`{"kind":"K","metadata":{"name":"a"},"spec":{"engine":"pg","port":1},"unknown":{"deep":[{}]}}`,
	)
}

// checkDecode decodes text into a fresh headed with decode and with decodeWhole (encoding/json
// over the whole text), which must agree, with unknown keys denied and allowed.
func checkDecode(t *testing.T, text string) {
	t.Helper()
	for _, strict := range []bool{false, true} {
		var got, want headed
		gotErr, wantErr := "", ""
		if err := decode(sourceOf(text), &got, strict); err != nil {
			gotErr = err.Error()
		}
		if err := decodeWhole(reflect.TypeFor[headed](), []byte(text), &want, strict); err != nil {
			wantErr = err.Error()
		}
		if gotErr != wantErr || (gotErr == "" && !reflect.DeepEqual(got, want)) {
			t.Fatalf("decode(%q, strict %v) = %+v, %q; encoding/json over the whole text makes %+v, %q",
				text, strict, got, gotErr, want, wantErr)
		}
	}
}

func TestDecodeOfAnObjectReadsJSONAsEncodingJSONDoes(t *testing.T) {
	for _, text := range headedObjects() {
		checkDecode(t, text)
	}
}

func TestDecodeScansTheHeadOfTheHostsUsualText(t *testing.T) {
	var o headed
	rest, m, ok := splitHead(sourceOf(rawObjects[0]), &o.TypeMeta, &o.ObjectMeta)
	if !ok || string(rest) != `{"spec":{"engine":"postgres","port":5432,"list":[1,2.5,-3e2,true,false,null,"}]"]},"status":{"conditions":[]}}` {
		t.Fatalf("splitHead = %s, %v", rest, ok)
	}
	if o.Kind != "Database" || o.Name != "orders" || o.Labels["tier"] != "db" {
		t.Fatalf("the head was not scanned: %+v", o)
	}
	// Every member, the head's too, as members splits them, for decode's check.
	if want, _ := members([]byte(rawObjects[0])); !reflect.DeepEqual(m, want) {
		t.Fatalf("splitHead's members = %q, members says %q", m, want)
	}
	if !headOf(reflect.TypeFor[headed]()).ok || !headOf(reflect.TypeFor[RawObject]()).ok {
		t.Fatal("a type with the head's shape is not taken as one")
	}
}

// A type whose keys encoding/json could match to apiVersion, kind or metadata otherwise
// than through TypeMeta and a "metadata" ObjectMeta is decoded by encoding/json alone.
func TestDecodeLeavesTypesOfAnotherShapeToEncodingJSON(t *testing.T) {
	type other struct{ Name string }
	for _, v := range []any{
		struct {
			TypeMeta
			ObjectMeta `json:"metadata"`
			Kind       string
		}{},
		struct {
			TypeMeta
			ObjectMeta `json:"metadata"`
			other
		}{},
		struct {
			TypeMeta
			ObjectMeta `json:"meta"`
		}{},
		struct {
			*TypeMeta
			ObjectMeta `json:"metadata"`
		}{},
		struct {
			TypeMeta
			Meta ObjectMeta `json:"metadata"`
			Info string     `json:"METADATA"`
		}{},
		struct {
			TypeMeta   `json:"type"`
			ObjectMeta `json:"metadata"`
		}{},
	} {
		if h := headOf(reflect.TypeOf(v)); h.ok {
			t.Errorf("%T is taken as having the head's shape: %+v", v, h)
		}
	}
}

func FuzzDecodeOfAnObjectReadsJSONAsEncodingJSONDoes(f *testing.F) {
	for _, text := range headedObjects() {
		f.Add(text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if json.Valid([]byte(text)) {
			checkDecode(t, text)
		}
	})
}

// The strings a scan reads are substrings of the host's text, not copies: a usual object
// costs a handful of allocations, however many labels and annotations it has (with a copy
// per string, a Database with 24 annotations took 71; encoding/json alone takes 14 for an
// owner reference), and changing the bytes JSON hands out changes none of them, nor what
// Decode reads.
func TestParseRawTakesItsStringsFromTheHostsText(t *testing.T) {
	text := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"orders","namespace":"shop",` +
		`"ownerReferences":[{"apiVersion":"demo.wasmop.dev/v1","kind":"Database","name":"orders","uid":"u-1",` +
		`"controller":true,"blockOwnerDeletion":true}],"annotations":{`
	for i := range 24 {
		if i > 0 {
			text += ","
		}
		text += fmt.Sprintf(`"example.com/annotation-%d":"value %d"`, i, i)
	}
	text += `}},"data":{"a":"b"}}`
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := parseRaw(text); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 12 {
		t.Errorf("parseRaw of an object with 24 annotations made %v allocations, want at most 12", allocs)
	}
	o, err := parseRaw(text)
	if err != nil {
		t.Fatal(err)
	}
	b := o.JSON()
	for i := range b {
		b[i] = 'x'
	}
	if o.Name != "orders" || o.Annotations["example.com/annotation-23"] != "value 23" {
		t.Errorf("the decoded strings changed with the text's bytes: %q %q", o.Name, o.Annotations["example.com/annotation-23"])
	}
	var cm ConfigMap
	if err := o.Decode(&cm); err != nil || cm.Name != "orders" || cm.Data["a"] != "b" || string(o.JSON()) != text {
		t.Errorf("the object changed with the bytes JSON handed out: %v %+v %s", err, cm, o.JSON())
	}
}

func TestSourceStrCopiesWhatIsNotItsText(t *testing.T) {
	src := sourceOf(`{"k":"v"}`)
	if s := src.str(src.b[2:3]); s != "k" {
		t.Errorf("a slice of the text: %q", s)
	}
	other := []byte(`{"k":"v"}`)
	if s := src.str(other[6:7]); s != "v" {
		t.Errorf("another slice: %q", s)
	}
	if s := src.str(nil); s != "" {
		t.Errorf("nothing: %q", s)
	}
}
