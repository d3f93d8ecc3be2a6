package redisbackend_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/locktest"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

// Calls that arrive together share pipelines; each must still end within
// its own timeout when Redis stops answering, those queued behind stalled
// pipelines included.
func TestRedisConcurrentCallsBoundedWhenPaused(t *testing.T) {
	t.Parallel()
	const timeout = 800 * time.Millisecond
	const n = 64 // well over the number of pipelines in flight
	srv := redistest.Start(t)
	l := newRedis(t, srv, redisbackend.Options{Timeout: timeout})
	locktest.MustAcquire(t, l, locktest.UniqueKey(t), locks.AcquireRequest{TTL: time.Minute}) // connected, scripts loaded
	srv.Pause(t)
	t.Cleanup(func() { srv.Resume(t) })

	type outcome struct {
		err     error
		elapsed time.Duration
	}
	out := make([]outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			start := time.Now()
			_, err := l.Acquire(t.Context(), locktest.UniqueKey(t), locks.AcquireRequest{TTL: time.Minute})
			out[i] = outcome{err, time.Since(start)}
		})
	}
	wg.Wait()
	for i, o := range out {
		if !errors.Is(o.err, locks.ErrUnavailable) {
			t.Errorf("call %d: got %v, want ErrUnavailable", i, o.err)
		}
		// A bound, not a benchmark: within about the one timeout.
		if o.elapsed > timeout+timeout/2 {
			t.Errorf("call %d: took %v, want about the %v timeout", i, o.elapsed, timeout)
		}
	}
}

// Concurrent calls after FUNCTION FLUSH find no function in one pipeline,
// and every one is sent again once it is loaded (after SCRIPT FLUSH too,
// which drops what EVAL loaded): each runs exactly once.
func TestRedisConcurrentCallsSurviveScriptFlush(t *testing.T) {
	t.Parallel()
	const n = 64
	srv := redistest.Start(t)
	admin := srv.Client(t)
	l := newRedis(t, srv, redisbackend.Options{})
	for round := range 3 {
		if err := admin.FunctionFlush(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		if err := admin.ScriptFlush(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		before := scriptCalls(t, admin)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				key := locktest.UniqueKey(t)
				g, err := l.Acquire(t.Context(), key, locks.AcquireRequest{TTL: time.Minute})
				if err == nil {
					_, err = l.Release(t.Context(), key, g.Token)
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, client %d: %v", round, i, err)
			}
		}
		if got := scriptCalls(t, admin) - before; got != 2*n {
			t.Fatalf("round %d: got %d script calls run, want %d (one per acquire and release)", round, got, 2*n)
		}
	}
}

// A call after Close fails at once; it does not wait for senders that are
// gone.
func TestRedisCallAfterClose(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l := openRedis(t, newClient(t, srv), redisbackend.Options{})
	key := locktest.UniqueKey(t)
	locktest.MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute})
	l.Close()
	if _, err := l.Acquire(t.Context(), key, locks.AcquireRequest{TTL: time.Minute}); !errors.Is(err, locks.ErrUnavailable) {
		t.Fatalf("acquire after Close: got %v, want ErrUnavailable", err)
	}
}
