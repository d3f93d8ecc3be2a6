package e2e

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestReleaseIsIdempotentAndSaysWhy: a repeated DELETE of a released grant
// is 204 again, even once someone else holds the lock (who keeps it); a
// renew or release whose token holds nothing is 409 not_holder with the
// reason: released, expired or unknown. Semaphore permits alike.
func TestReleaseIsIdempotentAndSaysWhy(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, b.args(t)...)
		auth := bearer(token(t, nil))
		url := gw.URL + "/locks/reasons/x"
		tok := func(v string) []string { return with(auth, []string{"Lock-Token", v}) }

		g := acquire(t, url, `{"ttl_ms":60000}`)
		for i := range 2 {
			if r := call(t, "DELETE", url, "", tok(g.Token)...); r.status != http.StatusNoContent {
				t.Fatalf("DELETE %d: got %d %s, want 204", i+1, r.status, r.body)
			}
		}
		next := acquire(t, url, `{"ttl_ms":60000}`)
		if r := call(t, "DELETE", url, "", tok(g.Token)...); r.status != http.StatusNoContent {
			t.Fatalf("DELETE of the old grant while another holds: got %d %s, want 204", r.status, r.body)
		}
		var info grant
		wantJSON(t, call(t, "GET", url, "", auth...), http.StatusOK, &info)
		if info.FencingToken != next.FencingToken {
			t.Fatalf("the new holder lost the lock to a repeated DELETE: %+v", info)
		}
		wantReason(t, call(t, "PUT", url+"/lease", "", tok(g.Token)...), "released")
		wantReason(t, call(t, "DELETE", url, "", tok("never-granted")...), "unknown")
		wantReason(t, call(t, "PUT", url+"/lease", "", tok("never-granted")...), "unknown")
		wantReason(t, call(t, "POST", url, "", tok("never-granted")...), "unknown")

		short := acquire(t, gw.URL+"/locks/reasons/short", `{"ttl_ms":50}`)
		waitFree(t, gw.URL+"/locks/reasons/short", auth)
		wantReason(t, call(t, "PUT", gw.URL+"/locks/reasons/short/lease", "", tok(short.Token)...), "expired")
		wantReason(t, call(t, "DELETE", gw.URL+"/locks/reasons/short", "", tok(short.Token)...), "expired")

		sem := gw.URL + "/semaphores/reasons/pool"
		var p grant
		wantJSON(t, call(t, "POST", sem, `{"limit":2}`, auth...), http.StatusCreated, &p)
		for i := range 2 {
			if r := call(t, "DELETE", sem, "", tok(p.Token)...); r.status != http.StatusNoContent {
				t.Fatalf("semaphore DELETE %d: got %d %s, want 204", i+1, r.status, r.body)
			}
		}
		wantReason(t, call(t, "PUT", sem+"/lease", "", tok(p.Token)...), "released")
	})
}

// TestLockDelay: with --lock-delay, a lock whose lease ended unreleased
// stays unavailable for the delay (409 lock_held, with Retry-After), a
// waiter gets it when the delay ends, and a released lock is free at once.
func TestLockDelay(t *testing.T) {
	t.Parallel()
	const delay = 800 * time.Millisecond
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, append(b.args(t), "--lock-delay", delay.String())...)
		auth := bearer(token(t, nil))

		// A round needs the acquire to reach the gateway inside the delay,
		// which a busy machine may miss: a round whose acquire was granted
		// after the delay (as it should be) proves nothing, and the next
		// round tries again on a name of its own.
		var url string
		var g grant
		for round := 1; ; round++ {
			if round > 5 {
				t.Fatalf("in %d rounds, no acquire reached the gateway within %v of the lease's end", round-1, delay)
			}
			url = gw.URL + "/locks/delay/x" + strconv.Itoa(round)
			g = acquire(t, url, `{"ttl_ms":100}`)
			waitFree(t, url, auth)
			r := call(t, "POST", url, `{"ttl_ms":60000}`, auth...)
			if r.status == http.StatusCreated {
				var late grant
				wantJSON(t, r, http.StatusCreated, &late)
				// Both times are the backend's clock, to the millisecond.
				if at := late.ExpiresAt.Add(-time.Duration(late.TTLMs) * time.Millisecond); at.Before(g.ExpiresAt.Add(delay)) {
					t.Fatalf("granted %v after the lease's end, inside the %v delay", at.Sub(g.ExpiresAt), delay)
				}
				continue
			}
			p := wantProblem(t, r, http.StatusConflict, "lock_held")
			if p.RetryAfterMs == nil || *p.RetryAfterMs <= 0 || *p.RetryAfterMs > delay.Milliseconds() || r.header.Get("Retry-After") != "1" {
				t.Fatalf("inside the delay: %s, Retry-After %q; want retry_after_ms within %v", r.body, r.header.Get("Retry-After"), delay)
			}
			break
		}
		var w grant
		wantJSON(t, call(t, "POST", url, `{"ttl_ms":60000,"wait_ms":10000}`, auth...), http.StatusCreated, &w)
		if now := time.Now(); now.Before(g.ExpiresAt.Add(delay)) {
			t.Fatalf("a waiter got the lock %v after the lease ended at the earliest, inside the delay", now.Sub(g.ExpiresAt))
		}
		if r := call(t, "DELETE", url, "", with(auth, []string{"Lock-Token", w.Token})...); r.status != http.StatusNoContent {
			t.Fatalf("release: %d %s", r.status, r.body)
		}
		acquire(t, url, `{"ttl_ms":60000}`) // released, not vanished: free at once
	})
}

// wantReason checks a 409 not_holder with reason.
func wantReason(t *testing.T, r response, reason string) {
	t.Helper()
	p := wantProblem(t, r, http.StatusConflict, "not_holder")
	if p.Reason != reason {
		t.Fatalf("reason: got %q, want %q (%s)", p.Reason, reason, p.Detail)
	}
}

// waitFree polls GET url until the lock is not held.
func waitFree(t *testing.T, url string, auth []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for call(t, "GET", url, "", auth...).status != http.StatusNotFound {
		if time.Now().After(deadline) {
			t.Fatalf("%s still held after 10s", url)
		}
		time.Sleep(5 * time.Millisecond) // polling for an expiry
	}
}
