package redisbackend_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/locktest"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

// TestRedisSemaphoreWatchesShareTheirReads: the watches of one semaphore
// on a gateway wait on one read a round, not one each. Before, each
// watch read the semaphore every 200 ms on its own: 100 watches of one
// semaphore cost Redis 500 reads a second. And every watch still sees the
// change that ends its wait.
func TestRedisSemaphoreWatchesShareTheirReads(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	r := newRedis(t, srv, redisbackend.Options{})
	admin := newClient(t, srv)
	ctx := t.Context()
	key := locktest.UniqueKey(t)

	const watches, rounds = 8, 3
	// The test counts the reads that ran at rounds+1 rounds in a row while
	// every watch waits, each before the round's own read is sent: the
	// hook waits for the count.
	var counting atomic.Bool
	counting.Store(true)
	round := make(chan chan struct{})
	r.OnSemaphoreRead(func(_ locks.Key, waiting int) {
		if waiting == watches && counting.Load() {
			counted := make(chan struct{})
			round <- counted
			<-counted
		}
	})

	g := locktest.MustAcquirePermit(t, r, key, locks.SemaphoreRequest{AcquireRequest: locks.AcquireRequest{TTL: time.Minute, Subject: "test"}, Limit: 1})
	first, err := r.WatchSemaphore(ctx, key, -1)
	if err != nil {
		t.Fatalf("watch from -1: %v", err)
	}
	type result struct {
		w   locks.SemaphoreWatch
		err error
	}
	results := make(chan result, watches)
	for range watches {
		go func() {
			w, err := r.WatchSemaphore(ctx, key, first.Index)
			results <- result{w, err}
		}()
	}
	var at []int
	for i := range rounds + 1 {
		counted := <-round
		at = append(at, commandCounts(t, admin)["fcall_ro"])
		if i == rounds {
			counting.Store(false)
		}
		close(counted)
	}
	if got := at[rounds] - at[0]; got != rounds {
		t.Fatalf("%d rounds of %d watches of one semaphore: %d reads ran, want %d (one a round)", rounds, watches, got, rounds)
	}

	if _, err := r.ReleasePermit(ctx, key, g.Token); err != nil {
		t.Fatalf("release: %v", err)
	}
	for range watches {
		res := <-results
		if res.err != nil || res.w.Index <= first.Index || res.w.Held {
			t.Fatalf("a watch from %d after the release: got %+v, %v; want a later index, nobody holding", first.Index, res.w, res.err)
		}
	}
}
