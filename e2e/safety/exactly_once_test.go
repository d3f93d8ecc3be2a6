package safety

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
)

// The exactly-once tests: a proxy between the gateway and Redis delivers
// one script call to Redis, which runs it, and cuts the connection where
// its reply would come back. Whatever the Redis client then does (go-redis's
// ClusterClient re-sends the pipeline; a single Redis's client does not),
// the call must have one effect, and the answer must say it or say that the
// outcome is unknown (503), never the outcome of a second run.

// lostReplyWithin bounds how long the faulted call, and the clean-up that
// follows an unknown outcome, may take: far less than the leases (60 s),
// so that a lock freed by its lease does not pass for a lock freed by the
// call.
const lostReplyWithin = 10 * time.Second

// TestExactlyOnceClusterInnerRelease: on a 3-master Cluster, a lock held
// and re-entered (2 holds); the reply of the release of the inner hold is
// lost. The outer hold must still hold the lock: another caller is refused.
func TestExactlyOnceClusterInnerRelease(t *testing.T) {
	pc := startProxiedCluster(t, 3)
	gw := startGateway(t, pc.gatewayArgs()...)
	c, other := newClient(t, gw), newClient(t, gw)
	const lock = "once/inner-release"
	g := c.mustAcquire(t, lock, time.Minute)
	inner, r := c.reenter(t.Context(), lock, g.Token, time.Minute)
	if r.status != http.StatusOK {
		t.Fatalf("re-entry: got %s, want 200", r)
	}

	fs := pc.addFault(loseReply, scriptCall("release", hashTag(lock)), 1)
	left, r := c.releaseHold(t.Context(), lock, g.Token, inner.Hold)
	if fired(fs) != 1 {
		t.Fatalf("the release's reply was not lost (faults fired %d times)", fired(fs))
	}
	switch {
	case r.status == http.StatusOK && left == 1, r.status == http.StatusServiceUnavailable:
	default:
		t.Errorf("release of the inner hold: got %s, want 200 with 1 hold left, or 503", r)
	}
	if g2, r := other.acquire(t.Context(), lock, time.Minute, 0); r.status != http.StatusConflict {
		t.Fatalf("another caller, while the outer hold holds the lock (fencing token %d): got %s (fencing token %d), want 409 lock_held: two holders",
			g.FencingToken, r, g2.FencingToken)
	}
	if info, r, _ := c.inspect(t.Context(), lock); info.FencingToken != g.FencingToken || info.Holds != 1 {
		t.Fatalf("after the inner release: got %s, want the grant %d with 1 hold", r, g.FencingToken)
	}
}

// TestExactlyOnceClusterReentry: on a 3-master Cluster, a lock held once
// is re-entered, and the re-entry's reply is lost. The re-entry must have
// added one hold (200 holds 2) or none that outlives the call (503, then
// undone): after the holder releases the holds it was told of, the lock is
// free, long before its lease ends.
func TestExactlyOnceClusterReentry(t *testing.T) {
	pc := startProxiedCluster(t, 3)
	gw := startGateway(t, pc.gatewayArgs()...)
	testLostReentry(t, newClient(t, gw), func(lock string) []*fault {
		return pc.addFault(loseReply, scriptCall("reenter", hashTag(lock)), 1)
	})
}

// TestExactlyOnceReentryLost: finding 3, on a single Redis (whose client
// sends nothing twice): a re-entry whose reply is lost answers 503, and the
// hold it may have taken must be undone as an acquire's grant is: after the
// holder's one release, the lock is free long before its lease ends.
func TestExactlyOnceReentryLost(t *testing.T) {
	rs := redistest.Start(t)
	p := startProxy(t, rs.Addr)
	gw := startGateway(t, "--redis-url", "redis://"+p.Addr)
	testLostReentry(t, newClient(t, gw), func(lock string) []*fault {
		return []*fault{p.addFault(loseReply, scriptCall("reenter", hashTag(lock)), 1)}
	})
}

