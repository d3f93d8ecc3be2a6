package e2e

import (
	"net/http"
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
		url := gw.URL + "/locks/delay/x"

		g := acquire(t, url, `{"ttl_ms":100}`)
		waitFree(t, url, auth)
		r := call(t, "POST", url, `{"ttl_ms":60000}`, auth...)
		p := wantProblem(t, r, http.StatusConflict, "lock_held")
		if p.RetryAfterMs == nil || *p.RetryAfterMs <= 0 || *p.RetryAfterMs > delay.Milliseconds() || r.header.Get("Retry-After") != "1" {
			t.Fatalf("inside the delay: retry_after_ms %v, Retry-After %q; want within %v", p.RetryAfterMs, r.header.Get("Retry-After"), delay)
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
