package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
)

// permit is the 201 body of a semaphore acquire.
type permit struct {
	Semaphore    string    `json:"semaphore"`
	Token        string    `json:"token"`
	FencingToken int64     `json:"fencing_token"`
	TTLMs        int64     `json:"ttl_ms"`
	ExpiresAt    time.Time `json:"expires_at"`
	Limit        int       `json:"limit"`
}

// semaphoreInfo is the 200 body of a semaphore inspect.
type semaphoreInfo struct {
	Semaphore string `json:"semaphore"`
	Limit     int    `json:"limit"`
	Holders   []struct {
		Subject      string    `json:"subject"`
		Owner        string    `json:"owner"`
		FencingToken int64     `json:"fencing_token"`
		TTLMs        int64     `json:"ttl_ms"`
		ExpiresAt    time.Time `json:"expires_at"`
		AcquiredAt   time.Time `json:"acquired_at"`
	} `json:"holders"`
	Waiters *int `json:"waiters"`
}

// takePermit takes a permit of url's semaphore with body, or fails the test.
func takePermit(t *testing.T, url, body string) permit {
	t.Helper()
	var p permit
	wantJSON(t, call(t, "POST", url, body, bearer(token(t, nil))...), http.StatusCreated, &p)
	return p
}

// giveBack releases p, or fails the test.
func giveBack(t *testing.T, url string, p permit) {
	t.Helper()
	if r := call(t, "DELETE", url, "", with(bearer(token(t, nil)), []string{"Lock-Token", p.Token})...); r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("release: got %d %s, want 204 and no body", r.status, r.body)
	}
}

// limitOf decodes the limit field of a limit_mismatch problem.
func limitOf(t *testing.T, r response) int {
	t.Helper()
	var p struct {
		Limit *int `json:"limit"`
	}
	if err := json.Unmarshal(r.body, &p); err != nil || p.Limit == nil {
		t.Fatalf("limit_mismatch without a limit: %s (%v)", r.body, err)
	}
	return *p.Limit
}

