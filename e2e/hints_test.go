package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/internal/redistest"
)

// TestErrorsSayWhatToDo: each refusal a new user meets first names the
// limit, the flag that sets it, or the fix (issue 23): never only "invalid"
// or a regexp.
func TestErrorsSayWhatToDo(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, "--redis-url", redistest.Start(t).URL(), "--max-ttl", "1m", "--max-wait", "10s", "--max-ticket-wait", "20m")
	auth := bearer(token(t, nil))
	otherKey, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "tester", "ns": []string{"*"}, "exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString([]byte("a-key-from-an-earlier-dev-run-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		method, path, body string
		headers            []string
		status             int
		code               string
		want               []string
	}{
		"ttl over max": {"POST", "/locks/a/b", `{"ttl_ms":60001}`, auth, 400, "invalid_request",
			[]string{"between 1 and 60000", "--max-ttl"}},
		"renew ttl over max": {"PUT", "/locks/a/b/lease", `{"ttl_ms":60001}`, with(auth, []string{"Lock-Token", "t"}), 400, "invalid_request",
			[]string{"between 1 and 60000", "--max-ttl"}},
		"wait over max": {"POST", "/locks/a/b", `{"wait_ms":10001}`, auth, 400, "invalid_request",
			[]string{"between 0 and 10000", "--max-wait", "Prefer: respond-async", "--max-ticket-wait"}},
		"semaphore wait over max": {"POST", "/semaphores/a/b", `{"limit":2,"wait_ms":10001}`, auth, 400, "invalid_request",
			[]string{"between 0 and 10000", "--max-wait"}},
		"ticket wait over max": {"POST", "/locks/a/b", `{"wait_ms":1200001}`, with(auth, respondAsync), 400, "invalid_request",
			[]string{"between 0 and 1200000", "--max-ticket-wait"}},
		"truncated json": {"POST", "/locks/a/b", `{"ttl_ms":`, auth, 400, "invalid_request",
			[]string{"not valid JSON", "ends at line 1, column 11", `{"ttl_ms":60000}`}},
		"form body": {"POST", "/locks/a/b", "ttl_ms=5000", auth, 400, "invalid_request",
			[]string{"not valid JSON", "line 1, column 2"}},
		"bad json on line 2": {"POST", "/locks/a/b", "{\"ttl_ms\":5000,\n \"owner\": x}", auth, 400, "invalid_request",
			[]string{"unexpected 'x' at line 2, column 11"}},
		"idempotency key": {"POST", "/locks/a/b", "", with(auth, []string{"Idempotency-Key", `"open`}), 400, "invalid_request",
			[]string{"Idempotency-Key header must be 1 to 255 visible ASCII characters"}},
		"namespace": {"POST", "/locks/Billing/b", "", auth, 400, "invalid_request",
			[]string{"lower-case letters"}},
		"name with a slash": {"POST", "/locks/demo/a/b", "", auth, 404, "not_found",
			[]string{"names cannot contain '/'", "/locks/{namespace}/{name}"}},
		"semaphore name with a slash": {"POST", "/semaphores/demo/a/b", `{"limit":2}`, auth, 404, "not_found",
			[]string{"names cannot contain '/'", "/semaphores/{namespace}/{name}"}},
		"token of another key": {"POST", "/locks/a/b", "", bearer(otherKey), 401, "unauthorized",
			[]string{"signed with another key", "--dev"}},
	} {
		t.Run(name, func(t *testing.T) {
			p := wantProblem(t, call(t, tc.method, gw.URL+tc.path, tc.body, tc.headers...), tc.status, tc.code)
			for _, w := range tc.want {
				if !strings.Contains(p.Detail, w) {
					t.Errorf("detail %q: want it to say %q", p.Detail, w)
				}
			}
			if strings.Contains(p.Detail, "^") || strings.Contains(p.Detail, "json:") {
				t.Errorf("detail %q shows a regexp or a library's words", p.Detail)
			}
		})
	}
}
