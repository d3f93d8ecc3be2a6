package e2e

import (
	"net/http"
	"strings"
	"testing"
)

// TestPercentEncodedNames: a namespace or name is matched after
// percent-decoding, as RFC 3986 says an encoded unreserved character is
// the character itself: openapi-fetch sends a:b as a%3Ab. So
// /locks/demo/a%3Ab is lock demo/a:b, %41 is A, and a token's namespace
// grant is checked on the decoded namespace. What decodes to a name the
// grammar refuses (a '/', a '%', a space, a non-ASCII letter, bytes that
// are no UTF-8) is a 400 problem naming the parameter, as before.
func TestPercentEncodedNames(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, b.args(t)...)
		auth := bearer(token(t, nil))
		demoOnly := bearer(token(t, map[string]any{"ns": []string{"demo"}}))

		for name, tc := range map[string]struct{ raw, lock, plain string }{
			"colon":            {"/locks/demo/a%3Ab", "demo/a:b", "/locks/demo/a:b"},
			"unreserved A":     {"/locks/demo/%41", "demo/A", "/locks/demo/A"},
			"every char":       {"/locks/%64%65%6D%6F/%78%2E%79%5F%7A%2D1", "demo/x.y_z-1", "/locks/demo/x.y_z-1"},
			"lower-case hex":   {"/locks/demo/b%3ac", "demo/b:c", "/locks/demo/b:c"},
			"encoded ns too":   {"/locks/d%65mo/c%3Ad", "demo/c:d", "/locks/demo/c:d"},
			"plain, encoded 2": {"/locks/demo/e:f", "demo/e:f", "/locks/demo/e%3Af"},
		} {
			t.Run(name, func(t *testing.T) {
				// The demo-only token: the grant is checked on the decoded namespace.
				var g grant
				wantJSON(t, call(t, "POST", gw.URL+tc.raw, `{"ttl_ms":60000,"value":"v1"}`, demoOnly...), http.StatusCreated, &g)
				if g.Lock != tc.lock {
					t.Fatalf("POST %s: lock %q, want %q", tc.raw, g.Lock, tc.lock)
				}
				var info struct {
					Lock         string  `json:"lock"`
					FencingToken int64   `json:"fencing_token"`
					Value        *string `json:"value"`
				}
				wantJSON(t, call(t, "GET", gw.URL+tc.plain, "", auth...), http.StatusOK, &info)
				if info.Lock != tc.lock || info.FencingToken != g.FencingToken || info.Value == nil || *info.Value != "v1" {
					t.Fatalf("GET %s: %+v, want %s held with fencing token %d and value v1", tc.plain, info, tc.lock, g.FencingToken)
				}
				// Held under either spelling: the other one waits for it.
				wantProblem(t, call(t, "POST", gw.URL+tc.plain, `{"ttl_ms":60000}`, auth...), http.StatusConflict, "lock_held")
				holder := with(auth, []string{"Lock-Token", g.Token})
				wantJSON(t, call(t, "PUT", gw.URL+tc.raw+"/lease", `{"ttl_ms":30000}`, holder...), http.StatusOK, &struct{}{})
				wantJSON(t, call(t, "PUT", gw.URL+tc.plain+"/value", `{"value":"v2"}`, holder...), http.StatusOK, &struct{}{})
				wantJSON(t, call(t, "GET", gw.URL+tc.raw, "", auth...), http.StatusOK, &info)
				if info.Value == nil || *info.Value != "v2" {
					t.Fatalf("GET %s after PUT value: %+v, want value v2", tc.raw, info)
				}
				if r := call(t, "DELETE", gw.URL+tc.raw, "", holder...); r.status != http.StatusNoContent && r.status != http.StatusOK {
					t.Fatalf("DELETE %s: got %d %s, want 204", tc.raw, r.status, r.body)
				}
				wantProblem(t, call(t, "GET", gw.URL+tc.plain, "", auth...), http.StatusNotFound, "not_held")
			})
		}

		t.Run("semaphore", func(t *testing.T) {
			var g struct {
				Semaphore string `json:"semaphore"`
			}
			wantJSON(t, call(t, "POST", gw.URL+"/semaphores/d%65mo/pool%3A1", `{"limit":2,"ttl_ms":60000}`, demoOnly...), http.StatusCreated, &g)
			if g.Semaphore != "demo/pool:1" {
				t.Fatalf("semaphore: %q, want demo/pool:1", g.Semaphore)
			}
			var sem struct {
				Holders []struct{} `json:"holders"`
			}
			wantJSON(t, call(t, "GET", gw.URL+"/semaphores/demo/pool:1", "", auth...), http.StatusOK, &sem)
			if len(sem.Holders) != 1 {
				t.Fatalf("GET /semaphores/demo/pool:1: %d holders, want 1", len(sem.Holders))
			}
		})

		// The grant is checked on the decoded namespace: an encoded other
		// namespace is still another namespace.
		wantProblem(t, call(t, "POST", gw.URL+"/locks/%6Fther/x", "", demoOnly...), http.StatusForbidden, "forbidden")
		wantProblem(t, call(t, "GET", gw.URL+"/locks/%6Fther?limit=5", "", demoOnly...), http.StatusForbidden, "forbidden")

		for name, tc := range map[string]struct{ path, param string }{
			"encoded slash":        {"/locks/demo/a%2Fb", "name"},
			"encoded slash, ns":    {"/locks/de%2Fmo/a", "namespace"},
			"encoded dot-dot":      {"/locks/demo/%2E%2E", "name"},
			"encoded percent":      {"/locks/demo/a%25b", "name"},
			"encoded percent, 3A":  {"/locks/demo/a%253Ab", "name"},
			"encoded space":        {"/locks/demo/a%20b", "name"},
			"non-ASCII letter":     {"/locks/demo/caf%C3%A9", "name"},
			"non-ASCII, raw bytes": {"/locks/demo/caf\u00e9", "name"},
			"not UTF-8":            {"/locks/demo/a%FFb", "name"},
			"encoded NUL":          {"/locks/demo/a%00b", "name"},
			"upper-case ns":        {"/locks/%44emo/a", "namespace"},
			"semaphore slash":      {"/semaphores/demo/a%2Fb", "name"},
		} {
			t.Run(name, func(t *testing.T) {
				for _, method := range []string{"POST", "GET"} {
					p := wantProblem(t, call(t, method, gw.URL+tc.path, "", auth...), http.StatusBadRequest, "invalid_request")
					if !strings.Contains(p.Detail, `"`+tc.param+`"`) {
						t.Fatalf("%s %s: detail %q, want it to name %q", method, tc.path, p.Detail, tc.param)
					}
				}
			})
		}
	})
}
