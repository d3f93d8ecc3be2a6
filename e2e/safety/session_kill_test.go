package safety

import (
	"net/http"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
)

// TestGatewayKilledInSession: a gateway process is killed (SIGKILL) while
// an acquire in a session waits on it, in a session of one grant at most.
// The acquire's pending note must not fill the session for good: once its
// wait and the slack after it have passed, the session takes a grant
// through the surviving gateway, and does not list the dead acquire.
func TestGatewayKilledInSession(t *testing.T) {
	rs := redistest.Start(t)
	args := []string{"--redis-url", rs.URL(), "--redis-timeout", "500ms", "--session-max-holds", "1"}
	doomed := startGatewayProcess(t, args...)
	survivor := startGateway(t, args...)
	cd, cs := newClient(t, doomed), newClient(t, survivor)
	cs.mustAcquire(t, "sesskill/held", time.Minute)
	s, r := cs.openSession(t.Context(), time.Minute)
	wantStatus(t, "open a session", r, http.StatusCreated)

	go cd.acquireInSession(t.Context(), s, "sesskill/held", false, false, time.Second, "doomed")
	eventually(t, 10*time.Second, "a waiter in the session on the doomed gateway", func() bool { return waiters(t, doomed) == 1 })
	if err := doomed.proc.Kill(); err != nil {
		t.Fatal(err)
	}

	// The note lives for the wait (1 s) and three Redis timeouts (1.5 s).
	eventually(t, 20*time.Second, "an acquire in the session after the killed one's deadline", func() bool {
		_, r := cs.acquireInSession(t.Context(), s, "sesskill/free", false, false, 0, "survivor")
		switch {
		case r.status == http.StatusCreated:
			return true
		case r.status == http.StatusConflict && r.code() == "session_full":
			return false
		}
		t.Fatalf("acquire in the session: got %s, want 201 or 409 session_full", r)
		return false
	})
	r = cs.do(t.Context(), "GET", "/sessions/"+s.ID, "", "Session-Token", s.Token)
	wantStatus(t, "describe the session", r, http.StatusOK)
	var info struct {
		Holds []struct {
			Resource string `json:"resource"`
			Pending  bool   `json:"pending"`
		} `json:"holds"`
	}
	mustDecode(t, r, &info)
	if len(info.Holds) != 1 || info.Holds[0].Resource != "sesskill/free" || info.Holds[0].Pending {
		t.Fatalf("the session's holds: got %+v, want sesskill/free alone, granted", info.Holds)
	}
}