// TestSemaphoreLifecycle walks a semaphore of limit 2 through every call
// and every answer of its contract.
func TestSemaphoreLifecycle(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, b.args(t)...)
		url := gw.URL + "/semaphores/etl/export"
		alice := bearer(token(t, map[string]any{"sub": "alice"}))

		before := time.Now()
		var p1 permit
		wantJSON(t, call(t, "POST", url, `{"limit":2,"ttl_ms":5000,"owner":"worker-1"}`, alice...), http.StatusCreated, &p1)
		if p1.Semaphore != "etl/export" || p1.Token == "" || p1.FencingToken <= 0 || p1.TTLMs != 5000 || p1.Limit != 2 {
			t.Fatalf("grant: got %+v", p1)
		}
		if p1.ExpiresAt.Location() != time.UTC || p1.ExpiresAt.Before(before) || p1.ExpiresAt.After(time.Now().Add(5*time.Second)) {
			t.Fatalf("expires_at: got %v, want UTC within 5s from now", p1.ExpiresAt)
		}
		p2 := takePermit(t, url, `{"limit":2,"ttl_ms":3000,"owner":"worker-2"}`)
		if p2.Token == p1.Token || p2.FencingToken <= p1.FencingToken {
			t.Fatalf("second permit: got token reuse or fencing token %d after %d", p2.FencingToken, p1.FencingToken)
		}

		// Full: 409 semaphore_full, with when the soonest lease ends.
		r := call(t, "POST", url, `{"limit":2}`, alice...)
		pr := wantProblem(t, r, http.StatusConflict, "semaphore_full")
		if pr.RetryAfterMs == nil || *pr.RetryAfterMs <= 0 || *pr.RetryAfterMs > 3000 {
			t.Fatalf("retry_after_ms: got %v, want in (0, 3000] (the soonest lease)", pr.RetryAfterMs)
		}
		if secs, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || secs < 1 || int64(secs)*1000 < *pr.RetryAfterMs {
			t.Fatalf("Retry-After: got %q for retry_after_ms %d, want it rounded up to whole seconds", r.header.Get("Retry-After"), *pr.RetryAfterMs)
		}
		// With wait_ms that runs out: the same answer.
		wantProblem(t, call(t, "POST", url, `{"limit":2,"wait_ms":50}`, alice...), http.StatusConflict, "semaphore_full")

		var info semaphoreInfo
		r = call(t, "GET", url, "", alice...)
		wantJSON(t, r, http.StatusOK, &info)
		if info.Semaphore != "etl/export" || info.Limit != 2 || len(info.Holders) != 2 || info.Waiters == nil || *info.Waiters != 0 {
			t.Fatalf("inspect: got %+v", info)
		}
		owners := map[string]int64{}
		for _, h := range info.Holders {
			if h.Subject != "alice" && h.Subject != "tester" || h.TTLMs <= 0 || h.AcquiredAt.IsZero() || h.ExpiresAt.IsZero() {
				t.Fatalf("inspect holder: got %+v", h)
			}
			owners[h.Owner] = h.FencingToken
		}
		if owners["worker-1"] != p1.FencingToken || owners["worker-2"] != p2.FencingToken {
			t.Fatalf("inspect holders: got owners and fences %v, want worker-1 %d and worker-2 %d", owners, p1.FencingToken, p2.FencingToken)
		}
		if info.Holders[0].Owner != "worker-2" {
			t.Fatalf("inspect: the soonest lease to end comes first; got %q first", info.Holders[0].Owner)
		}
		if strings.Contains(string(r.body), p1.Token) || strings.Contains(string(r.body), p2.Token) {
			t.Fatalf("inspect revealed an owner token: %s", r.body)
		}

		var lease struct {
			Semaphore    string    `json:"semaphore"`
			FencingToken int64     `json:"fencing_token"`
			TTLMs        int64     `json:"ttl_ms"`
			ExpiresAt    time.Time `json:"expires_at"`
		}
		tok1 := []string{"Lock-Token", p1.Token}
		wantJSON(t, call(t, "PUT", url+"/lease", `{"ttl_ms":20000}`, with(alice, tok1)...), http.StatusOK, &lease)
		if lease.Semaphore != "etl/export" || lease.FencingToken != p1.FencingToken || lease.TTLMs != 20000 || !lease.ExpiresAt.After(p1.ExpiresAt) {
			t.Fatalf("renew with ttl_ms: got %+v after grant %+v", lease, p1)
		}
		wantJSON(t, call(t, "PUT", url+"/lease", "", with(alice, tok1)...), http.StatusOK, &lease)
		if lease.TTLMs != 5000 {
			t.Fatalf("renew without body: ttl_ms got %d, want 5000", lease.TTLMs)
		}

		// Someone else's token neither releases nor renews, and never
		// appears in the answer.
		other := []string{"Lock-Token", "not-the-token"}
		r = call(t, "DELETE", url, "", with(alice, other)...)
		wantProblem(t, r, http.StatusConflict, "not_holder")
		if strings.Contains(string(r.body), "not-the-token") {
			t.Fatalf("the problem echoes the Lock-Token: %s", r.body)
		}
		wantProblem(t, call(t, "PUT", url+"/lease", "", with(alice, other)...), http.StatusConflict, "not_holder")

		giveBack(t, url, p1)
		giveBack(t, url, p1) // idempotent
		wantReason(t, call(t, "PUT", url+"/lease", "", with(alice, tok1)...), "released")
		wantJSON(t, call(t, "GET", url, "", alice...), http.StatusOK, &info)
		if len(info.Holders) != 1 || info.Holders[0].FencingToken != p2.FencingToken {
			t.Fatalf("inspect after one release: got %+v", info)
		}
		giveBack(t, url, p2)
		wantProblem(t, call(t, "GET", url, "", alice...), http.StatusNotFound, "not_held")

		// The next grant has a larger fencing token.
		if p3 := takePermit(t, url, `{"limit":2}`); p3.FencingToken <= p2.FencingToken {
			t.Fatalf("fencing token: got %d after %d, want larger", p3.FencingToken, p2.FencingToken)
		}
	})
}

