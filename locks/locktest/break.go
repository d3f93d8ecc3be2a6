package locktest

import (
	"context"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// RunBreak runs the break cases (locks.Breaker). newPair returns two
// backends of one store, made with a history of HistoryLen events: two
// gateways of one Redis, or the embedded backend twice; a waiter waits on
// the first, and the break comes through either.
func RunBreak(t *testing.T, newPair func(t *testing.T) (locks.Backend, locks.Backend)) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T, a, b locks.Backend, key locks.Key)
	}{
		{"BreakEndsTheGrantAndTellsItsHolder", testBreakExclusive},
		{"BreakHandsToAWaiterOfThisGateway", func(t *testing.T, a, _ locks.Backend, key locks.Key) { testBreakHandsOn(t, a, a, key) }},
		{"BreakHandsToAWaiterOfAnotherGateway", testBreakHandsOn},
		{"BreakEndsEverySharedHold", testBreakShared},
		{"BreakEndsEveryHoldOfAReenteredGrant", testBreakReentered},
		{"BreakOfAFreeLockIsNotHeld", testBreakFree},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, b := newPair(t)
			tc.test(t, a, b, UniqueKey(t))
		})
	}
}

// mustBreak breaks key through b as "admin" and checks how many grants
// ended.
func mustBreak(t *testing.T, b locks.Breaker, key locks.Key, want int) {
	t.Helper()
	got, err := b.Break(context.Background(), key, "admin")
	if err != nil {
		t.Fatalf("break %s: %v", key, err)
	}
	if got.Grants != want {
		t.Fatalf("break %s: got %d grants ended, want %d", key, got.Grants, want)
	}
}

// wantBroken checks that every call of the broken grant g's holder says
// broken, and changes nothing.
func wantBroken(t *testing.T, l locks.Locker, key locks.Key, g locks.Grant, mode locks.Mode) {
	t.Helper()
	_, err := l.Renew(context.Background(), key, g.Token, 0)
	wantReason(t, err, locks.ReasonBroken)
	_, err = l.Reenter(context.Background(), key, g.Token, time.Minute, mode)
	wantReason(t, err, locks.ReasonBroken)
	wantReason(t, errOf(l.Release(context.Background(), key, g.Token)), locks.ReasonBroken)
}

func testBreakExclusive(t *testing.T, a, b locks.Backend, key locks.Key) {
	g := MustAcquire(t, a, key, locks.AcquireRequest{TTL: time.Minute, Subject: "alice", Owner: "job-1"})
	mustBreak(t, b, key, 1)
	wantBroken(t, a, key, g, locks.Exclusive)
	if _, err := a.Inspect(context.Background(), key); err == nil {
		t.Fatalf("inspect after the break: got a holder, want %v", locks.ErrNotHeld)
	}
	next := MustAcquire(t, a, key, req(time.Minute))
	if next.FencingToken <= g.FencingToken {
		t.Fatalf("the grant after the break has fencing token %d, want more than %d", next.FencingToken, g.FencingToken)
	}
	got, events := kinds(t, a, key)
	if got != "acquired,broken,acquired" {
		t.Fatalf("history: got %q, want %q", got, "acquired,broken,acquired")
	}
	if e := events[1]; e.By != "admin" || e.Subject != "alice" || e.Owner != "job-1" || e.FencingToken != g.FencingToken {
		t.Fatalf("the broken event: got %+v, want by admin, of alice's grant %d (job-1)", e, g.FencingToken)
	}
}

// testBreakHandsOn breaks a lock with a waiter on a through b: the waiter
// gets it at once, with a larger fencing token.
func testBreakHandsOn(t *testing.T, a, b locks.Backend, key locks.Key) {
	g := MustAcquire(t, a, key, req(time.Minute))
	waiter := AcquireAsync(t.Context(), a, key, locks.AcquireRequest{TTL: time.Minute, Wait: 20 * time.Second, Subject: "bob"})
	WaitUntilQueued(t, a, key, 1)
	mustBreak(t, b, key, 1)
	res := <-waiter
	if res.Err != nil {
		t.Fatalf("waiter: %v", res.Err)
	}
	if res.Grant.FencingToken <= g.FencingToken {
		t.Fatalf("the waiter got fencing token %d, want more than the broken grant's %d", res.Grant.FencingToken, g.FencingToken)
	}
	wantBroken(t, a, key, g, locks.Exclusive)
	info, err := a.Inspect(context.Background(), key)
	if err != nil || info.Subject != "bob" || info.FencingToken != res.Grant.FencingToken {
		t.Fatalf("inspect after the hand-off: got %+v, %v, want bob's grant %d", info, err, res.Grant.FencingToken)
	}
	if _, err := a.Renew(context.Background(), key, res.Grant.Token, 0); err != nil {
		t.Fatalf("the new holder's renew: %v", err)
	}
	if got, _ := kinds(t, a, key); got != "renewed,handed_over,broken,acquired" {
		t.Fatalf("history: got %q, want %q", got, "renewed,handed_over,broken,acquired")
	}
}

func testBreakShared(t *testing.T, a, b locks.Backend, key locks.Key) {
	shared := locks.AcquireRequest{TTL: time.Minute, Subject: "reader", Mode: locks.Shared}
	var gs []locks.Grant
	for range 3 {
		gs = append(gs, MustAcquire(t, a, key, shared))
	}
	mustBreak(t, b, key, 3)
	for _, g := range gs {
		wantBroken(t, a, key, g, locks.Shared)
	}
	next := MustAcquire(t, a, key, req(time.Minute))
	for _, g := range gs {
		if next.FencingToken <= g.FencingToken {
			t.Fatalf("the grant after the break has fencing token %d, want more than %d", next.FencingToken, g.FencingToken)
		}
	}
	if got, _ := kinds(t, a, key); got != "acquired,broken,broken,broken,acquired,acquired,acquired" {
		t.Fatalf("history: got %q", got)
	}
}

func testBreakReentered(t *testing.T, a, b locks.Backend, key locks.Key) {
	g := MustAcquire(t, a, key, req(time.Minute))
	inner, err := a.Reenter(context.Background(), key, g.Token, time.Minute, locks.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	mustBreak(t, b, key, 1)
	_, err = a.ReleaseHold(context.Background(), key, g.Token, inner.Hold)
	wantReason(t, err, locks.ReasonBroken)
	wantBroken(t, a, key, g, locks.Exclusive)
	MustAcquire(t, a, key, req(time.Minute))
}

func testBreakFree(t *testing.T, a, b locks.Backend, key locks.Key) {
	_, err := b.Break(context.Background(), key, "admin")
	wantErr(t, err, locks.ErrNotHeld)
	g := MustAcquire(t, a, key, req(50*time.Millisecond))
	WaitUntilFree(t, a, key)
	_, err = b.Break(context.Background(), key, "admin")
	wantErr(t, err, locks.ErrNotHeld)
	// The expired grant stays expired: a break of a free lock changes nothing.
	_, err = a.Renew(context.Background(), key, g.Token, 0)
	wantReason(t, err, locks.ReasonExpired)
}
