package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// maxHoldOverMinHold is the cap of the cases where one grant has both a
// min hold (minHold) and a hard cap: long enough past the min hold that
// the two ends cannot be taken for each other on a busy machine.
const maxHoldOverMinHold = 2 * minHold

// testMaxHoldWithMinHold: one grant with a min hold and a hard cap keeps
// both, each with its own end. Its renewals stop at the cap (acquisition
// plus max hold), not at the min hold's end; its release inside the min
// hold keeps the lock from others until the min hold's end, not the cap's;
// and the grant after it carries neither.
func testMaxHoldWithMinHold(t *testing.T, b locks.Backend, key locks.Key) {
	ctx := context.Background()
	start := time.Now()
	g := MustAcquire(t, b, key, locks.AcquireRequest{TTL: time.Second, MinHold: minHold, MaxHold: maxHoldOverMinHold, Subject: "cron"})
	granted := time.Now()
	wantHoldUntil(t, "grant", g.Lease, start, granted)
	sent := time.Now()
	lease, err := b.Renew(ctx, key, g.Token, time.Minute)
	if err != nil {
		t.Fatalf("renew: %v", err)
	}
	// A renewal counts what is left of the cap from when it was sent, so
	// its hold_until may be early by as much as its round trip took.
	wantHoldUntil(t, "renewal", lease, start.Add(-time.Since(sent)), granted)
	if !lease.ExpiresAt.Equal(lease.HoldUntil) {
		t.Fatalf("renewal asking for a minute: lease ends %v, want at its hold_until %v", lease.ExpiresAt, lease.HoldUntil)
	}
	if _, err := b.Release(ctx, key, g.Token); err != nil {
		t.Fatal(err)
	}
	wantRestingUntil(t, b, key, start, granted, minHold)

	// A waiter's grant carries both too (it waits out the first min hold).
	waiter := AcquireAsync(ctx, b, key, locks.AcquireRequest{TTL: time.Second, Wait: 30 * time.Second,
		MinHold: minHold, MaxHold: maxHoldOverMinHold, Subject: "w"})
	r := <-waiter
	if r.Err != nil {
		t.Fatalf("waiter: %v", r.Err)
	}
	wGranted := time.Now()
	if wGranted.Before(start.Add(minHold)) {
		t.Fatalf("waiter granted %v after the first grant began, inside its min hold of %v", wGranted.Sub(start), minHold)
	}
	// It was granted after the first min hold's end, and before wGranted.
	wantHoldUntil(t, "waiter's grant", r.Grant.Lease, start.Add(minHold), wGranted)
	if _, err := b.Release(ctx, key, r.Grant.Token); err != nil {
		t.Fatal(err)
	}
	wantRestingUntil(t, b, key, start.Add(minHold), wGranted, minHold)

	next, err := b.Acquire(ctx, key, locks.AcquireRequest{TTL: time.Minute, Wait: 30 * time.Second, Subject: "next"})
	if err != nil {
		t.Fatalf("acquire after the min hold: %v", err)
	}
	if !next.HoldUntil.IsZero() {
		t.Fatalf("a grant without a cap after one with both answered hold_until %v", next.HoldUntil)
	}
	if _, err := b.Release(ctx, key, next.Token); err != nil {
		t.Fatal(err)
	}
	MustAcquire(t, b, key, req(time.Minute)) // next had no min hold: the lock is free at once
}

// wantHoldUntil checks that lease, of a grant made between from and to
// with the cap maxHoldOverMinHold, says its cap ends then, and its lease
// no later.
func wantHoldUntil(t *testing.T, what string, lease locks.Lease, from, to time.Time) {
	t.Helper()
	lo, hi := from.Add(maxHoldOverMinHold).Add(-time.Millisecond), to.Add(maxHoldOverMinHold).Add(time.Millisecond)
	switch {
	case lease.HoldUntil.Before(lo) || lease.HoldUntil.After(hi):
		t.Fatalf("%s: hold_until %v, want the cap's end within [%v, %v] (not the min hold's)", what, lease.HoldUntil, lo, hi)
	case lease.ExpiresAt.After(lease.HoldUntil):
		t.Fatalf("%s: lease ends %v, after its hold_until %v", what, lease.ExpiresAt, lease.HoldUntil)
	}
}

// testMaxHoldBelowMinHold: a min hold longer than the cap could never be
// kept, for the cap ends the grant first: refused as invalid, and nothing
// taken. A min hold equal to the cap is fine.
func testMaxHoldBelowMinHold(t *testing.T, b locks.Backend, key locks.Key) {
	ctx := context.Background()
	_, err := b.Acquire(ctx, key, locks.AcquireRequest{TTL: time.Second, MinHold: 3 * time.Second, MaxHold: 2 * time.Second})
	if !errors.Is(err, locks.ErrInvalid) {
		t.Fatalf("a min hold of 3s under a cap of 2s: got %v, want ErrInvalid", err)
	}
	if _, err := b.Inspect(ctx, key); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("after the refusal: inspect %v, want ErrNotHeld", err)
	}
	g := MustAcquire(t, b, key, locks.AcquireRequest{TTL: time.Second, MinHold: 2 * time.Second, MaxHold: 2 * time.Second})
	if g.HoldUntil.IsZero() {
		t.Fatalf("grant %+v: want a hold_until", g.Lease)
	}
}
