package handlers

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/lockgate/lockgate/locks"
)

func TestDuplicateKey(t *testing.T) {
	for name, tc := range map[string]struct {
		in      string
		wantKey string
		wantDup bool
	}{
		"none":                {in: `{"ttl_ms":1,"wait_ms":2}`},
		"top level":           {in: `{"ttl_ms":1,"ttl_ms":2}`, wantKey: "ttl_ms", wantDup: true},
		"after nested object": {in: `{"a":{"b":1},"a":2}`, wantKey: "a", wantDup: true},
		"nested":              {in: `{"a":{"b":1,"b":2}}`, wantKey: "b", wantDup: true},
		"in an array":         {in: `[{"x":1},{"x":1,"x":2}]`, wantKey: "x", wantDup: true},
		"same key, siblings":  {in: `[{"x":1},{"x":2}]`},
		"strings as values":   {in: `{"a":"a","b":"a"}`},
		"array of strings":    {in: `{"a":["a","a"],"b":1}`},
		"escaped equal keys":  {in: `{"ttl_ms":1,"ttl\u005fms":2}`, wantKey: "ttl_ms", wantDup: true},
		"empty":               {in: ``},
		"malformed":           {in: `{"a":`},
		"scalar":              {in: `5`},
	} {
		t.Run(name, func(t *testing.T) {
			key, dup := duplicateKey([]byte(tc.in))
			if key != tc.wantKey || dup != tc.wantDup {
				t.Fatalf("duplicateKey(%s): got %q, %v; want %q, %v", tc.in, key, dup, tc.wantKey, tc.wantDup)
			}
		})
	}
}

func TestTrailingData(t *testing.T) {
	for in, want := range map[string]bool{
		`{"ttl_ms":1}`:             false,
		"{\"ttl_ms\":1} \n\t":      false,
		`{"ttl_ms":1}{"ttl_ms":2}`: true,
		`{"ttl_ms":1} x`:           true,
		`{"ttl_ms":1} 5`:           true,
		`{"ttl_ms":1}]`:            true,
		`{"ttl_ms":`:               false,
		``:                         false,
	} {
		if got := trailingData([]byte(in)); got != want {
			t.Errorf("trailingData(%q): got %v, want %v", in, got, want)
		}
	}
}

// TestDuplicateJSONKeysRefused: a body that names a field twice is a 400
// and takes no lock, on acquire and on renew.
func TestDuplicateJSONKeysRefused(t *testing.T) {
	mem := locks.NewMemory()
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

// FuzzScanFlat: where scanFlat answers, it answers as duplicateKey and
// trailingData do.
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
		if wantKey, wantDup := duplicateKey(data); key != wantKey || dup != wantDup {
			t.Errorf("scanFlat(%q): got %q, %v; duplicateKey: %q, %v", data, key, dup, wantKey, wantDup)
		}
		if trailingData(data) {
			t.Errorf("scanFlat(%q) answered, but trailingData finds data after the object", data)
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
	g, err := newGate(spec, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for name, op := range g.ops {
			if op.checks.body == nil {
				continue
			}
			handled, got := op.checks.body.checkFlat(data)
			if !handled {
				continue
			}
			if want := op.checks.body.checkDecoded(data); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s, body %q: checkFlat says %v, checkDecoded %v", name, data, got, want)
			}
		}
	})
}
