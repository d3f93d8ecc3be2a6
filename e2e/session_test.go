package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSessions: a session opened through one gateway holds locks taken
// through another of the same store; one keep-alive renews them all; the
// end through either releases them all; a session left alone frees its
// locks within a second of its lease's end; and the session token reaches
// neither the logs nor an error body.
func TestSessions(t *testing.T) {
	t.Parallel()
	type session struct {
		Session      string    `json:"session"`
		SessionToken string    `json:"session_token"`
		ExpiresAt    time.Time `json:"expires_at"`
		Renewed      []any     `json:"renewed"`
		Released     []any     `json:"released"`
	}
	eachBackend(t, func(t *testing.T, b backend) {
		args := b.args(t)
		a := startGateway(t, args...)
		other := a
		if len(args) > 0 { // a second gateway on the same Redis
			other = startGateway(t, args...)
		}
		auth := bearer(token(t, nil))
		open := func(ttl string) session {
			t.Helper()
			var s session
			wantJSON(t, call(t, "POST", a.URL+"/sessions", `{"ttl_ms":`+ttl+`}`, auth...), http.StatusCreated, &s)
			return s
		}
		locks := []string{"/locks/sess/a", "/locks/sess/b", "/semaphores/sess/pool"}
		take := func(s session) {
			t.Helper()
			for i, l := range locks {
				gw := []*gateway{a, other}[i%2]
				body := `{}`
				if strings.HasPrefix(l, "/semaphores/") {
					body = `{"limit":3}`
				}
				var g grant
				wantJSON(t, call(t, "POST", gw.URL+l, body, with(auth, []string{"Session-Token", s.SessionToken})...), http.StatusCreated, &g)
			}
		}

		s := open("60000")
		take(s)
		ss := with(auth, []string{"Session-Token", s.SessionToken})
		var kept session
		wantJSON(t, call(t, "PUT", other.URL+"/sessions/"+s.Session, `{"ttl_ms":90000}`, ss...), http.StatusOK, &kept)
		if len(kept.Renewed) != 3 {
			t.Fatalf("keep-alive through the other gateway renewed %d grants, want 3", len(kept.Renewed))
		}
		var ended session
		wantJSON(t, call(t, "DELETE", other.URL+"/sessions/"+s.Session, "", ss...), http.StatusOK, &ended)
		if len(ended.Released) != 3 {
			t.Fatalf("the end released %d grants, want 3", len(ended.Released))
		}
		for _, l := range locks {
			wantProblem(t, call(t, "GET", a.URL+l, "", auth...), http.StatusNotFound, "not_held")
		}
		wantProblem(t, call(t, "PUT", a.URL+"/sessions/"+s.Session, "", ss...), http.StatusNotFound, "session_ended")
		// A session that never was: no token is its, so 403, as the README says.
		never := "AAAAAAAAAAAAAAAAAAAAAA"
		wantProblem(t, call(t, "GET", a.URL+"/sessions/"+never, "", ss...), http.StatusForbidden, "session_token_mismatch")
		// Without its Session-Token: a 400 that openapi.yaml declares (send
		// checks every answer against it).
		for _, m := range []string{"GET", "PUT", "DELETE"} {
			wantProblem(t, call(t, m, a.URL+"/sessions/"+s.Session, "", auth...), http.StatusBadRequest, "invalid_request")
		}
		// A malformed id is called a session id.
		if p := wantProblem(t, call(t, "GET", a.URL+"/sessions/not-an-id", "", ss...), http.StatusBadRequest, "invalid_request"); !strings.Contains(p.Detail, "session id") || strings.Contains(p.Detail, "ticket") {
			t.Fatalf("a malformed session id: detail %q, want it to say session id", p.Detail)
		}

		// Left alone, a session's locks end with its lease.
		s = open("500")
		take(s)
		deadline := s.ExpiresAt.Add(time.Second)
		for _, l := range locks {
			for call(t, "GET", a.URL+l, "", auth...).status != http.StatusNotFound {
				if time.Now().After(deadline.Add(2 * time.Second)) {
					t.Fatalf("%s still held 3s after its session's lease", l)
				}
				time.Sleep(5 * time.Millisecond) // polling for an expiry
			}
		}
		if late := time.Since(s.ExpiresAt); late > time.Second {
			t.Fatalf("the session's locks ended %v after its lease, want within 1s", late)
		}
		for _, gw := range []*gateway{a, other} {
			if strings.Contains(gw.logs.String(), s.SessionToken) {
				t.Fatal("a session token reached the gateway's logs")
			}
		}
	})
}

// TestSessionsPerCallerBounded: one caller holds at most
// --subject-max-sessions live sessions across the gateways of one store
// (#37, finding 6); the next gets a 429 problem with the stable code
// too_many_sessions, another caller has its own share, and an ended
// session makes room.
func TestSessionsPerCallerBounded(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		args := append(b.args(t), "--subject-max-sessions", "3")
		a := startGateway(t, args...)
		other := a
		if len(b.args(t)) > 0 {
			other = startGateway(t, args...)
		}
		greedy := bearer(token(t, map[string]any{"sub": "greedy"}))
		type session struct {
			Session      string `json:"session"`
			SessionToken string `json:"session_token"`
		}
		var first session
		for i := range 3 {
			var s session
			wantJSON(t, call(t, "POST", []*gateway{a, other}[i%2].URL+"/sessions", `{"ttl_ms":60000}`, greedy...), http.StatusCreated, &s)
			if i == 0 {
				first = s
			}
		}
		wantProblem(t, call(t, "POST", other.URL+"/sessions", `{"ttl_ms":60000}`, greedy...), http.StatusTooManyRequests, "too_many_sessions")
		wantJSON(t, call(t, "POST", a.URL+"/sessions", `{"ttl_ms":60000}`, bearer(token(t, map[string]any{"sub": "modest"}))...), http.StatusCreated, &session{})
		wantJSON(t, call(t, "DELETE", a.URL+"/sessions/"+first.Session, "", with(greedy, []string{"Session-Token", first.SessionToken})...), http.StatusOK, &session{})
		wantJSON(t, call(t, "POST", other.URL+"/sessions", `{"ttl_ms":60000}`, greedy...), http.StatusCreated, &session{})
	})
}
