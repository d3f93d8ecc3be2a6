package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// minHoldCases are the cases of AcquireRequest.MinHold, which Run runs.
var minHoldCases = []struct {
	name string
	test func(t *testing.T, l locks.Locker, key locks.Key)
}{
	{"MinHoldKeepsAReleasedLockUntilItEnds", testMinHoldKeeps},
	{"MinHoldHandsTheLockToTheWaiterWhenItEnds", testMinHoldWaiter},
	{"MinHoldWakesWaitersThatCameAfterTheRelease", testMinHoldWakesLaterWaiters},
	{"MinHoldPassedReleaseFreesAtOnce", testMinHoldPassed},
	{"MinHoldOfAWaitersGrant", testMinHoldHandedOver},
	{"MinHoldInvalid", testMinHoldInvalid},
	{"BreakEndsAMinHold", testMinHoldBreak},
	{"MinHoldUntilBehindAWaiter", testMinHoldBehindAWaiter},
}

// minHold is the min hold of the cases that look at a lock inside it:
// long enough that a busy machine answers within it.
const minHold = 3 * time.Second

// acquireMinHold acquires key with a lease of a minute and min hold mh,
// and returns the grant and when the call began: the grant was made no
// earlier, and its min hold ends no earlier than that plus mh.
func acquireMinHold(t *testing.T, l locks.Locker, key locks.Key, mh time.Duration) (locks.Grant, time.Time) {
	t.Helper()
	start := time.Now()
	return MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute, MinHold: mh, Subject: "cron", Owner: "host-a"}), start
}

// wantRestingUntil checks that l refuses key to others, and describes it
// as kept until the min hold's end, which lies between from+mh and to+mh.
func wantRestingUntil(t *testing.T, l locks.Locker, key locks.Key, from, to time.Time, mh time.Duration) {
	t.Helper()
	_, err := l.Inspect(context.Background(), key)
	var nh *locks.NotHeldError
	if !errors.As(err, &nh) || !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("inspect inside the min hold: got %v, want a NotHeldError", err)
	}
	if lo, hi := from.Add(mh).Add(-time.Millisecond), to.Add(mh).Add(time.Millisecond); nh.FreeAt.Before(lo) || nh.FreeAt.After(hi) {
		t.Fatalf("inspect: free at %v, want within [%v, %v]", nh.FreeAt, lo, hi)
	}
	before := time.Now()
	_, err = l.Acquire(context.Background(), key, req(time.Minute))
	var held *locks.HeldError
	if !errors.As(err, &held) {
		t.Fatalf("acquire inside the min hold: got %v, want held", err)
	}
	// 10 ms of slack, not 1: with every call delivered twice it once
	// answered a retry past this bound (2.961 s), by how much the old
	// message did not say. A retry a few ms late is a hint that errs on
	// the safe side; the bound finds one that says "not before" wrongly.
	if held.RetryAfter <= 0 || held.RetryAfter > nh.FreeAt.Sub(before)+10*time.Millisecond {
		t.Fatalf("acquire inside the min hold: retry after %v, want above 0 and at most %v, until %v",
			held.RetryAfter, nh.FreeAt.Sub(before)+10*time.Millisecond, nh.FreeAt)
	}
	if !held.MinHold {
		t.Fatalf("acquire inside the min hold: got %+v, want it to say a min hold keeps the lock", held)
	}
	// Until when, as Inspect says (the Redis backend reads it as the
	// clock plus what is left of the kept name: a millisecond apart).
	if d := held.FreeAt.Sub(nh.FreeAt); d < -10*time.Millisecond || d > 10*time.Millisecond {
		t.Fatalf("acquire inside the min hold: free at %v, want the end of the min hold Inspect states, %v", held.FreeAt, nh.FreeAt)
	}
	// A wait that runs out inside it says so too.
	_, err = l.Acquire(context.Background(), key, locks.AcquireRequest{TTL: time.Minute, Wait: time.Millisecond})
	if !errors.As(err, &held) || !held.MinHold {
		t.Fatalf("a wait that ran out inside the min hold: got %v, want a HeldError that says a min hold keeps the lock", err)
	}
	if d := held.FreeAt.Sub(nh.FreeAt); d < -10*time.Millisecond || d > 10*time.Millisecond {
		t.Fatalf("a wait that ran out inside the min hold: free at %v, want the end of the min hold Inspect states, %v", held.FreeAt, nh.FreeAt)
	}
}

