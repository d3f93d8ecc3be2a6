package locktest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// LockDelay is the lock delay RunLockDelay asks its backends for.
const LockDelay = 500 * time.Millisecond

// RunLockDelay runs the lock-delay cases against the Lockers newLocker
// returns, each made with a lock delay of LockDelay.
func RunLockDelay(t *testing.T, newLocker func(t *testing.T) locks.Locker) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T, l locks.Locker, key locks.Key)
	}{
		{"UnreleasedLeaseKeepsTheLockForTheDelay", testDelayAfterExpiry},
		{"ReleaseFreesAtOnce", testDelayNotAfterRelease},
		{"SharedLeaseEndingUnreleasedDelaysTheNextWriter", testDelayAfterSharedExpiry},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, newLocker(t), UniqueKey(t))
		})
	}
}

func testDelayAfterExpiry(t *testing.T, l locks.Locker, key locks.Key) {
	g := MustAcquire(t, l, key, req(100*time.Millisecond))
	WaitUntilFree(t, l, key)
	_, err := l.Acquire(context.Background(), key, req(time.Minute))
	var held *locks.HeldError
	if !errors.As(err, &held) || held.RetryAfter <= 0 || held.RetryAfter > LockDelay {
		t.Fatalf("acquire inside the delay: got %v; want held, retry within %v", err, LockDelay)
	}
	next, err := l.Acquire(context.Background(), key, locks.AcquireRequest{TTL: time.Minute, Wait: 10 * time.Second})
	if err != nil {
		t.Fatalf("a waiter: %v", err)
	}
	// The lease ended no sooner than g.ExpiresAt: the delay after it too.
	if now := time.Now(); now.Before(g.ExpiresAt.Add(LockDelay)) {
		t.Fatalf("granted %v after the lease's end at the earliest, inside the %v delay", now.Sub(g.ExpiresAt), LockDelay)
	}
	if next.FencingToken <= g.FencingToken {
		t.Fatalf("fence %d after %d", next.FencingToken, g.FencingToken)
	}
	if _, err := l.Release(context.Background(), key, next.Token); err != nil {
		t.Fatal(err)
	}
}

func testDelayNotAfterRelease(t *testing.T, l locks.Locker, key locks.Key) {
	for _, mode := range []locks.Mode{locks.Exclusive, locks.Shared} {
		g := MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute, Mode: mode, Subject: "x"})
		if _, err := l.Renew(context.Background(), key, g.Token, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Release(context.Background(), key, g.Token); err != nil {
			t.Fatal(err)
		}
		// At once: released, not vanished.
		next := MustAcquire(t, l, key, req(time.Minute))
		if _, err := l.Release(context.Background(), key, next.Token); err != nil {
			t.Fatal(err)
		}
	}
}

// testDelayAfterSharedExpiry: a shared lease that ends unreleased delays
// the next writer. The lease is 100 ms, and longer on a machine so busy
// that it ended before the second reader came ("lock held, retry after
// 459ms", load 16): each try on a lock of its own.
func testDelayAfterSharedExpiry(t *testing.T, l locks.Locker, key locks.Key) {
	var gone, stays locks.Grant
	name := key.Name
	for try, short := range []time.Duration{100 * time.Millisecond, time.Second, 3 * time.Second} {
		key.Name = fmt.Sprintf("%s-%d", name, try)
		gone = MustAcquire(t, l, key, sharedReq(short))
		var err error
		stays, err = l.Acquire(context.Background(), key, sharedReq(time.Minute))
		if errors.Is(err, locks.ErrHeld) && try < 2 {
			t.Logf("a %v shared lease ended before the second reader came (a busy machine): again with a longer one", short)
			continue
		}
		if err != nil {
			t.Fatalf("a second reader: %v", err)
		}
		break
	}
	waitUntilHolders(t, l, key, 1) // the short shared lease ended
	if _, err := l.Release(context.Background(), key, stays.Token); err != nil {
		t.Fatal(err)
	}
	_, err := l.Acquire(context.Background(), key, req(time.Minute))
	wantErr(t, err, locks.ErrHeld)
	w, err := l.Acquire(context.Background(), key, locks.AcquireRequest{TTL: time.Minute, Wait: 10 * time.Second})
	if err != nil {
		t.Fatalf("a waiting writer: %v", err)
	}
	if now := time.Now(); now.Before(gone.ExpiresAt.Add(LockDelay)) {
		t.Fatalf("the writer got the lock %v after the vanished reader's lease, inside the delay", now.Sub(gone.ExpiresAt))
	}
	if _, err := l.Release(context.Background(), key, w.Token); err != nil {
		t.Fatal(err)
	}
}