// TestSemaphoreLimitMismatch: another limit while the semaphore is in use
// is 409 limit_mismatch with the limit in force, even when the semaphore
// is also full; once it is idle, the new limit applies.
func TestSemaphoreLimitMismatch(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, b.args(t)...)
		url := gw.URL + "/semaphores/jobs/render"
		auth := bearer(token(t, nil))
		held := takePermit(t, url, `{"limit":2,"ttl_ms":60000}`)

		r := call(t, "POST", url, `{"limit":3}`, auth...)
		wantProblem(t, r, http.StatusConflict, "limit_mismatch")
		if got := limitOf(t, r); got != 2 {
			t.Fatalf("limit: got %d, want 2", got)
		}
		full := takePermit(t, url, `{"limit":2,"ttl_ms":60000}`)
		// Full and mismatched: the mismatch wins, with or without wait_ms.
		for _, body := range []string{`{"limit":1}`, `{"limit":5,"wait_ms":5000}`} {
			r = call(t, "POST", url, body, auth...)
			wantProblem(t, r, http.StatusConflict, "limit_mismatch")
			if got := limitOf(t, r); got != 2 {
				t.Fatalf("%s: limit got %d, want 2", body, got)
			}
			if r.header.Get("Retry-After") != "" {
				t.Fatalf("%s: limit_mismatch with Retry-After %q", body, r.header.Get("Retry-After"))
			}
		}
		wantProblem(t, call(t, "POST", url, `{"limit":2}`, auth...), http.StatusConflict, "semaphore_full")

		giveBack(t, url, held)
		giveBack(t, url, full)
		p := takePermit(t, url, `{"limit":1}`)
		if p.Limit != 1 {
			t.Fatalf("limit of the idle semaphore: got %d, want 1", p.Limit)
		}
		wantProblem(t, call(t, "POST", url, `{"limit":1}`, auth...), http.StatusConflict, "semaphore_full")
	})
}

// TestSemaphoreWaiters: a waiter gets the permit a release frees, and the
// permit of a holder that stopped renewing (crashed) when its lease ends.
func TestSemaphoreWaiters(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, b.args(t)...)
		url := gw.URL + "/semaphores/etl/load"
		auth := bearer(token(t, nil))
		held := takePermit(t, url, `{"limit":2,"ttl_ms":60000}`)
		crashed := takePermit(t, url, `{"limit":2,"ttl_ms":1500}`)

		first := callAsync(t, "POST", url, `{"limit":2,"ttl_ms":60000,"wait_ms":30000}`, auth...)
		waitForQueued(t, url, 1) // before the second starts: first in line
		second := callAsync(t, "POST", url, `{"limit":2,"ttl_ms":60000,"wait_ms":30000}`, auth...)
		waitForQueued(t, url, 2)

		// The crashed holder never renews: its lease ends, and the first
		// waiter gets its permit.
		var p permit
		select {
		case r := <-first:
			wantJSON(t, r, http.StatusCreated, &p)
		case <-time.After(15 * time.Second):
			t.Fatal("the first waiter did not get the crashed holder's permit within 15s")
		}
		if p.FencingToken <= crashed.FencingToken {
			t.Fatalf("fencing token: got %d after %d, want larger", p.FencingToken, crashed.FencingToken)
		}
		wantProblem(t, call(t, "PUT", url+"/lease", "", with(auth, []string{"Lock-Token", crashed.Token})...), http.StatusConflict, "not_holder")

		giveBack(t, url, held)
		select {
		case r := <-second:
			var p2 permit
			wantJSON(t, r, http.StatusCreated, &p2)
			if p2.FencingToken <= p.FencingToken {
				t.Fatalf("fencing token: got %d after %d, want larger", p2.FencingToken, p.FencingToken)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the second waiter was not woken within 10s of the release")
		}
	})
}

