package handlers

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/embedded"
)

// adminToken is a token granted every namespace that administers those of
// admin.
func adminToken(t *testing.T, admin ...string) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "admin", "ns": []string{"*"}, "ns_admin": admin, "exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestResizeSemaphore: only an administrator of the namespace resizes, a
// semaphore in use, to a limit in range; the answer is the limit in force.
func TestResizeSemaphore(t *testing.T) {
	mem := embedded.New(embedded.Options{})
	_, ts := newTestServer(t, mem)
	g, err := mem.AcquirePermit(t.Context(), locks.Key{Namespace: "a", Name: "held"},
		locks.SemaphoreRequest{AcquireRequest: locks.AcquireRequest{TTL: time.Minute, Subject: "t"}, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.ReleasePermit(t.Context(), locks.Key{Namespace: "a", Name: "held"}, g.Token) })

	for name, tc := range map[string]struct {
		token, path, body string
		status            int
		want              string // the body's code, or its JSON
		detail            string // in the detail
	}{
		"administrator": {adminToken(t, "a"), "/semaphores/a/held/limit", `{"limit":3}`, http.StatusOK,
			`{"held":1,"limit":3,"semaphore":"a/held","waiters":0}`, ""},
		"not an administrator": {testToken(t), "/semaphores/a/held/limit", `{"limit":3}`, http.StatusForbidden,
			"forbidden", `must administer namespace "a"`},
		"administrator of another namespace": {adminToken(t, "b"), "/semaphores/a/held/limit", `{"limit":3}`, http.StatusForbidden,
			"forbidden", `must administer namespace "a"`},
		"limit 0":           {adminToken(t, "a"), "/semaphores/a/held/limit", `{"limit":0}`, http.StatusBadRequest, "invalid_request", "limit"},
		"limit above most":  {adminToken(t, "a"), "/semaphores/a/held/limit", `{"limit":10001}`, http.StatusBadRequest, "invalid_request", "limit"},
		"no body":           {adminToken(t, "a"), "/semaphores/a/held/limit", ``, http.StatusBadRequest, "invalid_request", "limit"},
		"idle semaphore":    {adminToken(t, "a"), "/semaphores/a/idle/limit", `{"limit":3}`, http.StatusNotFound, "not_held", "idle"},
		"invalid namespace": {adminToken(t, "*"), "/semaphores/a%20b/held/limit", `{"limit":3}`, http.StatusBadRequest, "invalid_request", ""},
	} {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), "PUT", ts.URL+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+tc.token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, body, tc.status)
			}
			if tc.status == http.StatusOK {
				if got := strings.TrimSpace(string(body)); got != tc.want {
					t.Fatalf("got %s, want %s", got, tc.want)
				}
				return
			}
			var p Problem
			if err := json.Unmarshal(body, &p); err != nil || string(p.Code) != tc.want || !strings.Contains(p.Detail, tc.detail) {
				t.Fatalf("got %s (%v), want code %s with %q in the detail", body, err, tc.want, tc.detail)
			}
		})
	}
}
