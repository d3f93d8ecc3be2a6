package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// semIndex returns the index InspectSemaphore answers for key, held or
// not, and checks that a watch from below 0 reports the same.
func semIndex(t testing.TB, b locks.Backend, key locks.Key) (index int64, held bool) {
	t.Helper()
	info, err := b.InspectSemaphore(t.Context(), key)
	var nh *locks.NotHeldError
	switch {
	case err == nil:
		index, held = info.Index, true
	case errors.As(err, &nh):
		index = nh.Index
	default:
		t.Fatalf("inspect semaphore: got %v, want the holders or a *NotHeldError", err)
	}
	w, err := b.WatchSemaphore(t.Context(), key, -1)
	if err != nil || w.Index != index || w.Held != held || w.Info.Index != index {
		t.Fatalf("watch semaphore from -1: got index %d, held %t, %v; want index %d, held %t as inspect says", w.Index, w.Held, err, index, held)
	}
	return index, held
}

// semPollFrom long-polls key's semaphore from index after, on a
// goroutine: its answer comes on the channel.
func semPollFrom(ctx context.Context, b locks.Backend, key locks.Key, after int64) <-chan locks.SemaphoreWatch {
	out := make(chan locks.SemaphoreWatch, 1)
	go func() {
		w, err := b.WatchSemaphore(ctx, key, after)
		if err != nil {
			w.Index = -1 // no index is below 0: the check that reads it fails
		}
		out <- w
	}()
	return out
}

// wantSemNoChange checks that a long-poll of key's semaphore from index
// after waits: it ends with its deadline, at after.
func wantSemNoChange(t testing.TB, b locks.Backend, key locks.Key, after int64, what string) {
	t.Helper()
	short, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	w, err := b.WatchSemaphore(short, key, after)
	if !errors.Is(err, context.DeadlineExceeded) || w.Index != after {
		t.Fatalf("%s: a long-poll from index %d got index %d, %v; want it to wait for a change", what, after, w.Index, err)
	}
}

// waitUntilPermits polls until n permits of key's semaphore are held.
// InspectSemaphore alone: a lease may end between its read and a watch's
// (semIndex).
func waitUntilPermits(t testing.TB, b locks.Backend, key locks.Key, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := b.InspectSemaphore(t.Context(), key)
		if len(info.Holders) == n && (n > 0 || errors.Is(err, locks.ErrNotHeld)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("got %d permits held, %v; want %d within 10s", len(info.Holders), err, n)
		}
		time.Sleep(5 * time.Millisecond) // polling for a lease's end
	}
}