func testMinHoldKeeps(t *testing.T, l locks.Locker, key locks.Key) {
	g, start := acquireMinHold(t, l, key, minHold)
	granted := time.Now()
	rel, err := l.Release(context.Background(), key, g.Token)
	if err != nil || !rel.Ended {
		t.Fatalf("release inside the min hold: got %+v, %v; want ended", rel, err)
	}
	wantRestingUntil(t, l, key, start, granted, minHold)
	// Its holder, done, asks again (with a new token): the same answer.
	_, err = l.Acquire(context.Background(), key, locks.AcquireRequest{TTL: time.Minute, MinHold: minHold, Subject: "cron", Owner: "host-a"})
	wantErr(t, err, locks.ErrHeld)
	// A release repeated changes nothing, and frees nothing.
	if _, err := l.Release(context.Background(), key, g.Token); err != nil {
		t.Fatalf("repeated release: %v", err)
	}
	_, err = l.Renew(context.Background(), key, g.Token, time.Minute)
	wantReason(t, err, locks.ReasonReleased)
	// A caller that waits gets it at the end of the min hold, no sooner.
	next, err := l.Acquire(context.Background(), key, locks.AcquireRequest{TTL: time.Minute, Wait: 20 * time.Second, Subject: "x"})
	if err != nil {
		t.Fatalf("acquire waiting out the min hold: %v", err)
	}
	if now := time.Now(); now.Before(start.Add(minHold)) {
		t.Fatalf("granted %v after the first grant began, inside its min hold of %v", now.Sub(start), minHold)
	}
	if next.FencingToken <= g.FencingToken {
		t.Fatalf("fence %d after %d", next.FencingToken, g.FencingToken)
	}
	if _, err := l.Release(context.Background(), key, next.Token); err != nil {
		t.Fatal(err)
	}
	// next had no min hold: its release frees the lock at once.
	MustAcquire(t, l, key, req(time.Minute))
}

// testMinHoldWaiter: a waiter queued while the grant holds the lock waits
// for a lease of a minute; the release inside the min hold must tell it
// to wait for the min hold's end instead, and it gets the lock then.
func testMinHoldWaiter(t *testing.T, l locks.Locker, key locks.Key) {
	g, start := acquireMinHold(t, l, key, minHold)
	waiter := AcquireAsync(context.Background(), l, key, locks.AcquireRequest{TTL: time.Minute, Wait: 30 * time.Second, Subject: "w"})
	WaitUntilQueued(t, l, key, 1)
	if _, err := l.Release(context.Background(), key, g.Token); err != nil {
		t.Fatal(err)
	}
	r := <-waiter
	if r.Err != nil {
		t.Fatalf("waiter: %v", r.Err)
	}
	// A lock held is not kept by a min hold.
	_, err := l.Acquire(context.Background(), key, req(time.Minute))
	if held := (*locks.HeldError)(nil); !errors.As(err, &held) || held.MinHold {
		t.Fatalf("acquire of a held lock: got %v, want a HeldError without MinHold", err)
	}
	if now := time.Now(); now.Before(start.Add(minHold)) {
		t.Fatalf("waiter granted %v after the first grant began, inside its min hold of %v", now.Sub(start), minHold)
	}
	if r.Grant.FencingToken <= g.FencingToken {
		t.Fatalf("fence %d after %d", r.Grant.FencingToken, g.FencingToken)
	}
	if _, err := l.Release(context.Background(), key, r.Grant.Token); err != nil {
		t.Fatal(err)
	}
}

func testMinHoldPassed(t *testing.T, l locks.Locker, key locks.Key) {
	const mh = 50 * time.Millisecond
	g, _ := acquireMinHold(t, l, key, mh)
	granted := time.Now() // the grant was made before: its min hold ends before granted+mh
	for !time.Now().After(granted.Add(mh + time.Millisecond)) {
		time.Sleep(5 * time.Millisecond) // waiting for the clock, not for another goroutine
	}
	if _, err := l.Release(context.Background(), key, g.Token); err != nil {
		t.Fatal(err)
	}
	next := MustAcquire(t, l, key, req(time.Minute))
	if _, err := l.Release(context.Background(), key, next.Token); err != nil {
		t.Fatal(err)
	}
}

