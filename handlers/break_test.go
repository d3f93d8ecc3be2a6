package handlers

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/locks/embedded"
)

// signed is a token of subject sub, granted every namespace, that
// administers the namespaces admin.
func signed(t *testing.T, sub string, admin ...string) string {
	t.Helper()
	claims := jwt.MapClaims{"sub": sub, "ns": []string{"*"}, "exp": time.Now().Add(time.Hour).Unix()}
	if len(admin) > 0 {
		claims["ns_admin"] = admin
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// call sends method path with body and headers (name, value pairs), and
// returns the status and the decoded body.
func call(t *testing.T, url, method, path, bearer, body string, headers ...string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	if b, _ := io.ReadAll(resp.Body); len(b) > 0 {
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s %s: body %q: %v", method, path, b, err)
		}
	}
	return resp.StatusCode, out
}

// TestBreakLock: only an administrator of the namespace breaks a lock; the
// holder's next calls say broken; the history says who broke it.
func TestBreakLock(t *testing.T) {
	_, ts := newTestServer(t, embedded.New(embedded.Options{History: 10}))
	holder, admin, other := signed(t, "alice"), signed(t, "root", "team"), signed(t, "root2", "elsewhere")

	st, g := call(t, ts.URL, "POST", "/locks/team/job", holder, `{"ttl_ms":60000}`)
	if st != http.StatusCreated {
		t.Fatalf("acquire: got %d %v, want 201", st, g)
	}
	token := g["token"].(string)

	for name, bearer := range map[string]string{"the holder": holder, "an administrator of another namespace": other} {
		st, p := call(t, ts.URL, "POST", "/locks/team/job/break", bearer, "")
		if st != http.StatusForbidden || p["code"] != "forbidden" || !strings.Contains(p["detail"].(string), "administrator") {
			t.Fatalf("break by %s: got %d %v, want 403 forbidden saying an administrator is needed", name, st, p)
		}
	}
	if st, p := call(t, ts.URL, "POST", "/locks/team/job/break", admin, `{"break_period_ms":-1}`); st != http.StatusBadRequest {
		t.Fatalf("break with a negative period: got %d %v, want 400", st, p)
	}
	if st, p := call(t, ts.URL, "GET", "/locks/team/job", holder, ""); st != http.StatusOK {
		t.Fatalf("inspect after the refused breaks: got %d %v, want the lock still held", st, p)
	}

	st, b := call(t, ts.URL, "POST", "/locks/team/job/break", admin, `{"break_period_ms":0}`)
	if st != http.StatusOK || b["lock"] != "team/job" || b["broken"] != float64(1) {
		t.Fatalf("break: got %d %v, want 200 with 1 grant broken", st, b)
	}
	for _, c := range []struct{ method, path, body string }{
		{"PUT", "/locks/team/job/lease", ""},
		{"DELETE", "/locks/team/job", ""},
		{"POST", "/locks/team/job", `{"ttl_ms":1000}`}, // a re-entry
	} {
		st, p := call(t, ts.URL, c.method, c.path, holder, c.body, "Lock-Token", token)
		if st != http.StatusConflict || p["code"] != "not_holder" || p["reason"] != "broken" {
			t.Fatalf("%s %s by the broken holder: got %d %v, want 409 not_holder, reason broken", c.method, c.path, st, p)
		}
	}
	if st, p := call(t, ts.URL, "POST", "/locks/team/job/break", admin, ""); st != http.StatusNotFound || p["code"] != "not_held" {
		t.Fatalf("break of a free lock: got %d %v, want 404 not_held", st, p)
	}
	st, h := call(t, ts.URL, "GET", "/locks/team/job/history", holder, "")
	if st != http.StatusOK {
		t.Fatalf("history: got %d %v", st, h)
	}
	e := h["events"].([]any)[0].(map[string]any)
	if e["event"] != "broken" || e["by"] != "root" || e["subject"] != "alice" || e["fencing_token"] != g["fencing_token"] {
		t.Fatalf("newest event: got %v, want alice's grant broken by root", e)
	}
}

// TestBreakLockPeriod: a break with a period answers how long the grant
// has left; meanwhile the holder renews up to that end only, and a second
// break cannot lengthen it; then the grant ends broken, by the breaker.
func TestBreakLockPeriod(t *testing.T) {
	_, ts := newTestServer(t, embedded.New(embedded.Options{History: 10}))
	holder, admin := signed(t, "alice"), signed(t, "root", "team")
	st, g := call(t, ts.URL, "POST", "/locks/team/job", holder, `{"ttl_ms":60000}`)
	if st != http.StatusCreated {
		t.Fatalf("acquire: got %d %v, want 201", st, g)
	}
	token := g["token"].(string)

	st, b := call(t, ts.URL, "POST", "/locks/team/job/break", admin, `{"break_period_ms":700}`)
	if left, _ := b["break_period_ms"].(float64); st != http.StatusOK || b["broken"] != float64(1) || left <= 0 || left > 700 {
		t.Fatalf("break with a period: got %d %v, want 200 with 1 grant ending within 700 ms", st, b)
	}
	st, b = call(t, ts.URL, "POST", "/locks/team/job/break", admin, `{"break_period_ms":3600000}`)
	if left, _ := b["break_period_ms"].(float64); st != http.StatusOK || left <= 0 || left > 700 {
		t.Fatalf("a second, longer break: got %d %v, want the end where it was, within 700 ms", st, b)
	}
	st, l := call(t, ts.URL, "PUT", "/locks/team/job/lease", holder, `{"ttl_ms":60000}`, "Lock-Token", token)
	if ttl, _ := l["ttl_ms"].(float64); st != http.StatusOK || ttl <= 0 || ttl > 700 {
		t.Fatalf("renew during the period: got %d %v, want 200 with ttl_ms within 700", st, l)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, _ := call(t, ts.URL, "GET", "/locks/team/job", holder, "")
		if st == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lock is still held 10 s after a break period of 700 ms")
		}
		time.Sleep(20 * time.Millisecond) // poll interval, not synchronisation
	}
	st, p := call(t, ts.URL, "PUT", "/locks/team/job/lease", holder, "", "Lock-Token", token)
	if st != http.StatusConflict || p["reason"] != "broken" {
		t.Fatalf("renew after the period: got %d %v, want 409 not_holder, reason broken", st, p)
	}
	_, h := call(t, ts.URL, "GET", "/locks/team/job/history", holder, "")
	e := h["events"].([]any)[0].(map[string]any)
	if e["event"] != "broken" || e["by"] != "root" || e["subject"] != "alice" {
		t.Fatalf("newest event: got %v, want alice's grant broken by root", e)
	}
}
