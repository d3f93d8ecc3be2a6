package e2e

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLockLifecycle walks one lock through acquire, inspect, renew, release.
func TestLockLifecycle(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, b.args(t)...)
		url := gw.URL + "/locks/billing/invoice-42"
		auth := bearer(token(t, map[string]any{"sub": "alice"}))

		before := time.Now()
		var g grant
		wantJSON(t, call(t, "POST", url, `{"ttl_ms":5000,"owner":"worker-7"}`, auth...), http.StatusCreated, &g)
		if g.Lock != "billing/invoice-42" || g.Token == "" || g.FencingToken <= 0 || g.TTLMs != 5000 {
			t.Fatalf("grant: got %+v", g)
		}
		if g.ExpiresAt.Location() != time.UTC || g.ExpiresAt.Before(before) || g.ExpiresAt.After(time.Now().Add(5*time.Second)) {
			t.Fatalf("expires_at: got %v, want UTC within 5s from now", g.ExpiresAt)
		}

		var info struct {
			Lock         string    `json:"lock"`
			Held         bool      `json:"held"`
			FencingToken int64     `json:"fencing_token"`
			TTLMs        int64     `json:"ttl_ms"`
			ExpiresAt    time.Time `json:"expires_at"`
			AcquiredAt   time.Time `json:"acquired_at"`
			Subject      string    `json:"subject"`
			Owner        string    `json:"owner"`
		}
		r := call(t, "GET", url, "", auth...)
		wantJSON(t, r, http.StatusOK, &info)
		if !info.Held || info.Lock != g.Lock || info.FencingToken != g.FencingToken || info.Subject != "alice" ||
			info.Owner != "worker-7" || info.TTLMs <= 0 || info.TTLMs > 5000 || info.AcquiredAt.IsZero() || info.ExpiresAt.IsZero() {
			t.Fatalf("inspect: got %+v", info)
		}
		if strings.Contains(string(r.body), g.Token) {
			t.Fatalf("inspect revealed the owner token: %s", r.body)
		}

		var lease struct {
			Lock         string    `json:"lock"`
			FencingToken int64     `json:"fencing_token"`
			TTLMs        int64     `json:"ttl_ms"`
			ExpiresAt    time.Time `json:"expires_at"`
		}
		lockToken := []string{"Lock-Token", g.Token}
		wantJSON(t, call(t, "PUT", url+"/lease", `{"ttl_ms":20000}`, with(auth, lockToken)...), http.StatusOK, &lease)
		if lease.Lock != g.Lock || lease.FencingToken != g.FencingToken || lease.TTLMs != 20000 || !lease.ExpiresAt.After(g.ExpiresAt) {
			t.Fatalf("renew with ttl_ms: got %+v after grant %+v", lease, g)
		}
		// Without a body the lease goes back to the TTL of the grant.
		wantJSON(t, call(t, "PUT", url+"/lease", "", with(auth, lockToken)...), http.StatusOK, &lease)
		if lease.TTLMs != 5000 {
			t.Fatalf("renew without body: ttl_ms got %d, want 5000", lease.TTLMs)
		}

		if r := call(t, "DELETE", url, "", with(auth, lockToken)...); r.status != http.StatusNoContent || len(r.body) != 0 {
			t.Fatalf("release: got %d %s, want 204 and no body", r.status, r.body)
		}
		wantProblem(t, call(t, "GET", url, "", auth...), http.StatusNotFound, "not_held")
		if r := call(t, "DELETE", url, "", with(auth, lockToken)...); r.status != http.StatusNoContent {
			t.Fatalf("a repeated release: got %d %s, want 204 (DELETE is idempotent)", r.status, r.body)
		}
		wantReason(t, call(t, "PUT", url+"/lease", "", with(auth, lockToken)...), "released")

		// The next grant has a larger fencing token.
		if g2 := acquire(t, url, ""); g2.FencingToken <= g.FencingToken {
			t.Fatalf("fencing token: got %d after %d, want larger", g2.FencingToken, g.FencingToken)
		}
	})
}