// testMinHoldHandedOver: a waiter that asked for a min hold carries it
// into the grant handed to it.
func testMinHoldHandedOver(t *testing.T, l locks.Locker, key locks.Key) {
	first := MustAcquire(t, l, key, req(time.Minute))
	waiter := AcquireAsync(context.Background(), l, key, locks.AcquireRequest{TTL: time.Minute, Wait: 30 * time.Second, MinHold: minHold, Subject: "w"})
	WaitUntilQueued(t, l, key, 1)
	start := time.Now()
	if _, err := l.Release(context.Background(), key, first.Token); err != nil {
		t.Fatal(err)
	}
	r := <-waiter
	if r.Err != nil {
		t.Fatalf("waiter: %v", r.Err)
	}
	granted := time.Now()
	if _, err := l.Release(context.Background(), key, r.Grant.Token); err != nil {
		t.Fatal(err)
	}
	wantRestingUntil(t, l, key, start, granted, minHold)
}

func testMinHoldInvalid(t *testing.T, l locks.Locker, key locks.Key) {
	for name, r := range map[string]locks.AcquireRequest{
		"negative": {TTL: time.Minute, MinHold: -time.Millisecond},
		"shared":   {TTL: time.Minute, MinHold: time.Second, Mode: locks.Shared},
	} {
		if _, err := l.Acquire(context.Background(), key, r); !errors.Is(err, locks.ErrInvalid) {
			t.Errorf("%s: got %v, want %v", name, err, locks.ErrInvalid)
		}
	}
	// Nothing was taken.
	MustAcquire(t, l, key, req(time.Minute))
}

// testMinHoldBreak: an administrator's break ends a min hold as it ends
// a grant, and the lock goes to the next caller at once.
func testMinHoldBreak(t *testing.T, l locks.Locker, key locks.Key) {
	b, ok := l.(locks.Breaker)
	if !ok {
		t.Skip("the backend does not break locks")
	}
	g, _ := acquireMinHold(t, l, key, time.Minute)
	if _, err := l.Release(context.Background(), key, g.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Break(context.Background(), key, "admin", 0); err != nil {
		t.Fatalf("break inside a min hold: %v", err)
	}
	MustAcquire(t, l, key, req(time.Minute))
}

// testMinHoldBehindAWaiter: a wait that runs out inside a released grant's
// min hold, queued behind another waiter, is told until when the min hold
// keeps the lock, as the head of the queue is. On Redis a queued waiter
// behind the head is told no retry, and so no end (scripts_lock.go held):
// the answer at the wait's end must come from a look that is told it.
func testMinHoldBehindAWaiter(t *testing.T, l locks.Locker, key locks.Key) {
	g, _ := acquireMinHold(t, l, key, minHold)
	head := queueAs(t, l, key, locks.AcquireRequest{TTL: time.Minute, Wait: time.Minute, Subject: "head"}, 1)
	nh := releaseInsideMinHold(t, l, key, g)
	_, err := l.Acquire(context.Background(), key, locks.AcquireRequest{TTL: time.Minute, Wait: 50 * time.Millisecond, Subject: "behind"})
	var held *locks.HeldError
	if !errors.As(err, &held) || !held.MinHold {
		t.Fatalf("a wait behind the head that ran out inside the min hold: got %v, want a HeldError that says a min hold keeps the lock", err)
	}
	if d := held.FreeAt.Sub(nh.FreeAt); d < -10*time.Millisecond || d > 10*time.Millisecond {
		t.Fatalf("a wait behind the head that ran out inside the min hold: free at %v, want the end of the min hold Inspect states, %v", held.FreeAt, nh.FreeAt)
	}
	// The head still gets the lock, at the min hold's end.
	got := granted(t, "the head of the queue", head)
	if _, err := l.Release(context.Background(), key, got.Token); err != nil {
		t.Fatal(err)
	}
}

// releaseInsideMinHold releases g, a grant with a min hold, before its min
// hold ends, and returns what Inspect then says: nobody holds the lock, and
// the min hold keeps it until nh.FreeAt.
func releaseInsideMinHold(t *testing.T, l locks.Locker, key locks.Key, g locks.Grant) *locks.NotHeldError {
	t.Helper()
	if _, err := l.Release(context.Background(), key, g.Token); err != nil {
		t.Fatal(err)
	}
	_, err := l.Inspect(context.Background(), key)
	var nh *locks.NotHeldError
	if !errors.As(err, &nh) || nh.FreeAt.IsZero() {
		t.Fatalf("inspect after an early release: got %v, want a NotHeldError with the min hold's end", err)
	}
	return nh
}
