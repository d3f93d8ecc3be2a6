package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/jsonkeys"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/embedded"
)

// fuzzMaxTTL is the max TTL of the gateway under fuzzing.
const fuzzMaxTTL = time.Minute

// fuzzGateway is the whole HTTP surface on the embedded backend, served
// without a network so that each input costs microseconds.
func fuzzGateway(f *testing.F) (http.Handler, *embedded.Backend, string) {
	f.Helper()
	mem := embedded.New(embedded.Options{})
	_, h := newTestHandler(f, Config{Backend: mem, MaxTTL: fuzzMaxTTL, MaxWait: time.Second})
	tok := "Bearer " + testToken(&testing.T{})
	return h, mem, tok
}

// serve runs one request through h and returns the recorded response.
func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// FuzzLockPath: whatever the namespace and name in the path, the gateway
// answers below 500, and grants a lock only to a name that matches the
// API's patterns. Lock names are checked by the router, the spec gate and
// locks.ParseKey; this holds them to one answer.
func FuzzLockPath(f *testing.F) {
	for _, seed := range [][2]string{
		{"billing", "invoice-42"}, {"a", "b"}, {"..", ".."}, {"a", ".."}, {"a", "{x}"},
		{"a", "b/c"}, {"a", "b%2Fc"}, {"A", "b"}, {"a", "b\x00"}, {"a", "b\r\nX-Evil: 1"},
		{"a", "ｂ"}, {"а", "b"}, {"a", strings.Repeat("x", 201)}, {strings.Repeat("a", 64), "b"},
		{"a", "b:c.d_e-f"}, {"a-", "-b"}, {"", ""}, {"a", "b c"}, {"a", "%"}, {"a", "b?c=d"},
	} {
		f.Add(seed[0], seed[1], uint8(0))
	}
	h, mem, auth := fuzzGateway(f)
	methods := []string{"POST", "GET", "DELETE", "PUT"}
	f.Fuzz(func(t *testing.T, ns, name string, m uint8) {
		method := methods[int(m)%len(methods)]
		path := "/locks/" + url.PathEscape(ns) + "/" + url.PathEscape(name)
		if method == "PUT" {
			path += "/lease"
		}
		r, err := http.NewRequest(method, "http://gw"+path, nil)
		if err != nil {
			t.Skip()
		}
		r.Header.Set("Authorization", auth)
		r.Header.Set("Lock-Token", "not-a-token")
		w := serve(h, r)
		if w.Code >= 500 {
			t.Fatalf("%s %s: got %d %s, want < 500", method, path, w.Code, w.Body)
		}
		key, parseErr := locks.ParseKey(ns, name)
		if w.Code == http.StatusCreated {
			if parseErr != nil {
				t.Fatalf("%s %s: granted a lock on an invalid key: %v", method, path, parseErr)
			}
			var g AcquireLock201JSONResponse
			if err := json.Unmarshal(w.Body.Bytes(), &g); err != nil || g.Lock != key.String() {
				t.Fatalf("%s %s: grant %s, want lock %q", method, path, w.Body, key)
			}
			if _, err := mem.Release(t.Context(), key, g.Token); err != nil {
				t.Fatalf("release the fuzzed grant: %v", err)
			}
		}
		if parseErr != nil && w.Code != http.StatusBadRequest && w.Code != http.StatusNotFound && w.Code != http.StatusMethodNotAllowed {
			t.Fatalf("%s %s (invalid key): got %d %s, want 400 or 404", method, path, w.Code, w.Body)
		}
	})
}

// FuzzAcquireBody: whatever the body, an acquire answers 201, 400 or 413;
// a 201 only for a JSON object without repeated keys, with the ttl_ms it
// asked for (or the default), within the max TTL; anything else leaves the
// lock free.
func FuzzAcquireBody(f *testing.F) {
	for _, seed := range []string{
		``, ` `, `{}`, `{"ttl_ms":5000}`, `{"ttl_ms":5000,"wait_ms":0,"owner":"me"}`,
		`{"ttl_ms":1000,"ttl_ms":3600000}`, `{"ttl_ms":-1}`, `{"ttl_ms":0}`, `{"ttl_ms":9223372036854775807}`,
		`{"ttl_ms":9223372036854775808}`, `{"ttl_ms":1e3}`, `{"ttl_ms":1.0}`, `{"ttl_ms":"5"}`, `{"ttl_ms":null}`,
		`{"wait_ms":-9223372036854775808}`, `{"owner":"\u0000\u202e"}`, `{"owner":{"a":1}}`, `[]`, `null`,
		`{"TTL_MS":5}`, `{"ttl_ms":5000}{"ttl_ms":1}`, `{"ttl_ms":5000} x`, `{"a":{"b":{"c":[[[[]]]]}}}`,
		"\xff\xfe{", `{"ttl_ms":5000,}`, `{"ttl\u005fms":1,"ttl_ms":2}`,
	} {
		f.Add([]byte(seed))
	}
	h, mem, auth := fuzzGateway(f)
	key := locks.Key{Namespace: "fz", Name: "body"}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, _ := http.NewRequest("POST", "http://gw/locks/fz/body", bytes.NewReader(body))
		r.Header.Set("Authorization", auth)
		w := serve(h, r)
		switch w.Code {
		case http.StatusCreated:
			var g AcquireLock201JSONResponse
			if err := json.Unmarshal(w.Body.Bytes(), &g); err != nil {
				t.Fatalf("201 with an undecodable body %s", w.Body)
			}
			// A lease of a few ms may be over already: ErrNotHolder is fine.
			if _, err := mem.Release(t.Context(), key, g.Token); err != nil && !errors.Is(err, locks.ErrNotHolder) {
				t.Fatalf("release: %v", err)
			}
			if _, dup := jsonkeys.Duplicate(body); dup {
				t.Fatalf("body %q has a repeated key, but got 201", body)
			}
			if g.TtlMs < 1 || g.TtlMs > fuzzMaxTTL.Milliseconds() {
				t.Fatalf("body %q: granted ttl_ms %d outside [1, %d]", body, g.TtlMs, fuzzMaxTTL.Milliseconds())
			}
			var asked struct {
				TTL *int64 `json:"ttl_ms"`
			}
			if len(bytes.TrimSpace(body)) > 0 {
				if err := json.Unmarshal(body, &asked); err != nil {
					t.Fatalf("body %q is not a JSON object, but got 201", body)
				}
			}
			if asked.TTL != nil && *asked.TTL != g.TtlMs {
				t.Fatalf("body %q: granted ttl_ms %d, asked for %d", body, g.TtlMs, *asked.TTL)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			if _, err := mem.Inspect(t.Context(), key); !errors.Is(err, locks.ErrNotHeld) {
				t.Fatalf("body %q: refused with %d, but the lock is held (%v)", body, w.Code, err)
			}
		default:
			t.Fatalf("body %q: got %d %s, want 201, 400 or 413", body, w.Code, w.Body)
		}
	})
}
