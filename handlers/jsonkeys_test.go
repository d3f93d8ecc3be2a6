package handlers

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/lockgate/lockgate/internal/jsonkeys"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/embedded"
)

// TestDuplicateJSONKeysRefused: a body that names a field twice is a 400
// and takes no lock, on acquire and on renew.
func TestDuplicateJSONKeysRefused(t *testing.T) {
	mem := embedded.New(embedded.Options{})
	_, ts := newTestServer(t, mem)
	auth := "Bearer " + testToken(t)
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/locks/dup/a", `{"ttl_ms":1000,"ttl_ms":3600000}`},
		{"PUT", "/locks/dup/a/lease", `{"ttl_ms":1000,"ttl_ms":2000}`},
		{"POST", "/locks/dup/a", `{"ttl_ms":1000}{"ttl_ms":3600000}`},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), tc.method, ts.URL+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Authorization", auth)
		req.Header.Set("Lock-Token", "x")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s %s %s: got %d, want 400", tc.method, tc.path, tc.body, resp.StatusCode)
		}
	}
	if _, err := mem.Inspect(t.Context(), locks.Key{Namespace: "dup", Name: "a"}); err == nil {
		t.Fatal("the lock is held after a refused acquire")
	}
}

// FuzzScanFlat: where scanFlat answers, it answers as jsonkeys.Duplicate
// and jsonkeys.Trailing do.
func FuzzScanFlat(f *testing.F) {
	for _, s := range []string{`{"ttl_ms":1}`, `{"ttl_ms":1,"ttl_ms":2}`, ` {"a":"x","b":-0.5e+3, "c":true,"d":null,"a":false} ` + "\n",
		`{}`, `{"a":1}{"a":2}`, `{"a":01}`, `{"a":1.}`, `{"a":"\u0041"}`, `{"é":1,"é":2}`, `{"a":{"b":1}}`, `{"a":1,}`, `{"a" 1}`,
		`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"a":0}`, "{\"a\":\"\xff\"}", `{"a":tru}`, `{"a":-}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		key, dup, ok := scanFlat(data)
		if !ok {
			return
		}
		if wantKey, wantDup := jsonkeys.Duplicate(data); key != wantKey || dup != wantDup {
			t.Errorf("scanFlat(%q): got %q, %v; jsonkeys.Duplicate: %q, %v", data, key, dup, wantKey, wantDup)
		}
		if jsonkeys.Trailing(data) {
			t.Errorf("scanFlat(%q) answered, but jsonkeys.Trailing finds data after the object", data)
		}
	})
}

// FuzzCheckFlat: for every body of every operation, checking a flat body
// without decoding it says what checking the decoded body says.
func FuzzCheckFlat(f *testing.F) {
	for _, s := range []string{`{"ttl_ms":1}`, `{"ttl_ms":0}`, `{"ttl_ms":-1}`, `{"ttl_ms":1.5}`, `{"ttl_ms":1e3}`, `{"ttl_ms":1e400}`,
		`{"ttl_ms":"1"}`, `{"ttl_ms":null}`, `{"ttl_ms":true}`, `{"owner":"é"}`, "{\"owner\":\"\xff\"}", `{"owner":""}`,
		`{"wait_ms":5,"ttl_ms":5,"owner":"x"}`, `{"zzz":1,"ttl_ms":-1}`, `{}`, `{"a":1,"a":2}`} {
		f.Add([]byte(s))
	}
	spec, err := GetSpec()
	if err != nil {
		f.Fatal(err)
	}
	g, err := newGate(spec, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for name, op := range g.ops {
			if op.checks.body == nil {
				continue
			}
			gotValue, handled, got := op.checks.body.checkFlat(data)
			if !handled {
				continue
			}
			wantValue, want := op.checks.body.checkDecoded(data)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s, body %q: checkFlat says %v, checkDecoded %v", name, data, got, want)
			}
			if !reflect.DeepEqual(gotValue, wantValue) {
				t.Errorf("%s, body %q: checkFlat decodes %#v, checkDecoded %#v", name, data, gotValue, wantValue)
			}
		}
	})
}