func TestHeldLockIs409WithRetryAfter(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, b.args(t)...)
		url := gw.URL + "/locks/jobs/nightly"
		acquire(t, url, `{"ttl_ms":2500}`)

		r := call(t, "POST", url, `{"ttl_ms":1000}`, bearer(token(t, nil))...)
		p := wantProblem(t, r, http.StatusConflict, "lock_held")
		if p.RetryAfterMs == nil || *p.RetryAfterMs <= 0 || *p.RetryAfterMs > 2500 {
			t.Fatalf("retry_after_ms: got %v, want in (0, 2500]", p.RetryAfterMs)
		}
		secs, err := strconv.Atoi(r.header.Get("Retry-After"))
		// Whole seconds, rounded up: 2500 ms left is 3 s, at worst 1 s later.
		if err != nil || secs < 1 || secs > 3 || int64(secs)*1000 < *p.RetryAfterMs {
			t.Fatalf("Retry-After: got %q for retry_after_ms %d, want it rounded up to whole seconds", r.header.Get("Retry-After"), *p.RetryAfterMs)
		}

		// Someone else's token neither releases nor renews it, and never
		// appears in the answer.
		other := []string{"Lock-Token", "not-the-token"}
		r = call(t, "DELETE", url, "", with(bearer(token(t, nil)), other)...)
		wantProblem(t, r, http.StatusConflict, "not_holder")
		if strings.Contains(string(r.body), "not-the-token") {
			t.Fatalf("the problem echoes the Lock-Token: %s", r.body)
		}
	})
}

// TestWaiterWokenByRelease: a waiting acquire gets the lock when the holder
// releases it, long before its wait runs out.
func TestWaiterWokenByRelease(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, b.args(t)...)
		url := gw.URL + "/locks/etl/load"
		held := acquire(t, url, `{"ttl_ms":60000}`)

		got := callAsync(t, "POST", url, `{"ttl_ms":5000,"wait_ms":30000}`, bearer(token(t, nil))...)
		waitForQueued(t, url, 1)
		start := time.Now()
		if r := call(t, "DELETE", url, "", with(bearer(token(t, nil)), []string{"Lock-Token", held.Token})...); r.status != http.StatusNoContent {
			t.Fatalf("release: got %d %s", r.status, r.body)
		}
		select {
		case r := <-got:
			var g grant
			wantJSON(t, r, http.StatusCreated, &g)
			if g.FencingToken <= held.FencingToken {
				t.Fatalf("fencing token: got %d after %d, want larger", g.FencingToken, held.FencingToken)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the waiter was not woken within 10s of the release (started %v ago)", time.Since(start))
		}
	})
}

func TestWaitRunsOut(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, b.args(t)...)
		url := gw.URL + "/locks/etl/load"
		acquire(t, url, `{"ttl_ms":60000}`)
		p := wantProblem(t, call(t, "POST", url, `{"wait_ms":50}`, bearer(token(t, nil))...), http.StatusConflict, "lock_held")
		if p.RetryAfterMs == nil || *p.RetryAfterMs <= 0 {
			t.Fatalf("retry_after_ms: got %v, want positive", p.RetryAfterMs)
		}
	})
}

// waitForWaiters polls /metrics until n acquirers wait.
//
// The gateway counts a waiter as it starts to wait, a moment before it
// joins the backend's queue: where the order of waiters matters, use
// waitForQueued.
func waitForWaiters(t *testing.T, gw *gateway, n int) {
	t.Helper()
	want := "lockgate_active_waiters " + strconv.Itoa(n) + "\n"
	deadline := time.Now().Add(10 * time.Second)
	for {
		if r := call(t, "GET", gw.URL+"/metrics", ""); strings.Contains(string(r.body), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %d waiters after 10s", n)
		}
		time.Sleep(5 * time.Millisecond) // poll interval, not synchronisation
	}
}

// waitForQueued polls GET url (a lock's or a semaphore's) until its queue
// holds n waiters: the way to know that a waiter started with callAsync
// has joined the backend's queue, ahead of any started after.
func waitForQueued(t *testing.T, url string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var info struct {
			Waiters *int `json:"waiters"`
		}
		wantJSON(t, call(t, "GET", url, "", bearer(token(t, nil))...), http.StatusOK, &info)
		if info.Waiters != nil && *info.Waiters == n {
			return
		}
		if info.Waiters == nil || time.Now().After(deadline) {
			t.Fatalf("%s: got waiters %v, want %d", url, info.Waiters, n)
		}
		time.Sleep(5 * time.Millisecond) // polling for a waiter to queue
	}
}