// TestSemaphoreAndLockApart: a semaphore and a lock of one name are
// separate: neither blocks the other, and neither's token works on the
// other.
func TestSemaphoreAndLockApart(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, b.args(t)...)
		lockURL, semURL := gw.URL+"/locks/a/b", gw.URL+"/semaphores/a/b"
		auth := bearer(token(t, nil))
		l := acquire(t, lockURL, `{"ttl_ms":60000}`)
		p := takePermit(t, semURL, `{"limit":1,"ttl_ms":60000}`)
		wantProblem(t, call(t, "POST", lockURL, "", auth...), http.StatusConflict, "lock_held")
		wantProblem(t, call(t, "POST", semURL, `{"limit":1}`, auth...), http.StatusConflict, "semaphore_full")

		for _, c := range []struct{ url, token string }{{lockURL, p.Token}, {semURL, l.Token}} {
			tok := []string{"Lock-Token", c.token}
			wantProblem(t, call(t, "PUT", c.url+"/lease", "", with(auth, tok)...), http.StatusConflict, "not_holder")
			wantProblem(t, call(t, "DELETE", c.url, "", with(auth, tok)...), http.StatusConflict, "not_holder")
		}
		giveBack(t, semURL, p)
		wantProblem(t, call(t, "GET", semURL, "", auth...), http.StatusNotFound, "not_held")
		var info struct {
			FencingToken int64 `json:"fencing_token"`
		}
		wantJSON(t, call(t, "GET", lockURL, "", auth...), http.StatusOK, &info)
		if info.FencingToken != l.FencingToken {
			t.Fatalf("the lock after the semaphore's release: fencing token %d, want %d", info.FencingToken, l.FencingToken)
		}
	})
}

// TestSemaphoreRequests: bad semaphore input is a 400 in our own words,
// and the namespace grant applies as for locks.
func TestSemaphoreRequests(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, "--max-ttl", "1m", "--max-wait", "10s")
	auth := bearer(token(t, nil))
	lockToken := []string{"Lock-Token", "whatever"}
	for name, tc := range map[string]struct {
		method, path, body string
		headers            []string
		wantDetail         string
	}{
		"no body":            {"POST", "/semaphores/a/b", "", auth, `field "limit" is required`},
		"empty object":       {"POST", "/semaphores/a/b", `{}`, auth, `field "limit" is required`},
		"no limit":           {"POST", "/semaphores/a/b", `{"ttl_ms":1000}`, auth, `field "limit" is required`},
		"zero limit":         {"POST", "/semaphores/a/b", `{"limit":0}`, auth, "at least 1"},
		"limit over max":     {"POST", "/semaphores/a/b", `{"limit":10001}`, auth, "at most 10000"},
		"string limit":       {"POST", "/semaphores/a/b", `{"limit":"3"}`, auth, "integer"},
		"fractional limit":   {"POST", "/semaphores/a/b", `{"limit":2.5}`, auth, "integer"},
		"null limit":         {"POST", "/semaphores/a/b", `{"limit":null}`, auth, ""},
		"unknown field":      {"POST", "/semaphores/a/b", `{"limit":2,"permits":2}`, auth, `unknown field "permits"`},
		"ttl over max":       {"POST", "/semaphores/a/b", `{"limit":2,"ttl_ms":60001}`, auth, "between 1 and 60000"},
		"wait over max":      {"POST", "/semaphores/a/b", `{"limit":2,"wait_ms":10001}`, auth, "between 0 and 10000"},
		"owner too long":     {"POST", "/semaphores/a/b", `{"limit":2,"owner":"` + strings.Repeat("x", 129) + `"}`, auth, "at most 128"},
		"bad name":           {"GET", "/semaphores/a/.b", "", auth, "name"},
		"release no token":   {"DELETE", "/semaphores/a/b", "", auth, "Lock-Token"},
		"renew no token":     {"PUT", "/semaphores/a/b/lease", "", auth, "Lock-Token"},
		"renew ttl over max": {"PUT", "/semaphores/a/b/lease", `{"ttl_ms":60001}`, with(auth, lockToken), "between 1 and 60000"},
	} {
		t.Run(name, func(t *testing.T) {
			p := wantProblem(t, call(t, tc.method, gw.URL+tc.path, tc.body, tc.headers...), http.StatusBadRequest, "invalid_request")
			if !strings.Contains(p.Detail, tc.wantDetail) {
				t.Fatalf("detail: got %q, want it to contain %q", p.Detail, tc.wantDetail)
			}
		})
	}
	// The largest limit is fine.
	if p := takePermit(t, gw.URL+"/semaphores/a/max", `{"limit":10000}`); p.Limit != 10000 {
		t.Fatalf("limit: got %d, want 10000", p.Limit)
	}

	billing := bearer(token(t, map[string]any{"ns": []string{"billing"}}))
	wantProblem(t, call(t, "POST", gw.URL+"/semaphores/etl/x", `{"limit":1}`, billing...), http.StatusForbidden, "forbidden")
	wantProblem(t, call(t, "GET", gw.URL+"/semaphores/etl/x", "", billing...), http.StatusForbidden, "forbidden")
	wantProblem(t, call(t, "POST", gw.URL+"/semaphores/etl/x", `{"limit":1}`), http.StatusUnauthorized, "unauthorized")
	takePermit(t, gw.URL+"/semaphores/billing/x", `{"limit":1}`)
}

