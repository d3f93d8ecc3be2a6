package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// SharedCap is the cap of shared holders RunSharedCap asks its backends
// for (MaxSharedHolders).
const SharedCap = 3

// RunSharedCap runs the cases of the cap on shared holders against the
// Lockers newLocker returns, each made with MaxSharedHolders SharedCap.
func RunSharedCap(t *testing.T, newLocker func(t *testing.T) locks.Locker) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T, l locks.Locker, key locks.Key)
	}{
		{"SharedRequestPastTheCapRefusedSayingSo", testSharedCapRefuses},
		{"SharedWaiterPastTheCapGetsTheNextPlace", testSharedCapWaits},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, newLocker(t), UniqueKey(t))
		})
	}
}

// testSharedCapRefuses: with SharedCap shared holders, one more that does
// not wait is refused with a HeldError that names the cap and the soonest
// lease's end, and changes nothing; an exclusive request gets a plain one.
func testSharedCapRefuses(t *testing.T, l locks.Locker, key locks.Key) {
	for i := range SharedCap {
		MustAcquire(t, l, key, sharedReq(time.Duration(i+1)*time.Minute))
	}
	_, err := l.Acquire(context.Background(), key, sharedReq(time.Minute))
	var held *locks.HeldError
	if !errors.As(err, &held) || held.SharedFull != SharedCap || held.RetryAfter > time.Minute || held.RetryAfter < 50*time.Second {
		t.Fatalf("shared acquire past the cap: got %v (%+v), want a HeldError with SharedFull %d, retry within the soonest lease (1m)", err, held, SharedCap)
	}
	_, err = l.Acquire(context.Background(), key, req(time.Minute))
	if !errors.As(err, &held) || held.SharedFull != 0 {
		t.Fatalf("exclusive acquire: got %v, want a plain HeldError", err)
	}
	info, err := l.Inspect(context.Background(), key)
	if err != nil || len(info.Holders) != SharedCap || info.HoldersTotal != SharedCap {
		t.Fatalf("inspect: got %d holders of %d, %v; want %d", len(info.Holders), info.HoldersTotal, err, SharedCap)
	}
}

// testSharedCapWaits: a shared request that waits, past the cap, queues,
// and gets its hold when a holder releases; the lock never has more than
// the cap.
func testSharedCapWaits(t *testing.T, l locks.Locker, key locks.Key) {
	var holders []locks.Grant
	for range SharedCap {
		holders = append(holders, MustAcquire(t, l, key, sharedReq(time.Minute)))
	}
	w := queueAs(t, l, key, sharedReq(time.Minute), 1)
	stillWaiting(t, "shared waiter past the cap", w)
	mustRelease(t, l, key, holders[0])
	granted(t, "shared waiter after a release", w)
	info, err := l.Inspect(context.Background(), key)
	if err != nil || info.HoldersTotal != SharedCap {
		t.Fatalf("inspect: got %d holders, %v; want %d", info.HoldersTotal, err, SharedCap)
	}
}

// testInspectShowsAtMostMax: of a lock with more shared holders than
// MaxHoldersShown, Inspect describes the MaxHoldersShown whose leases end
// last, soonest first, and counts them all.
func testInspectShowsAtMostMax(t *testing.T, l locks.Locker, key locks.Key) {
	const n = locks.MaxHoldersShown + 20
	var last locks.Grant
	for i := range n {
		last = MustAcquire(t, l, key, sharedReq(time.Duration(i+1)*time.Second+time.Minute))
	}
	info, err := l.Inspect(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Holders) != locks.MaxHoldersShown || info.HoldersTotal != n {
		t.Fatalf("got %d holders described of %d, want %d of %d", len(info.Holders), info.HoldersTotal, locks.MaxHoldersShown, n)
	}
	for i := 1; i < len(info.Holders); i++ {
		if info.Holders[i].ExpiresAt.Before(info.Holders[i-1].ExpiresAt) {
			t.Fatalf("holder %d ends before holder %d: want the soonest first", i, i-1)
		}
	}
	if info.FencingToken != last.FencingToken || info.Holders[0].TTL < 20*time.Second+time.Minute-5*time.Second {
		t.Fatalf("got holders from ttl %s, described by fence %d; want the last %d, described by the last (%d)",
			info.Holders[0].TTL, info.FencingToken, locks.MaxHoldersShown, last.FencingToken)
	}
}