// testLostReentry holds a lock, re-enters it with the reply lost (arm arms
// the fault), releases the holds the answers told of, and wants the lock
// free.
func testLostReentry(t *testing.T, c *client, arm func(lock string) []*fault) {
	t.Helper()
	const lock = "once/reentry"
	g := c.mustAcquire(t, lock, time.Minute)
	fs := arm(lock)
	re, r := c.reenter(t.Context(), lock, g.Token, time.Minute)
	if fired(fs) != 1 {
		t.Fatalf("the re-entry's reply was not lost (faults fired %d times)", fired(fs))
	}
	holds, answered := 1, r.status
	switch {
	case r.status == http.StatusOK && re.Holds == 2:
		holds = 2
	case r.status == http.StatusServiceUnavailable:
	default:
		t.Fatalf("re-entry of a grant held once, its reply lost: got %s, want 200 with 2 holds, or 503", r)
	}
	for i, hold := range []string{re.Hold, ""}[2-holds:] {
		if _, r := c.releaseHold(t.Context(), lock, g.Token, hold); r.status != http.StatusOK && r.status != http.StatusNoContent {
			t.Fatalf("release %d of %d: got %s, want 200 or 204", i+1, holds, r)
		}
	}
	var info lockInfo
	deadline := time.Now().Add(lostReplyWithin)
	for {
		var ok bool
		var r result
		info, r, ok = c.inspect(t.Context(), lock)
		if ok && info.FencingToken == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the re-entry (answered %d) and the %d release(s) it called for: the lock is still held (%s) %v later, its lease ends in a minute: held by nobody",
				answered, holds, r, lostReplyWithin)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}

// TestExactlyOnceClusterIdempotent: on a 3-master Cluster, an acquire with
// an Idempotency-Key whose first step's (idem_begin) or last step's
// (idem_done) reply is lost must answer 201 or 503, and its retry with the
// same key must get the grant (the same one, when the first call said 201)
// that holds the lock.
func TestExactlyOnceClusterIdempotent(t *testing.T) {
	t.Parallel() // long, and much of it waiting: it runs beside the other long ones
	for _, name := range []string{"idem_begin", "idem_done"} {
		t.Run(name, func(t *testing.T) {
			pc := startProxiedCluster(t, 3)
			gw := startGateway(t, pc.gatewayArgs()...)
			lock := "once/idem-" + name
			testLostIdempotentStep(t, newClient(t, gw), lock, pc.addFault(loseReply, scriptCall(name, hashTag(lock)), 1), 1)
		})
	}
}

// TestExactlyOnceIdempotentDoneLost: finding 4, on a single Redis: the
// reply of idem_done (the grant made and recorded) is lost. The retry with
// the same key must get that grant, not grant_ended.
func TestExactlyOnceIdempotentDoneLost(t *testing.T) {
	rs := redistest.Start(t)
	p := startProxy(t, rs.Addr)
	gw := startGateway(t, "--redis-url", "redis://"+p.Addr)
	const lock = "once/idem-done"
	testLostIdempotentStep(t, newClient(t, gw), lock, []*fault{p.addFault(loseReply, scriptCall("idem_done", hashTag(lock)), 1)}, 1)
}

