package handlers

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks/embedded"
)

// TestMaxHold: max_hold_ms and the gateway's MaxHold (#39). Bad caps are
// 400 invalid_request and take nothing; a grant's answers (the acquire,
// a renewal, GET) say hold_until; a renewal that asks past the cap gets
// the lease up to it; the gateway's bound caps an acquire that asks for
// none, and cuts the default TTL to it.
func TestMaxHold(t *testing.T) {
	do := capGateway(t)
	for name, body := range map[string]string{
		"negative":             `{"max_hold_ms":-1}`,
		"zero":                 `{"max_hold_ms":0}`,
		"below the ttl":        `{"ttl_ms":5000,"max_hold_ms":4999}`,
		"above the bound":      `{"ttl_ms":5000,"max_hold_ms":10001}`,
		"ttl above the bound":  `{"ttl_ms":10001}`,
		"not a number":         `{"max_hold_ms":"2s"}`,
		"overflows a duration": `{"max_hold_ms":9223372036854775807}`,
	} {
		code, p := do("POST", "/locks/cap/bad", body, "")
		if code != http.StatusBadRequest || p["code"] != "invalid_request" {
			t.Errorf("%s: got %d %v, want 400 invalid_request", name, code, p)
		}
	}
	if code, _ := do("GET", "/locks/cap/bad", "", ""); code != http.StatusNotFound {
		t.Fatalf("after the refusals: GET %d, want 404 (nothing taken)", code)
	}

	start := time.Now()
	code, g := do("POST", "/locks/cap/asked", `{"ttl_ms":1000,"max_hold_ms":3000}`, "")
	answered := time.Now()
	if code != http.StatusCreated {
		t.Fatalf("acquire: %d %v", code, g)
	}
	// Granted between the call and its answer: 3 s after that, to the
	// millisecond (the cap is counted from the grant, not from the call;
	// measured from the call it was 1.9 ms over on a busy machine).
	until := parseTime(t, g["hold_until"])
	if until.After(answered.Add(3*time.Second+time.Millisecond)) || until.Before(start.Add(3*time.Second-time.Millisecond)) {
		t.Fatalf("hold_until %v, want about 3s after %v", until, start)
	}
	code, r := do("PUT", "/locks/cap/asked/lease", `{"ttl_ms":60000}`, g["token"].(string))
	if code != http.StatusOK || r["hold_until"] == nil || r["expires_at"] != r["hold_until"] || r["ttl_ms"].(float64) >= 60000 {
		t.Fatalf("renew asking for 60s under a 3s cap: %d %v, want the lease up to hold_until", code, r)
	}
	if parseTime(t, r["hold_until"]).After(until) {
		t.Fatalf("renewal's hold_until %v after the acquire's %v", r["hold_until"], until)
	}
	code, info := do("GET", "/locks/cap/asked", "", "")
	holders, _ := info["holders"].([]any)
	if code != http.StatusOK || info["hold_until"] == nil || len(holders) != 1 || holders[0].(map[string]any)["hold_until"] == nil {
		t.Fatalf("GET: %d %v, want hold_until on the lock and its holder", code, info)
	}
	if code, p := do("POST", "/locks/cap/asked", `{"max_hold_ms":5000}`, g["token"].(string)); code != http.StatusBadRequest {
		t.Fatalf("a re-entry with max_hold_ms: %d %v, want 400", code, p)
	}

	code, p := do("POST", "/semaphores/cap/pool", `{"limit":2,"ttl_ms":1000,"max_hold_ms":3000}`, "")
	if code != http.StatusCreated || p["hold_until"] == nil {
		t.Fatalf("a permit with max_hold_ms: %d %v, want hold_until", code, p)
	}
	code, r = do("PUT", "/semaphores/cap/pool/lease", `{"ttl_ms":60000}`, p["token"].(string))
	if code != http.StatusOK || r["hold_until"] == nil || r["expires_at"] != r["hold_until"] {
		t.Fatalf("renew a permit past its cap: %d %v, want the lease up to hold_until", code, r)
	}
	if code, p := do("POST", "/semaphores/cap/pool", `{"limit":2,"ttl_ms":1000,"max_hold_ms":999}`, ""); code != http.StatusBadRequest {
		t.Fatalf("a permit's cap below its ttl: %d %v, want 400", code, p)
	}

	// The gateway's bound: an acquire without max_hold_ms gets it, and
	// the default TTL (30s) is cut to it.
	start = time.Now()
	code, g = do("POST", "/locks/cap/bound", ``, "")
	answered = time.Now()
	if code != http.StatusCreated || g["ttl_ms"].(float64) != 10000 {
		t.Fatalf("acquire under --max-hold 10s: %d %v, want ttl_ms 10000", code, g)
	}
	if until := parseTime(t, g["hold_until"]); until.After(answered.Add(10*time.Second+time.Millisecond)) || until.Before(start.Add(10*time.Second-time.Millisecond)) {
		t.Fatalf("hold_until %v, want about 10s after %v", until, start)
	}
}