// testSemaphoreIndex: a semaphore's index (#39) moves on with each change
// that InspectSemaphore shows (a permit taken, renewed, released or
// expired, a waiter that joins or leaves, the limit changed), never
// repeats or goes back, and stays put while nothing changes: a long-poll
// from it waits for the next change, and answers it. A lease that ended
// with no call on the semaphore since counts as ended, and the index
// outlives the last lease.
func testSemaphoreIndex(t *testing.T, b locks.Backend, key locks.Key) {
	ctx := t.Context()
	if i, held := semIndex(t, b, key); i != 0 || held {
		t.Fatalf("a semaphore never used: got index %d, held %t; want 0, free", i, held)
	}
	last := int64(0)
	// next checks the index after a change: held as said, and above the
	// one before; a long-poll from the one before answered it.
	next := func(polled <-chan locks.SemaphoreWatch, held bool, what string) int64 {
		t.Helper()
		i, gotHeld := semIndex(t, b, key)
		if i <= last || gotHeld != held {
			t.Fatalf("%s: got index %d, held %t; want above %d, held %t", what, i, gotHeld, last, held)
		}
		if polled != nil {
			if w := <-polled; w.Index <= last || w.Held != held {
				t.Fatalf("%s: a long-poll from %d got index %d, held %t; want a later index, held %t", what, last, w.Index, w.Held, held)
			}
		}
		last = i
		return i
	}

	g := MustAcquirePermit(t, b, key, permitReq(2, time.Minute, 0))
	if first := next(nil, true, "after the first permit"); first < clock2020 {
		t.Fatalf("after the first permit: got index %d, want the clock in microseconds", first)
	}
	wantSemNoChange(t, b, key, last, "one permit held")

	polled := semPollFrom(ctx, b, key, last)
	g2 := MustAcquirePermit(t, b, key, permitReq(2, time.Minute, 0))
	next(polled, true, "a second permit taken")

	polled = semPollFrom(ctx, b, key, last)
	if _, err := b.RenewPermit(ctx, key, g.Token, 2*time.Minute); err != nil {
		t.Fatalf("renew: %v", err)
	}
	next(polled, true, "a permit renewed")

	// A waiter joins, then gives up.
	waitCtx, cancelWait := context.WithCancel(ctx)
	polled = semPollFrom(ctx, b, key, last)
	waiter := permitAsync(waitCtx, b, key, permitReq(2, time.Minute, time.Minute))
	waitUntilSemaphoreQueued(t, b, key, 1)
	next(polled, true, "a waiter joined")
	polled = semPollFrom(ctx, b, key, last)
	cancelWait()
	if r := <-waiter; r.Err == nil {
		t.Fatalf("a cancelled waiter got a permit")
	}
	waitUntilSemaphoreQueued(t, b, key, 0)
	next(polled, true, "the waiter left")

	polled = semPollFrom(ctx, b, key, last)
	if _, err := b.ResizeSemaphore(ctx, key, 3); err != nil {
		t.Fatalf("resize: %v", err)
	}
	next(polled, true, "the limit changed")

	// A permit handed to a waiter: the release and the hand-off.
	third := MustAcquirePermit(t, b, key, permitReq(3, time.Minute, 0))
	next(nil, true, "a third permit taken")
	waiter = permitAsync(ctx, b, key, permitReq(3, time.Minute, time.Minute))
	waitUntilSemaphoreQueued(t, b, key, 1)
	next(nil, true, "a waiter joined a full semaphore")
	polled = semPollFrom(ctx, b, key, last)
	if _, err := b.ReleasePermit(ctx, key, third.Token); err != nil {
		t.Fatalf("release: %v", err)
	}
	r := <-waiter
	if r.Err != nil {
		t.Fatalf("the waiter: %v, want the permit released", r.Err)
	}
	waitUntilSemaphoreQueued(t, b, key, 0)
	next(polled, true, "a permit handed to the waiter")
	polled = semPollFrom(ctx, b, key, last)
	if _, err := b.ReleasePermit(ctx, key, r.Grant.Token); err != nil {
		t.Fatalf("release: %v", err)
	}
	next(polled, true, "the handed permit released")

	polled = semPollFrom(ctx, b, key, last)
	if _, err := b.ReleasePermit(ctx, key, g2.Token); err != nil {
		t.Fatalf("release: %v", err)
	}
	next(polled, true, "a permit released")
	polled = semPollFrom(ctx, b, key, last)
	if _, err := b.ReleasePermit(ctx, key, g.Token); err != nil {
		t.Fatalf("release: %v", err)
	}
	next(polled, false, "the last permit released")
	wantSemNoChange(t, b, key, last, "idle")

	// A lease that ends with no call on the semaphore: inspect, which may
	// write nothing, answers its end as a change, and keeps answering it,
	// past the end of the last lease. First one of two.
	long := MustAcquirePermit(t, b, key, permitReq(2, time.Minute, 0))
	next(nil, true, "a long permit taken")
	MustAcquirePermit(t, b, key, permitReq(2, 150*time.Millisecond, 0))
	next(nil, true, "a short permit taken beside it")
	polled = semPollFrom(ctx, b, key, last)
	waitUntilPermits(t, b, key, 1)
	next(polled, true, "one lease of two ended unreleased")
	polled = semPollFrom(ctx, b, key, last)
	if _, err := b.ReleasePermit(ctx, key, long.Token); err != nil {
		t.Fatalf("release: %v", err)
	}
	next(polled, false, "the other released")
	// Then the only one.
	short := MustAcquirePermit(t, b, key, permitReq(1, 150*time.Millisecond, 0))
	acquired := next(nil, true, "a short permit taken")
	polled = semPollFrom(ctx, b, key, last)
	waitUntilPermits(t, b, key, 0)
	expired := next(polled, false, "a lease ended unreleased")
	wantSemNoChange(t, b, key, expired, "after a lease ended unreleased")
	if i, _ := semIndex(t, b, key); i != expired {
		t.Fatalf("after a lease ended unreleased, read again: got index %d, want %d", i, expired)
	}
	// The next call on the semaphore records the expiry, at the index
	// inspect answered, and moves it on by its own change only.
	if _, err := b.ReleasePermit(ctx, key, short.Token); !errors.Is(err, locks.ErrNotHolder) {
		t.Fatalf("release of an expired permit: got %v, want ErrNotHolder", err)
	}
	if i, _ := semIndex(t, b, key); i != expired {
		t.Fatalf("after a release that found the lease ended: got index %d, want %d, as before", i, expired)
	}
	MustAcquirePermit(t, b, key, permitReq(1, time.Minute, 0))
	if i := next(nil, true, "a permit taken after the expiry"); i <= acquired {
		t.Fatalf("got index %d, want above %d", i, acquired)
	}
}
