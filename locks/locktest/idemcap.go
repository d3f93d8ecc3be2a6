package locktest

import (
	"context"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// testIdemReplayStatesTheCap: a retry with the idempotency key of a grant
// with a hard cap answers the same hold_until as the first call did (to
// the millisecond each counts from its own start): a lock's exclusive and
// shared grants, and a permit.
func testIdemReplayStatesTheCap(t *testing.T, b locks.Backend, key locks.Key) {
	const maxHold = 2 * time.Minute
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		acquire func(k string) (locks.Grant, error)
	}{
		{"exclusive", func(k string) (locks.Grant, error) {
			return b.AcquireOnce(ctx, key, locks.AcquireRequest{TTL: time.Minute, MaxHold: maxHold}, k)
		}},
		{"shared", func(k string) (locks.Grant, error) {
			return b.AcquireOnce(ctx, key, locks.AcquireRequest{TTL: time.Minute, MaxHold: maxHold, Mode: locks.Shared}, k)
		}},
		{"permit", func(k string) (locks.Grant, error) {
			r := permitReq(2, time.Minute, 0)
			r.MaxHold = maxHold
			return b.AcquirePermitOnce(ctx, key, r, k)
		}},
	} {
		k := IdemKey(t)
		before := time.Now()
		first, err := c.acquire(k)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		latest := capEnd(maxHold) // the grant was made before this
		if first.HoldUntil.IsZero() {
			t.Fatalf("%s: the first call answered no hold_until: %+v", c.name, first.Lease)
		}
		retryStart := time.Now()
		retry, err := c.acquire(k)
		if err != nil {
			t.Fatalf("%s: retry: %v", c.name, err)
		}
		sameGrant(t, first, retry)
		// Counted from the retry's own start, as its lease is: no later
		// than the cap can end, and no earlier than that less how long
		// the retry took (its answer may have waited that long).
		lo := before.Add(maxHold - time.Since(retryStart) - time.Millisecond)
		if retry.HoldUntil.IsZero() || retry.HoldUntil.After(latest) || retry.HoldUntil.Before(lo) {
			t.Fatalf("%s: retry's hold_until %v, want the first call's (%v) within [%v, %v] (it answered %v)",
				c.name, retry.HoldUntil, first.HoldUntil, lo, latest, retry.Lease)
		}
		if retry.ExpiresAt.After(retry.HoldUntil) {
			t.Fatalf("%s: retry's lease ends %v, after its hold_until %v", c.name, retry.ExpiresAt, retry.HoldUntil)
		}
		release := b.Release
		if c.name == "permit" {
			release = b.ReleasePermit
		}
		if _, err := release(ctx, key, first.Token); err != nil {
			t.Fatalf("%s: release: %v", c.name, err)
		}
	}
}