func parseTime(t *testing.T, v any) time.Time {
	t.Helper()
	s, _ := v.(string)
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("a time %v: %v", v, err)
	}
	return tm
}

// capGateway starts a gateway whose --max-hold is 10s, and returns how
// to call it: a call's status and JSON body.
func capGateway(t *testing.T) func(method, path, body, lockToken string) (int, map[string]any) {
	_, h := newTestHandler(t, Config{Backend: embedded.New(embedded.Options{}), MaxHold: 10 * time.Second})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	auth := "Bearer " + testToken(t)
	do := func(method, path, body, lockToken string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, ts.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", auth)
		if lockToken != "" {
			req.Header.Set("Lock-Token", lockToken)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	return do
}

// TestLockSetMaxHold: a lock set's grants are capped as any grant is: by
// the gateway's --max-hold, or by the set's max_hold_ms under it; each
// lock's answer (the acquire, a renewal) says hold_until, and a renewal
// that asks past the cap gets the lease up to it.
func TestLockSetMaxHold(t *testing.T) {
	do := capGateway(t)
	for name, body := range map[string]string{
		"below the ttl":       `{"locks":"cap/s1,cap/s2","ttl_ms":5000,"max_hold_ms":4999}`,
		"above the bound":     `{"locks":"cap/s1,cap/s2","ttl_ms":5000,"max_hold_ms":10001}`,
		"ttl above the bound": `{"locks":"cap/s1,cap/s2","ttl_ms":10001}`,
		"zero":                `{"locks":"cap/s1,cap/s2","max_hold_ms":0}`,
	} {
		if code, p := do("POST", "/lock-sets", body, ""); code != http.StatusBadRequest || p["code"] != "invalid_request" {
			t.Errorf("%s: got %d %v, want 400 invalid_request", name, code, p)
		}
	}
	for _, c := range []struct {
		body  string
		cap   time.Duration
		ttlMs float64
	}{
		{`{"locks":"cap/s1,cap/s2"}`, 10 * time.Second, 10000}, // the bound, and the default TTL cut to it
		{`{"locks":"cap/s3,cap/s4","ttl_ms":1000,"max_hold_ms":3000}`, 3 * time.Second, 1000},
	} {
		start := time.Now()
		code, g := do("POST", "/lock-sets", c.body, "")
		answered := time.Now()
		if code != http.StatusCreated || g["ttl_ms"] != c.ttlMs {
			t.Fatalf("%s: %d %v, want 201 with ttl_ms %v", c.body, code, g, c.ttlMs)
		}
		ls, _ := g["locks"].([]any)
		for _, l := range ls {
			l := l.(map[string]any)
			if l["hold_until"] == nil {
				t.Fatalf("%s: lock %v answered no hold_until", c.body, l)
			}
			if until := parseTime(t, l["hold_until"]); until.After(answered.Add(c.cap+time.Millisecond)) || until.Before(start.Add(c.cap-time.Millisecond)) {
				t.Fatalf("%s: hold_until %v, want about %v after %v", c.body, until, c.cap, start)
			}
		}
		names := strings.Split(strings.SplitN(c.body, `"`, 5)[3], ",")
		code, r := do("PUT", "/lock-sets/lease?locks="+strings.Join(names, ","), `{"ttl_ms":60000}`, g["token"].(string))
		if code != http.StatusOK {
			t.Fatalf("renew the set: %d %v", code, r)
		}
		for _, l := range r["locks"].([]any) {
			l := l.(map[string]any)
			if l["hold_until"] == nil || l["expires_at"] != l["hold_until"] {
				t.Fatalf("renew a set for 60s under a cap of %v: lock %v, want its lease up to hold_until", c.cap, l)
			}
		}
	}
}
