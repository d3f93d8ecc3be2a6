package safety

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
)

// TestBreakOfUnknownOutcomeRunsLate: a break whose outcome is unknown may
// end a grant asked for after its answer, up to lateRun after its call: a
// release that answers broken, or a write the resource refuses, is then no
// finding. A break that did not run (404), one that ran before its answer
// (200), and one that can no longer arrive leave the grant held: both are
// still findings. So is a write refused before a renew that found the
// grant live: whatever ended it did so after that renew.
func TestBreakOfUnknownOutcomeRunsLate(t *testing.T) {
	at := func(d time.Duration) time.Time { return time.UnixMilli(1e12).Add(d) }
	const ms = time.Millisecond
	always := func(time.Time) bool { return true }
	for name, tc := range map[string]struct {
		status int           // the break's answer, 500 ms after its call at 0
		asked  time.Duration // when the grant was asked for
		renew  bool          // a renew answered 200 after the write
		want   int           // findings: the release's "broken", the refused write
	}{
		"503, the grant asked for after the answer":      {http.StatusServiceUnavailable, 600 * ms, false, 0},
		"503, the grant renewed after the write":         {http.StatusServiceUnavailable, 600 * ms, true, 1},
		"no answer, the grant asked for after it":        {0, 600 * ms, false, 0},
		"503, the grant asked for after it could arrive": {http.StatusServiceUnavailable, lateRun + 100*ms, false, 2},
		"404: it found nothing to break":                 {http.StatusNotFound, 600 * ms, false, 2},
		"200: it ran before its answer":                  {http.StatusOK, 600 * ms, false, 2},
	} {
		t.Run(name, func(t *testing.T) {
			b := op{kind: opBreak, lock: "l", prim: "breaker", status: tc.status, call: at(0), ret: at(500 * ms)}
			acquired := op{kind: opAcquire, lock: "l", prim: "idempotent", status: http.StatusCreated, fence: 2, call: at(tc.asked), ret: at(tc.asked + 10*ms)}
			release := op{kind: opRelease, lock: "l", prim: "idempotent", status: http.StatusConflict, code: "not_holder", fence: 2, call: at(tc.asked + 300*ms), ret: at(tc.asked + 310*ms)}
			g := &grantRec{lock: "l", fence: 2, prim: "idempotent", acquired: acquired, known: at(tc.asked + time.Second),
				releaseCall: release.call, broken: &release,
				writes: []grantWrite{{call: at(tc.asked + 20*ms), ret: at(tc.asked + 20*ms), known: at(tc.asked + time.Second)}}}
			if tc.renew {
				g.extends = []op{{kind: opRenew, lock: "l", prim: "idempotent", status: http.StatusOK, fence: 2, call: at(tc.asked + 100*ms), ret: at(tc.asked + 110*ms)}}
			}
			h := &history{ops: []op{b, acquired, release}, grants: []*grantRec{g}}
			fs := h.breakFindings(always)
			fs = append(fs, h.findings(nil, 1)...)
			if len(fs) != tc.want {
				var msgs []string
				for _, f := range fs {
					msgs = append(msgs, f.msg)
				}
				t.Fatalf("got %d findings, want %d:\n%s", len(fs), tc.want, strings.Join(msgs, "\n"))
			}
		})
	}
}

// TestBreakRunsAfterItsUnknownAnswer is what TestBreakOfUnknownOutcomeRunsLate
// rests on: a break that reaches Redis after its gateway stopped waiting
// (503) ends the grant live then, one asked for after the 503.
func TestBreakRunsAfterItsUnknownAnswer(t *testing.T) {
	const lock = "late/break"
	rs := redistest.Start(t)
	slow := startProxy(t, rs.Addr)
	admin := newClient(t, startGateway(t, "--redis-url", "redis://"+slow.Addr, "--redis-timeout", "300ms"))
	holder := newClient(t, startGateway(t, "--redis-url", rs.URL()))

	// A first break, of a lock nobody holds, loads the break function
	// into Redis: late, a call that found none would fail, not run.
	wantStatus(t, "break", admin.breakLock(t.Context(), lock, 0), http.StatusNotFound)
	first := holder.mustAcquire(t, lock, time.Minute)
	// Every command the breaker's gateway sends reaches Redis a second
	// late: three times its Redis timeout.
	slow.setJitter(func(toGateway bool) time.Duration {
		if toGateway {
			return 0
		}
		return time.Second
	})
	wantStatus(t, "break", admin.breakLock(t.Context(), lock, 0), http.StatusServiceUnavailable)
	wantStatus(t, "release", holder.release(t.Context(), lock, first.Token), http.StatusNoContent)
	next := holder.mustAcquire(t, lock, time.Minute) // asked for after the 503
	var r result
	eventually(t, 5*time.Second, "the late break ends the grant asked for after its 503", func() bool {
		_, r = holder.renew(t.Context(), lock, next.Token, time.Minute)
		return r.status != http.StatusOK
	})
	if r.status != http.StatusConflict || r.reason() != "broken" {
		t.Fatalf("renew of the grant asked for after the break's 503: got %s, want 409 not_holder, reason broken", r)
	}
}
