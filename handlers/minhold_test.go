package handlers

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks/embedded"
)

// TestMinHold: a grant with min_hold_ms, released, keeps the lock: the
// next acquire gets 409 lock_held with Retry-After up to the min hold's
// end and min_hold_until, and GET 404 not_held with the same
// min_hold_until. A min_hold_ms above the TTL cap, negative, with shared,
// with a Lock-Token is a 400.
func TestMinHold(t *testing.T) {
	_, h := newTestHandler(t, Config{Backend: embedded.New(embedded.Options{}), MaxTTL: time.Hour})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	auth := "Bearer " + testToken(t)
	do := func(method, body string, header ...string) (*http.Response, map[string]any) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, ts.URL+"/locks/mh/job", strings.NewReader(body))
		req.Header.Set("Authorization", auth)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp, m
	}

	for name, body := range map[string]string{
		"above the TTL cap": `{"min_hold_ms":3600001}`,
		"negative":          `{"min_hold_ms":-1}`,
		"shared":            `{"min_hold_ms":1000,"mode":"shared"}`,
	} {
		if resp, p := do("POST", body); resp.StatusCode != http.StatusBadRequest || p["code"] != "invalid_request" ||
			!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
			t.Errorf("%s: got %d %v, want 400 invalid_request", name, resp.StatusCode, p)
		}
	}

	start := time.Now()
	resp, g := do("POST", `{"ttl_ms":60000,"min_hold_ms":600000}`)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("acquire: got %d %v, want 201", resp.StatusCode, g)
	}
	token, _ := g["token"].(string)
	if resp, p := do("POST", `{"min_hold_ms":1000}`, "Lock-Token", token); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("re-entry with min_hold_ms: got %d %v, want 400", resp.StatusCode, p)
	}
	if resp, _ := do("DELETE", ``, "Lock-Token", token); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("release: got %d, want 204", resp.StatusCode)
	}

	resp, p := do("POST", `{"ttl_ms":60000}`)
	ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != http.StatusConflict || p["code"] != "lock_held" || ra < 590 || ra > 600 {
		t.Fatalf("acquire after the release: got %d %v, Retry-After %q; want 409 lock_held, Retry-After about 600",
			resp.StatusCode, p, resp.Header.Get("Retry-After"))
	}
	// The detail says what keeps the lock, and until when: not a lease,
	// which nobody holds.
	d, _ := p["detail"].(string)
	_, after, _ := strings.Cut(d, "kept until ")
	kept, err := time.Parse(time.RFC3339Nano, strings.SplitN(after, " ", 2)[0])
	if lo, hi := start.Add(10*time.Minute-time.Millisecond), time.Now().Add(10*time.Minute+time.Millisecond); err != nil ||
		kept.Before(lo) || kept.After(hi) || !strings.Contains(d, "by a min hold") || strings.Contains(d, "lease ends") {
		t.Errorf("acquire after the release: detail %q, want the name kept until a time within [%v, %v] by a min hold, and no lease that ends", d, lo, hi)
	}
	held, _ := p["min_hold_until"].(string)
	resp, p = do("GET", ``)
	s, _ := p["min_hold_until"].(string)
	until, err := time.Parse(time.RFC3339Nano, s)
	if resp.StatusCode != http.StatusNotFound || p["code"] != "not_held" || err != nil {
		t.Fatalf("GET after the release: got %d %v, want 404 not_held with min_hold_until", resp.StatusCode, p)
	}
	if lo, hi := start.Add(10*time.Minute-time.Millisecond), time.Now().Add(10*time.Minute); until.Before(lo) || until.After(hi) {
		t.Fatalf("min_hold_until %v, want within [%v, %v]", until, lo, hi)
	}
	if ms, _ := p["retry_after_ms"].(float64); ms <= 0 || ms > 600000 {
		t.Fatalf("retry_after_ms %v, want in (0, 600000]", p["retry_after_ms"])
	}
	// The 409 states the min hold's end as a field, as the 404 does.
	if got, err := time.Parse(time.RFC3339Nano, held); err != nil || !got.Equal(until) {
		t.Fatalf("acquire after the release: min_hold_until %q, want the 404's, %s", held, s)
	}
}
