package safety

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
)

// TestWaiterStorm: 2 000 acquirers wait at once on a gateway process capped
// at 1 500 waiters. The cap answers 429 too_many_requests with Retry-After
// and changes nothing; the gateway keeps answering meanwhile, with bounded
// goroutines; after the storm nothing is held or waiting and the goroutines
// are back down.
func TestWaiterStorm(t *testing.T) {
	t.Parallel() // long, and much of it waiting: it runs beside the other long ones
	rs := redistest.Start(t)
	gw := startGatewayProcess(t, "--redis-url", rs.URL(), "--max-waiters", "1500")
	c := newClient(t, gw)
	c.http.Transport.(*http.Transport).MaxIdleConnsPerHost = 0
	baseGoroutines := metric(t, gw, "go_goroutines")
	const locks = 20
	var holders []grant
	for i := range locks {
		holders = append(holders, c.mustAcquire(t, fmt.Sprintf("storm/l%d", i), time.Minute))
	}

	ctx, stopWaiters := context.WithCancel(t.Context())
	defer stopWaiters()
	var mu sync.Mutex
	counts := make(map[string]int)
	var wg sync.WaitGroup
	for i := range 2000 {
		wg.Go(func() {
			_, r := c.acquire(ctx, fmt.Sprintf("storm/l%d", i%locks), time.Minute, 30*time.Second)
			key := "error"
			if r.status != 0 {
				key = fmt.Sprint(r.status, " ", r.code(), " ", r.header.Get("Retry-After") != "")
			}
			mu.Lock()
			counts[key]++
			mu.Unlock()
		})
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		w, refused, seen := waiters(t, gw), counts["429 too_many_requests true"], fmt.Sprint(counts)
		mu.Unlock()
		if w == 1500 && refused == 500 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within 60s: 1500 waiters and 500 refusals; got %v waiters and answers %s", w, seen)
		}
		time.Sleep(5 * time.Millisecond) // poll interval, not synchronisation
	}
	// The gateway still answers, quickly, and its goroutines are bounded by
	// the waiters: a few per waiting connection.
	start := time.Now()
	g := c.mustAcquire(t, "storm/other", time.Minute)
	wantStatus(t, "release during the storm", c.release(t.Context(), "storm/other", g.Token), http.StatusNoContent)
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("acquire and release took %v during the storm", d)
	}
	if n := metric(t, gw, "go_goroutines"); n > baseGoroutines+4*1500+200 {
		t.Fatalf("%v goroutines with 1500 waiters", n)
	}
	for i, h := range holders {
		if tok := c.holder(t, fmt.Sprintf("storm/l%d", i)); tok != h.FencingToken {
			t.Fatalf("storm/l%d: holder token %d, want %d", i, tok, h.FencingToken)
		}
	}

	stopWaiters()
	wg.Wait()
	if counts["429 too_many_requests true"] != 500 {
		t.Fatalf("answers: %v, want 500 × 429 with Retry-After", counts)
	}
	for i, h := range holders {
		wantStatus(t, "release", c.release(t.Context(), fmt.Sprintf("storm/l%d", i), h.Token), http.StatusNoContent)
	}
	eventually(t, 30*time.Second, "nothing held or waiting after the storm, goroutines back down", func() bool {
		for i := range locks {
			if c.holder(t, fmt.Sprintf("storm/l%d", i)) != 0 {
				return false
			}
		}
		return waiters(t, gw) == 0 && metric(t, gw, "go_goroutines") < baseGoroutines+50
	})
}

// TestLockNameFlood: 3 000 distinct lock names, acquired and released by 32
// clients at once. The gateway keeps answering, its memory and goroutines
// stay bounded, and afterwards no lock is held.
func TestLockNameFlood(t *testing.T) {
	t.Parallel() // long: it runs beside the other long ones, which mostly wait
	rs := redistest.Start(t)
	gw := startGatewayProcess(t, "--redis-url", rs.URL())
	c := newClient(t, gw)
	baseGoroutines := metric(t, gw, "go_goroutines")
	const names = 3000
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for range 32 {
		wg.Go(func() {
			for i := range next {
				lock := fmt.Sprintf("flood/n%d", i)
				g, r := c.acquire(t.Context(), lock, time.Minute, 0)
				if r.status == http.StatusCreated {
					r = c.release(t.Context(), lock, g.Token)
				}
				if r.status != http.StatusNoContent {
					mu.Lock()
					failures = append(failures, lock+": "+r.String())
					mu.Unlock()
				}
			}
		})
	}
	var maxRSS float64
	for i := range names {
		next <- i
		if i%500 == 0 {
			if r := c.do(t.Context(), "GET", "/healthz", ""); r.status != http.StatusOK {
				t.Fatalf("healthz during the flood: %s", r)
			}
			maxRSS = max(maxRSS, metric(t, gw, "process_resident_memory_bytes"))
		}
	}
	close(next)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d calls failed during the flood, e.g. %s", len(failures), failures[0])
	}
	if maxRSS > 300<<20 {
		t.Fatalf("the gateway grew to %.0f MiB during the flood", maxRSS/(1<<20))
	}
	for i := 0; i < names; i += 97 {
		if tok := c.holder(t, fmt.Sprintf("flood/n%d", i)); tok != 0 {
			t.Fatalf("flood/n%d is held after the flood", i)
		}
	}
	eventually(t, 30*time.Second, "goroutines back down after the flood", func() bool {
		return metric(t, gw, "go_goroutines") < baseGoroutines+50
	})
}
