package locktest

import (
	"context"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// testSetMaxHold: a set's grants are capped as any grant is
// (AcquireRequest.MaxHold): each lock answers its hold_until, no renewal
// of the set carries a lease past it, and Inspect shows the cap. Taken
// all at once (nobody in the way).
func testSetMaxHold(t *testing.T, b locks.Backend) {
	const maxHold = 2 * time.Second
	keys := UniqueKeys(t, 2)
	// A lease of a second: the renewal below must come within it, however
	// busy the machine.
	g := MustAcquireSet(t, b, keys, locks.AcquireRequest{TTL: time.Second, MaxHold: maxHold, Subject: "tester"})
	wantSetCapped(t, b, keys, g, capEnd(maxHold))
}

// testSetMaxHoldAfterAWait: the same for a set that waited in a queue,
// holding the locks it had meanwhile on a lease longer than its TTL,
// which the cap bounds too.
func testSetMaxHoldAfterAWait(t *testing.T, b locks.Backend) {
	const maxHold = 3 * time.Second
	keys := UniqueKeys(t, 2)
	other := MustAcquire(t, b, keys[1], req(time.Minute))
	type result struct {
		g   locks.SetGrant
		err error
	}
	set := make(chan result, 1)
	go func() {
		g, err := b.AcquireSet(context.Background(), keys, locks.AcquireRequest{TTL: time.Second, MaxHold: maxHold, Wait: 30 * time.Second, Subject: "tester"})
		set <- result{g, err}
	}()
	for queued := false; !queued; { // until it waits, unless it answered first
		select {
		case r := <-set:
			t.Fatalf("a capped set that should wait answered %+v, %v", r.g, r.err)
		case <-time.After(time.Millisecond):
		}
		info, err := b.Inspect(context.Background(), keys[1])
		queued = err == nil && info.Waiters >= 1
	}
	if _, err := b.Release(context.Background(), keys[1], other.Token); err != nil {
		t.Fatal(err)
	}
	r := <-set
	latest := capEnd(maxHold) // every lock was taken before the set answered
	if r.err != nil {
		t.Fatalf("a capped set that waits: %v", r.err)
	}
	wantSetCapped(t, b, keys, r.g, latest)
}

// wantSetCapped checks that every lock of g, a set of keys, states a
// hold_until no later than latest and a lease no later than it; that a
// renewal asking for more than the cap leaves ends at it; and that
// Inspect shows it.
func wantSetCapped(t *testing.T, b locks.Backend, keys []locks.Key, g locks.SetGrant, latest time.Time) {
	t.Helper()
	for _, sl := range g.Locks {
		switch {
		case sl.HoldUntil.IsZero():
			t.Fatalf("%s: grant of a capped set answered no hold_until: %+v", sl.Key, sl.Lease)
		case sl.HoldUntil.After(latest):
			t.Fatalf("%s: hold_until %v, want no later than %v", sl.Key, sl.HoldUntil, latest)
		case sl.ExpiresAt.After(sl.HoldUntil):
			t.Fatalf("%s: lease ends %v, after its hold_until %v", sl.Key, sl.ExpiresAt, sl.HoldUntil)
		}
	}
	renewed, err := b.RenewSet(context.Background(), keys, g.Token, time.Minute)
	if err != nil {
		t.Fatalf("renew the capped set: %v", err)
	}
	for _, sl := range renewed {
		switch {
		case sl.HoldUntil.IsZero():
			t.Fatalf("%s: renewal of a capped set answered no hold_until: %+v", sl.Key, sl.Lease)
		case sl.ExpiresAt.After(sl.HoldUntil) || sl.ExpiresAt.After(latest):
			t.Fatalf("%s: renewed for a minute, lease ends %v, past the cap (hold_until %v, %v at the latest)", sl.Key, sl.ExpiresAt, sl.HoldUntil, latest)
		case sl.TTL >= time.Minute:
			t.Fatalf("%s: renewed for %v, want less than the minute asked for", sl.Key, sl.TTL)
		}
	}
	for _, k := range keys {
		info, err := b.Inspect(context.Background(), k)
		if err != nil || info.HoldUntil.IsZero() || info.HoldUntil.After(latest) {
			t.Fatalf("%s: inspect %+v, %v; want held, with a hold_until no later than %v", k, info.Lease, err, latest)
		}
	}
}