// TestSemaphoreLimitAcrossGateways: clients of two gateways on one Redis
// never hold more permits at once than the limit, and all of them get
// their turns.
func TestSemaphoreLimitAcrossGateways(t *testing.T) {
	t.Parallel()
	url := redistest.Start(t).URL()
	gws := []*gateway{startGateway(t, "--redis-url", url), startGateway(t, "--redis-url", url)}
	const limit, clients, rounds = 3, 12, 5
	var inside, most, grants atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	auth := bearer(token(t, nil))
	for c := range clients {
		wg.Go(func() {
			gw := gws[c%2]
			semURL := gw.URL + "/semaphores/shared/pool"
			for range rounds {
				r, err := send(t.Context(), "POST", semURL, `{"limit":3,"ttl_ms":30000,"wait_ms":30000}`, auth...)
				if err != nil || r.status != http.StatusCreated {
					errs <- fmt.Errorf("acquire: %d %s %v", r.status, r.body, err)
					return
				}
				var p permit
				if err := json.Unmarshal(r.body, &p); err != nil {
					errs <- err
					return
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				grants.Add(1)
				// The count goes down before the release is sent: it never
				// counts a holder that is gone.
				inside.Add(-1)
				other := gws[(c+1)%2].URL + "/semaphores/shared/pool"
				if r, err := send(t.Context(), "DELETE", other, "", with(auth, []string{"Lock-Token", p.Token})...); err != nil || r.status != http.StatusNoContent {
					errs <- fmt.Errorf("release: %d %s %v", r.status, r.body, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if most.Load() > limit {
		t.Fatalf("at most %d holders at once, saw %d", limit, most.Load())
	}
	if grants.Load() != clients*rounds {
		t.Fatalf("grants: got %d, want %d", grants.Load(), clients*rounds)
	}
}

// TestSemaphoreFIFOAcrossGateways: waiters on two gateways get permits in
// the order they arrived, whichever gateway they wait on.
func TestSemaphoreFIFOAcrossGateways(t *testing.T) {
	t.Parallel()
	url := redistest.Start(t).URL()
	gws := []*gateway{startGateway(t, "--redis-url", url), startGateway(t, "--redis-url", url)}
	auth := bearer(token(t, nil))
	path := "/semaphores/shared/fifo"
	held := takePermit(t, gws[0].URL+path, `{"limit":1,"ttl_ms":60000}`)

	const n = 6
	got := make([]<-chan response, n)
	for i := range n {
		got[i] = callAsync(t, "POST", gws[i%2].URL+path, `{"limit":1,"ttl_ms":60000,"wait_ms":30000}`, auth...)
		// The next one arrives only once this one is queued.
		deadline := time.Now().Add(10 * time.Second)
		for {
			var info semaphoreInfo
			r := call(t, "GET", gws[(i+1)%2].URL+path, "", auth...)
			if r.status == http.StatusOK && json.Unmarshal(r.body, &info) == nil && info.Waiters != nil && *info.Waiters == i+1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiter %d not queued within 10s", i)
			}
			time.Sleep(5 * time.Millisecond) // poll interval
		}
	}
	prev := held
	giveBack(t, gws[1].URL+path, held)
	for i := range n {
		select {
		case r := <-got[i]:
			var p permit
			wantJSON(t, r, http.StatusCreated, &p)
			if p.FencingToken <= prev.FencingToken {
				t.Fatalf("waiter %d: fencing token %d after %d, want larger", i, p.FencingToken, prev.FencingToken)
			}
			prev = p
			giveBack(t, gws[(i+1)%2].URL+path, p)
		case <-time.After(10 * time.Second):
			t.Fatalf("waiter %d (in arrival order) not served within 10s of its turn", i)
		}
	}
}
