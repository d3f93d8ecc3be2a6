package e2e

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
)

// TestSemaphoreGetIndex: a plain GET of a semaphore answers its index in
// Lockgate-Index, held (200) or free (404), and a long-poll from that
// index (?index=&wait=, the lock's parameters, bounds and errors) waits,
// and answers at the next change, with it (#39). It needs no history of
// locks.
func TestSemaphoreGetIndex(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, append(b.args(t), "--history", "0")...)
		auth := bearer(token(t, nil))
		url := gw.URL + "/semaphores/getindex/pool"
		from := func(i int64, wait string) string {
			return url + "?index=" + strconv.FormatInt(i, 10) + "&wait=" + wait
		}

		r := call(t, "GET", url, "", auth...)
		wantProblem(t, r, http.StatusNotFound, "not_held")
		if i := indexOf(t, r, "a semaphore never used"); i != 0 {
			t.Fatalf("a semaphore never used: got Lockgate-Index %d, want 0", i)
		}
		// index=0 is "nothing seen yet": answered at once, as for a lock.
		r = call(t, "GET", from(0, "5m"), "", auth...)
		wantProblem(t, r, http.StatusNotFound, "not_held")
		if i := indexOf(t, r, "a long-poll from 0"); i != 0 {
			t.Fatalf("a long-poll from 0 of a semaphore never used: got Lockgate-Index %d, want 0", i)
		}

		p := takePermit(t, url, `{"limit":2,"ttl_ms":60000,"owner":"worker"}`)
		r = call(t, "GET", url, "", auth...)
		var info semaphoreInfo
		wantJSON(t, r, http.StatusOK, &info)
		held := indexOf(t, r, "a semaphore in use")
		if held < time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro() || len(info.Holders) != 1 || info.Holders[0].FencingToken != p.FencingToken {
			t.Fatalf("a semaphore in use: got Lockgate-Index %d, %+v; want an index from the clock, the one holder", held, info)
		}
		if cc := r.header.Get("Cache-Control"); cc != "no-store" {
			t.Fatalf("a semaphore in use: got Cache-Control %q, want no-store", cc)
		}

		// Nothing changed: the long-poll waits its wait out, and answers
		// the same index, with the holders.
		r = call(t, "GET", from(held, "200ms"), "", auth...)
		wantJSON(t, r, http.StatusOK, &info)
		if i := indexOf(t, r, "a long-poll with no change"); i != held || len(info.Holders) != 1 {
			t.Fatalf("a long-poll from the GET's index, no change: got Lockgate-Index %d, %d holders; want %d, 1", i, len(info.Holders), held)
		}
		// A second permit: the long-poll answers with it.
		polled := callAsync(t, "GET", from(held, "30s"), "", auth...)
		p2 := takePermit(t, url, `{"limit":2,"ttl_ms":60000,"owner":"worker-2"}`)
		r = <-polled
		wantJSON(t, r, http.StatusOK, &info)
		two := indexOf(t, r, "a long-poll across an acquire")
		if two <= held || len(info.Holders) != 2 {
			t.Fatalf("a long-poll across an acquire: got Lockgate-Index %d, %d holders; want above %d, 2", two, len(info.Holders), held)
		}
		// Both released: the long-poll of the last answers 404 with the
		// index, which the GET after it answers too.
		giveBack(t, url, p2)
		r = call(t, "GET", url, "", auth...)
		one := indexOf(t, r, "one permit released")
		polled = callAsync(t, "GET", from(one, "30s"), "", auth...)
		giveBack(t, url, p)
		r = <-polled
		wantProblem(t, r, http.StatusNotFound, "not_held")
		free := indexOf(t, r, "a long-poll across the last release")
		if one <= two || free <= one {
			t.Fatalf("indexes across two releases: got %d then %d after %d, want each above the one before", one, free, two)
		}
		r = call(t, "GET", url, "", auth...)
		wantProblem(t, r, http.StatusNotFound, "not_held")
		if i := indexOf(t, r, "an idle semaphore"); i != free {
			t.Fatalf("an idle semaphore: got Lockgate-Index %d, want %d", i, free)
		}

		// The lock's bounds and errors.
		for _, q := range []string{"?index=-1", "?wait=30s", "?index=1&wait=0", "?index=1&wait=6m", "?index=1&wait=soon", "?index=x"} {
			wantProblem(t, call(t, "GET", url+q, "", auth...), http.StatusBadRequest, "invalid_request")
		}
	})
}

// TestSemaphoreLongPollAcrossGateways: on Redis, a long-poll on one
// gateway answers a change made through another.
func TestSemaphoreLongPollAcrossGateways(t *testing.T) {
	t.Parallel()
	url := redistest.Start(t).URL()
	a, b := startGateway(t, "--redis-url", url), startGateway(t, "--redis-url", url)
	auth := bearer(token(t, nil))
	p := takePermit(t, a.URL+"/semaphores/shared/watched", `{"limit":1,"ttl_ms":60000}`)
	r := call(t, "GET", b.URL+"/semaphores/shared/watched", "", auth...)
	held := indexOf(t, r, "held")
	polled := callAsync(t, "GET", b.URL+"/semaphores/shared/watched?index="+strconv.FormatInt(held, 10)+"&wait=30s", "", auth...)
	giveBack(t, a.URL+"/semaphores/shared/watched", p)
	r = <-polled
	wantProblem(t, r, http.StatusNotFound, "not_held")
	if i := indexOf(t, r, "a long-poll across a release elsewhere"); i <= held {
		t.Fatalf("a long-poll across a release on another gateway: got Lockgate-Index %d, want above %d", i, held)
	}
}

// TestSemaphoreLongPollLimits: a semaphore's long-poll counts among the
// gateway's watchers and the subject's waiters, as a lock's watch does.
func TestSemaphoreLongPollLimits(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, "--history", "10", "--max-watchers", "1", "--subject-max-waiters", "1")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	alice, bob := bearer(token(t, map[string]any{"sub": "alice"})), bearer(token(t, map[string]any{"sub": "bob"}))
	events := openStream(ctx, t, gw.URL+"/locks/watch/limits", "", alice...)
	next(t, events) // the stream is open, and counted
	url := gw.URL + "/semaphores/watch/limits"
	wantProblem(t, call(t, "GET", url+"?index=0&wait=10ms", "", alice...), http.StatusTooManyRequests, "too_many_requests")
	r := call(t, "GET", url+"?index=0&wait=10ms", "", bob...)
	wantProblem(t, r, http.StatusServiceUnavailable, "too_many_watchers")
	if r.header.Get("Retry-After") == "" {
		t.Fatal("503 too_many_watchers without Retry-After")
	}
}
