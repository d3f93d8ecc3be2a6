package handlers

import (
	"net/http"
	"strings"
	"testing"

	"github.com/lockgate/lockgate/locks/embedded"
)

// TestSessions: a session's grants take its lease; one PUT renews them
// all; a DELETE releases them all, and the history says which session
// ended; bad input gets problems with their own codes, and no secret.
func TestSessions(t *testing.T) {
	_, ts := newTestServer(t, embedded.New(embedded.Options{History: 10}))
	alice, bob := signed(t, "alice"), signed(t, "bob")

	st, ss := call(t, ts.URL, "POST", "/sessions", alice, `{"ttl_ms":60000}`)
	if st != http.StatusCreated || ss["session"] == "" || ss["session_token"] == "" || ss["renew_after_ms"] != 20000.0 {
		t.Fatalf("open: got %d %v, want 201 with a session and its token", st, ss)
	}
	id, token := ss["session"].(string), ss["session_token"].(string)
	path := "/sessions/" + id

	var fences []float64
	for _, p := range []string{"/locks/team/a", "/locks/team/b", "/semaphores/team/pool"} {
		body := `{"ttl_ms":5}`
		if strings.HasPrefix(p, "/semaphores/") {
			body = `{"ttl_ms":5,"limit":2}`
		}
		st, g := call(t, ts.URL, "POST", p, alice, body, "Session-Token", token)
		if st != http.StatusCreated || g["ttl_ms"].(float64) < 50000 {
			t.Fatalf("acquire %s in the session: got %d %v, want 201 with the session's lease", p, st, g)
		}
		fences = append(fences, g["fencing_token"].(float64))
	}
	if fences[0] == fences[1] {
		t.Fatalf("two grants of one session share fencing token %v", fences[0])
	}

	st, kept := call(t, ts.URL, "PUT", path, alice, `{"ttl_ms":120000}`, "Session-Token", token)
	if st != http.StatusOK || len(kept["renewed"].([]any)) != 3 || kept["ttl_ms"] != 120000.0 {
		t.Fatalf("keep: got %d %v, want 200 with 3 renewed", st, kept)
	}
	if st, info := call(t, ts.URL, "GET", "/locks/team/a", alice, ""); st != http.StatusOK || info["ttl_ms"].(float64) < 100000 {
		t.Fatalf("the lock after the keep-alive: got %d %v, want its lease renewed to 120 s", st, info)
	}
	if st, d := call(t, ts.URL, "GET", path, alice, "", "Session-Token", token); st != http.StatusOK || len(d["holds"].([]any)) != 3 {
		t.Fatalf("describe: got %d %v, want 3 holds", st, d)
	}

	for name, c := range map[string]struct {
		method, path, bearer, body string
		headers                    []string
		status                     int
		code                       string
	}{
		"another caller keeps":            {"PUT", path, bob, "", []string{"Session-Token", token}, 403, "session_not_yours"},
		"another caller joins":            {"POST", "/locks/team/c", bob, "", []string{"Session-Token", token}, 403, "session_not_yours"},
		"a token of another session":      {"PUT", path, alice, "", []string{"Session-Token", "x" + token}, 403, "session_token_mismatch"},
		"no session token":                {"PUT", path, alice, "", nil, 400, "invalid_request"},
		"a session id of the wrong shape": {"PUT", "/sessions/nope", alice, "", []string{"Session-Token", token}, 400, "invalid_request"},
		"ttl 0":                           {"POST", "/sessions", alice, `{"ttl_ms":0}`, nil, 400, "invalid_request"},
		"ttl over the max":                {"POST", "/sessions", alice, `{"ttl_ms":99999999999}`, nil, 400, "invalid_request"},
		"no ttl":                          {"POST", "/sessions", alice, `{}`, nil, 400, "invalid_request"},
		"with a Lock-Token":               {"POST", "/locks/team/c", alice, "", []string{"Session-Token", token, "Lock-Token", "t"}, 400, "invalid_request"},
		"with an Idempotency-Key":         {"POST", "/locks/team/c", alice, "", []string{"Session-Token", token, "Idempotency-Key", "k1"}, 400, "invalid_request"},
		"a session nobody opened":         {"POST", "/locks/team/c", alice, "", []string{"Session-Token", "no-such-session-token"}, 404, "session_ended"},
	} {
		st, p := call(t, ts.URL, c.method, c.path, c.bearer, c.body, c.headers...)
		if st != c.status || p["code"] != c.code {
			t.Errorf("%s: got %d %v, want %d %s", name, st, p, c.status, c.code)
		}
		if d, _ := p["detail"].(string); strings.Contains(d, token) {
			t.Errorf("%s: the detail shows the session token", name)
		}
	}

	st, ended := call(t, ts.URL, "DELETE", path, alice, "", "Session-Token", token)
	if st != http.StatusOK || len(ended["released"].([]any)) != 3 {
		t.Fatalf("end: got %d %v, want 200 with 3 released", st, ended)
	}
	for _, p := range []string{"/locks/team/a", "/locks/team/b", "/semaphores/team/pool"} {
		if st, _ := call(t, ts.URL, "GET", p, alice, ""); st != http.StatusNotFound {
			t.Fatalf("%s after the end: got %d, want 404", p, st)
		}
	}
	st, h := call(t, ts.URL, "GET", "/locks/team/a/history", alice, "")
	if ev := h["events"].([]any)[0].(map[string]any); st != http.StatusOK || ev["event"] != "released" || ev["session"] != id {
		t.Fatalf("history: got %d %v, want the last event released by session %s", st, h, id)
	}
	if st, again := call(t, ts.URL, "DELETE", path, alice, "", "Session-Token", token); st != http.StatusOK || len(again["released"].([]any)) != 0 {
		t.Fatalf("a repeated end: got %d %v, want 200 releasing nothing", st, again)
	}
	for _, m := range []string{"PUT", "GET"} {
		if st, p := call(t, ts.URL, m, path, alice, "", "Session-Token", token); st != http.StatusNotFound || p["code"] != "session_ended" {
			t.Fatalf("%s of an ended session: got %d %v, want 404 session_ended", m, st, p)
		}
	}
	if st, p := call(t, ts.URL, "POST", "/locks/team/a", alice, "", "Session-Token", token); st != http.StatusNotFound || p["code"] != "session_ended" {
		t.Fatalf("acquire in an ended session: got %d %v, want 404 session_ended", st, p)
	}
}