// testLostIdempotentStep makes one acquire with an Idempotency-Key whose
// step's reply the faults fs lose (want times in all), and retries it.
func testLostIdempotentStep(t *testing.T, c *client, lock string, fs []*fault, want int) {
	t.Helper()
	key := fmt.Sprintf("%s-%d", lock, time.Now().UnixNano())
	first, r := c.acquireOnce(t.Context(), lock, key, time.Minute, 0)
	if fired(fs) != want {
		t.Fatalf("the step's reply was not lost %d times (faults fired %d times)", want, fired(fs))
	}
	if r.status != http.StatusCreated && r.status != http.StatusServiceUnavailable {
		t.Fatalf("the only call with its Idempotency-Key, a step's reply lost: got %s, want 201 or 503", r)
	}
	firstStatus := r.status
	// A retry may meet the call's own pending record for a moment while the
	// gateway cleans up after a 503: poll past idempotency_in_progress.
	var retry grant
	deadline := time.Now().Add(lostReplyWithin)
	for {
		retry, r = c.acquireOnce(t.Context(), lock, key, time.Minute, 0)
		if r.status != http.StatusConflict || r.code() != "idempotency_in_progress" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	if r.status != http.StatusCreated {
		t.Fatalf("retry with the same Idempotency-Key after the first call answered %d: got %s, want 201 with the grant", firstStatus, r)
	}
	if firstStatus == http.StatusCreated && retry.FencingToken != first.FencingToken {
		t.Fatalf("retry: got fencing token %d, want the first call's %d", retry.FencingToken, first.FencingToken)
	}
	if info, r, _ := c.inspect(t.Context(), lock); info.FencingToken != retry.FencingToken {
		t.Fatalf("the lock after the retry: got %s, want it held by the retry's grant %d", r, retry.FencingToken)
	}
}

// TestExactlyOnceIdempotentDoneLostTwice: on a single Redis, the replies of
// both tries of an idempotent acquire's last step (idem_done: the grant
// made and recorded; the engine asks twice under one call id) are lost.
// The first call answers 503, its outcome unknown to the caller, who never
// saw a grant; the retry with the same key must get the grant or run
// afresh, not be told grant_ended (P11: "a call that was not granted
// removes its pending record, and its retry runs afresh"; finding 4 of
// issue 21 under one more lost reply). Found by TestFaultMatrix/failover,
// seed 7736752500235021699.
func TestExactlyOnceIdempotentDoneLostTwice(t *testing.T) {
	rs := redistest.Start(t)
	p := startProxy(t, rs.Addr)
	gw := startGateway(t, "--redis-url", "redis://"+p.Addr)
	const lock = "once/idem-done-twice"
	testLostIdempotentStep(t, newClient(t, gw), lock, []*fault{p.addFault(loseReply, scriptCall("idem_done", hashTag(lock)), 2)}, 2)
}

// TestExactlyOnceSessionAcquireLost: on a single Redis, a lock taken in a
// session in one script (session_acquire), its reply lost. The answer is
// 503 (the outcome unknown), the grant is given back (the lock is free long
// before the session's lease ends), and the session does not keep it: the
// next keep-alive renews nothing, and the end releases nothing.
func TestExactlyOnceSessionAcquireLost(t *testing.T) {
	rs := redistest.Start(t)
	p := startProxy(t, rs.Addr)
	gw := startGateway(t, "--redis-url", "redis://"+p.Addr)
	c := newClient(t, gw)
	const lock = "once/session"
	s, r := c.openSession(t.Context(), time.Minute)
	if r.status != http.StatusCreated {
		t.Fatalf("open a session: got %s", r)
	}
	fs := []*fault{p.addFault(loseReply, scriptCall("session_acquire", hashTag(lock)), 1)}
	_, r = c.acquireInSession(t.Context(), s, lock, false, false, 0, "lost")
	if fired(fs) != 1 {
		t.Fatalf("the acquire's reply was not lost (faults fired %d times)", fired(fs))
	}
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("acquire in a session, its reply lost: got %s, want 503", r)
	}
	deadline := time.Now().Add(lostReplyWithin)
	for {
		info, r, ok := c.inspect(t.Context(), lock)
		if ok && info.FencingToken == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the acquire answered 503: the lock is still held (%s) %v later, its lease ends in a minute: held by nobody", r, lostReplyWithin)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	a, r := c.sessionCall(t.Context(), "PUT", s)
	if r.status != http.StatusOK || len(a.Renewed) != 0 {
		t.Fatalf("the keep-alive after: got %s %+v, want 200 renewing nothing", r, a)
	}
	a, r = c.sessionCall(t.Context(), "DELETE", s)
	if r.status != http.StatusOK || len(a.Released) != 0 {
		t.Fatalf("the end: got %s %+v, want 200 releasing nothing", r, a)
	}
}
