package safety

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
)

// TestHostileInput: nasty input over HTTP gets a 4xx, quickly, never a 5xx
// or a hang, and changes no lock: the lock held before is held by the same
// grant after, and no other lock appears.
func TestHostileInput(t *testing.T) {
	rs := redistest.Start(t)
	gw := startGateway(t, "--redis-url", rs.URL(), "--max-ttl", "1m", "--max-wait", "10s")
	c := newClient(t, gw)
	held := c.mustAcquire(t, "hostile/held", time.Minute)
	rc := rs.Client(t)
	// Every script call leaves its reply for a while (lua/once.lua): those
	// records are the calls', and not counted.
	stateKeys := func() int {
		keys, err := rc.Keys(t.Context(), "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return len(slices.DeleteFunc(keys, func(k string) bool { return strings.Contains(k, "}:c:") }))
	}
	keysBefore := stateKeys()
	auth := []string{"Authorization", c.auth}
	tok := []string{"Lock-Token", held.Token}
	for name, tc := range map[string]struct {
		method, path, body string
		headers            []string
	}{
		"huge name":                {"POST", "/locks/hostile/" + strings.Repeat("a", 10000), "", nil},
		"name of 201 chars":        {"POST", "/locks/hostile/" + strings.Repeat("a", 201), "", nil},
		"dot dot":                  {"POST", "/locks/hostile/..", "", nil},
		"escaped dot dot":          {"POST", "/locks/hostile/%2e%2e", "", nil},
		"dot dot namespace":        {"POST", "/locks/../held", "", nil},
		"escaped slash":            {"DELETE", "/locks/hostile%2Fheld/x", "", tok},
		"hash tag braces":          {"POST", "/locks/hostile/%7Bheld%7D", "", nil},
		"brace namespace":          {"POST", "/locks/%7Bhostile%7D/held", "", nil},
		"control byte":             {"POST", "/locks/hostile/a%00b", "", nil},
		"newline":                  {"POST", "/locks/hostile/a%0D%0Ab", "", nil},
		"unicode look-alike":       {"DELETE", "/locks/hostile/h%D0%B5ld", "", tok}, // Cyrillic е
		"fullwidth look-alike":     {"POST", "/locks/hostile/%EF%BD%88eld", "", nil},
		"right-to-left override":   {"POST", "/locks/hostile/%E2%80%AEdleh", "", nil},
		"1 MiB body":               {"POST", "/locks/hostile/big", `{"owner":"` + strings.Repeat("x", 1<<20) + `"}`, nil},
		"deep JSON":                {"POST", "/locks/hostile/deep", strings.Repeat("[", 15000), nil},
		"duplicate keys":           {"POST", "/locks/hostile/dup", `{"ttl_ms":1000,"ttl_ms":60000}`, nil},
		"two objects":              {"POST", "/locks/hostile/two", `{"ttl_ms":1000}{"ttl_ms":60000}`, nil},
		"negative ttl":             {"POST", "/locks/hostile/neg", `{"ttl_ms":-1}`, nil},
		"overflowing ttl":          {"POST", "/locks/hostile/ovf", `{"ttl_ms":9223372036854775808}`, nil},
		"max int64 ttl":            {"POST", "/locks/hostile/max", `{"ttl_ms":9223372036854775807}`, nil},
		"overflowing wait":         {"POST", "/locks/hostile/ovfw", `{"wait_ms":99999999999999999999999}`, nil},
		"negative renew ttl":       {"PUT", "/locks/hostile/held/lease", `{"ttl_ms":-60000}`, tok},
		"overflowing renew ttl":    {"PUT", "/locks/hostile/held/lease", `{"ttl_ms":9223372036854775807}`, tok},
		"huge lock token":          {"DELETE", "/locks/hostile/held", "", []string{"Lock-Token", strings.Repeat("A", 40000)}},
		"10000-dot bearer":         {"POST", "/locks/hostile/held", "", []string{"Authorization", "Bearer " + strings.Repeat(".", 10000)}},
		"huge bearer":              {"POST", "/locks/hostile/held", "", []string{"Authorization", "Bearer " + strings.Repeat("a.", 30000)}},
		"alg none":                 {"DELETE", "/locks/hostile/held", "", []string{"Authorization", "Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4IiwibnMiOlsiKiJdLCJleHAiOjk5OTk5OTk5OTl9.", "Lock-Token", held.Token}},
		"token in the query":       {"DELETE", "/locks/hostile/held?token=" + held.Token, "", nil},
		"oversized header block":   {"GET", "/locks/hostile/held", "", []string{"X-Junk", strings.Repeat("j", 128<<10)}},
		"release with wrong token": {"DELETE", "/locks/hostile/held", "", []string{"Lock-Token", "AAAAAAAAAAAAAAAAAAAAAA"}},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
			defer cancel()
			hdrs := append([]string{}, auth...)
			hdrs = append(hdrs, tc.headers...)
			r := c.do(ctx, tc.method, tc.path, tc.body, hdrs...)
			if r.err != nil && r.status == 0 {
				// A server may cut a connection that sends an absurd
				// request; a hang is what must not happen.
				if ctx.Err() != nil {
					t.Fatalf("no answer within 15s: %v", r.err)
				}
				t.Logf("connection refused the request: %v", r.err)
			} else if r.status < 400 || r.status >= 500 {
				t.Fatalf("got %s, want a 4xx", r)
			}
			if h := c.holder(t, "hostile/held"); h != held.FencingToken {
				t.Fatalf("the held lock changed: holder token %d, want %d", h, held.FencingToken)
			}
		})
	}
	if keysAfter := stateKeys(); keysAfter != keysBefore {
		t.Fatalf("Redis keys: %d before the hostile input, %d after", keysBefore, keysAfter)
	}
	if r := c.do(t.Context(), "GET", "/healthz", ""); r.status != http.StatusOK {
		t.Fatalf("healthz after the hostile input: %s", r)
	}
}
