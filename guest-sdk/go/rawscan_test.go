package wasmop

import (
	"encoding/json"
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
	o.raw = []byte(text)
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
	if !scanRaw([]byte(rawObjects[0]), &o) {
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
