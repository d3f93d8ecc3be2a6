package locktest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// RunMaxHold runs the suite of hard caps on a hold (AcquireRequest.MaxHold,
// #39): no renewal or re-entry carries a grant past its acquisition plus
// its cap, every answer says until when (Lease.HoldUntil), and at the cap
// the grant ends as an expired one does, handed to the next waiter, with a
// history event max_hold. newBackend returns a backend that keeps
// HistoryLen events.
func RunMaxHold(t *testing.T, newBackend func(t *testing.T) locks.Backend) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T, b locks.Backend, key locks.Key)
	}{
		{"RenewalsStopAtTheCap", testMaxHoldRenewals},
		{"WaiterGetsTheLockAtTheCap", testMaxHoldHandsOn},
		{"ReentryStopsAtTheCap", testMaxHoldReentry},
		{"ReentryAtTheCapStatesNoLongerLease", testMaxHoldReentryAtTheCap},
		{"SharedHoldIsCapped", testMaxHoldShared},
		{"InspectShowsTheCap", testMaxHoldInspect},
		{"BadCapsRefused", testMaxHoldInvalid},
		{"SessionKeepAlivesStopAtTheCap", testMaxHoldSession},
		{"PermitIsCapped", testMaxHoldPermit},
		{"WithAMinHold", testMaxHoldWithMinHold},
		{"MinHoldLongerThanTheCapRefused", testMaxHoldBelowMinHold},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, newBackend(t), UniqueKey(t))
		})
	}
}

// renewUntilRefused renews g every few milliseconds, asking for ask each
// time, until the backend refuses, and checks every renewal against the
// cap: its lease ends no later than latest (the grant's acquisition plus
// its cap, as the caller can bound it from outside), nor than the
// HoldUntil it answers, which it always answers; a renewal that asked for
// more than is left of the cap ends at the cap. Returns how many renewals
// were answered and the refusal.
func renewUntilRefused(t testing.TB, l locks.Locker, key locks.Key, g locks.Grant, ask time.Duration, latest time.Time) (int, error) {
	t.Helper()
	return renewWithUntilRefused(t, l.Renew, key, g, ask, latest)
}

// renewWithUntilRefused is renewUntilRefused with renew (a lock's, or a
// permit's).
func renewWithUntilRefused(t testing.TB, renew func(context.Context, locks.Key, string, time.Duration) (locks.Lease, error),
	key locks.Key, g locks.Grant, ask time.Duration, latest time.Time) (int, error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for n := 0; ; n++ {
		lease, err := renew(context.Background(), key, g.Token, ask)
		if err != nil {
			return n, err
		}
		switch {
		case lease.HoldUntil.IsZero():
			t.Fatalf("renewal %d answered no hold_until: %+v", n, lease)
		case lease.ExpiresAt.After(lease.HoldUntil):
			t.Fatalf("renewal %d: lease ends %v, after its own hold_until %v", n, lease.ExpiresAt, lease.HoldUntil)
		case lease.ExpiresAt.After(latest):
			t.Fatalf("renewal %d: lease ends %v, past the acquisition plus the cap (%v at the latest)", n, lease.ExpiresAt, latest)
		case lease.TTL >= ask:
			t.Fatalf("renewal %d: got a lease of %v, want less than the %v asked for (the cap is shorter)", n, lease.TTL, ask)
		case !lease.ExpiresAt.Equal(lease.HoldUntil):
			t.Fatalf("renewal %d asked for more than the cap leaves: lease ends %v, want at hold_until %v", n, lease.ExpiresAt, lease.HoldUntil)
		}
		if time.Now().After(deadline) {
			t.Fatalf("renewed %d times for 30s: the cap never ended the grant", n)
		}
		time.Sleep(20 * time.Millisecond) // the holder's renewal pace, not synchronisation
	}
}

// capEnd is, for a grant with cap maxHold acquired before now, when its
// cap ends at the latest, as an answer may state it: Redis counts whole
// milliseconds, and a lease that ends at millisecond ms lives through it,
// so an answer counted from a call's start may state up to a millisecond
// past the cap's millisecond, never past Redis's own end.
func capEnd(maxHold time.Duration) time.Time {
	return time.Now().Add(maxHold + time.Millisecond)
}

func testMaxHoldRenewals(t *testing.T, b locks.Backend, key locks.Key) {
	// A lease of a second, not 200 ms: the first renewal must come within
	// it, however busy the machine.
	const maxHold = 2 * time.Second
	g := MustAcquire(t, b, key, locks.AcquireRequest{TTL: time.Second, MaxHold: maxHold, Subject: "alice"})
	latest := capEnd(maxHold)
	if g.HoldUntil.IsZero() || g.HoldUntil.After(latest) || g.ExpiresAt.After(g.HoldUntil) {
		t.Fatalf("grant %+v: want hold_until no later than %v, and after its lease's end", g.Lease, latest)
	}
	n, err := renewUntilRefused(t, b, key, g, 10*time.Second, latest)
	if n == 0 {
		t.Fatalf("the first renewal was refused: %v", err)
	}
	wantReason(t, err, locks.ReasonExpired)
	WaitUntilFree(t, b, key)
	// Before another script touches the lock, and after.
	for _, want := range []string{"max_hold,", "released,acquired,max_hold,"} {
		got, events := kinds(t, b, key)
		if !strings.HasPrefix(got, want) {
			t.Fatalf("history %q, want it to begin %q", got, want)
		}
		for _, e := range events {
			if e.Kind == "max_hold" && (e.FencingToken != g.FencingToken || e.Subject != "alice" || e.At.After(latest)) {
				t.Fatalf("max_hold event %+v: want alice's grant %d, at its cap (%v at the latest)", e, g.FencingToken, latest)
			}
		}
		next := MustAcquire(t, b, key, req(time.Minute))
		if !next.HoldUntil.IsZero() {
			t.Fatalf("a grant without a cap answered hold_until %v", next.HoldUntil)
		}
		if _, err := b.Release(context.Background(), key, next.Token); err != nil {
			t.Fatal(err)
		}
	}
}

// testMaxHoldHandsOn is the acceptance of #39 in the engine: a holder
// that renews until refused keeps a waiter out only until its cap, and
// the waiter gets the lock by the hand-off, with its own cap.
func testMaxHoldHandsOn(t *testing.T, b locks.Backend, key locks.Key) {
	const maxHold = 600 * time.Millisecond
	holder := MustAcquire(t, b, key, locks.AcquireRequest{TTL: 200 * time.Millisecond, MaxHold: maxHold, Subject: "holder"})
	latest := capEnd(maxHold)
	waiter := AcquireAsync(context.Background(), b, key,
		locks.AcquireRequest{TTL: 200 * time.Millisecond, MaxHold: time.Minute, Wait: 30 * time.Second, Subject: "waiter"})
	WaitUntilQueued(t, b, key, 1)
	if _, err := renewUntilRefused(t, b, key, holder, 150*time.Millisecond+maxHold, latest); !errors.Is(err, locks.ErrNotHolder) {
		t.Fatalf("the holder's last renewal: got %v, want ErrNotHolder", err)
	}
	res := <-waiter
	if res.Err != nil {
		t.Fatalf("the waiter: %v", res.Err)
	}
	g := res.Grant
	if g.FencingToken <= holder.FencingToken || g.HoldUntil.IsZero() || g.ExpiresAt.After(g.HoldUntil) {
		t.Fatalf("the waiter's grant %+v: want a fencing token past %d, and its own hold_until", g.Lease, holder.FencingToken)
	}
	if _, err := b.Release(context.Background(), key, g.Token); err != nil {
		t.Fatal(err)
	}
}

func testMaxHoldReentry(t *testing.T, b locks.Backend, key locks.Key) {
	const maxHold = 2 * time.Second
	// A lease of a second, not 200 ms: the re-entry must come within it,
	// however busy the machine.
	g := MustAcquire(t, b, key, locks.AcquireRequest{TTL: time.Second, MaxHold: maxHold})
	latest := capEnd(maxHold)
	again, err := b.Reenter(context.Background(), key, g.Token, time.Minute, locks.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	if again.HoldUntil.IsZero() || again.ExpiresAt.After(again.HoldUntil) || again.ExpiresAt.After(latest) || again.TTL >= time.Minute {
		t.Fatalf("re-entry asking for 1m under a 2s cap: got %+v, want a lease up to hold_until, no later than %v", again.Lease, latest)
	}
	WaitUntilFree(t, b, key)
	if _, err := b.Renew(context.Background(), key, g.Token, 0); !errors.Is(err, locks.ErrNotHolder) {
		t.Fatalf("renew after the cap: got %v, want ErrNotHolder", err)
	}
}

// reentriesAtTheCap is how many re-entries testMaxHoldReentryAtTheCap
// makes: the fault matrix found one answer in a few hundred 1 ms long.
const reentriesAtTheCap = 300

// testMaxHoldReentryAtTheCap: a grant whose lease already ends at its cap
// is re-entered again and again; no answer states a lease past its own
// hold_until (the fault matrix's maxhold row: "a re-entry answered ... a
// lease to 01:00:50.689000, past its hold_until 01:00:50.688000").
func testMaxHoldReentryAtTheCap(t *testing.T, b locks.Backend, key locks.Key) {
	ctx := context.Background()
	g := MustAcquire(t, b, key, locks.AcquireRequest{TTL: time.Minute, MaxHold: time.Minute})
	for i := range reentriesAtTheCap {
		again, err := b.Reenter(ctx, key, g.Token, time.Minute, locks.Exclusive)
		if err != nil {
			t.Fatalf("re-entry %d: %v", i, err)
		}
		if again.HoldUntil.IsZero() || again.ExpiresAt.After(again.HoldUntil) {
			t.Fatalf("re-entry %d of a grant whose lease ends at its cap: lease to %v, past its hold_until %v",
				i, again.ExpiresAt.Format("15:04:05.000000"), again.HoldUntil.Format("15:04:05.000000"))
		}
		if _, err := b.ReleaseHold(ctx, key, g.Token, again.Hold); err != nil {
			t.Fatalf("release re-entry %d: %v", i, err)
		}
	}
	if _, err := b.Release(ctx, key, g.Token); err != nil {
		t.Fatal(err)
	}
}

func testMaxHoldShared(t *testing.T, b locks.Backend, key locks.Key) {
	const maxHold = 600 * time.Millisecond
	g := MustAcquire(t, b, key, locks.AcquireRequest{TTL: 200 * time.Millisecond, MaxHold: maxHold, Mode: locks.Shared, Subject: "reader"})
	latest := capEnd(maxHold)
	other := MustAcquire(t, b, key, locks.AcquireRequest{TTL: time.Minute, Mode: locks.Shared})
	if g.HoldUntil.IsZero() || !other.HoldUntil.IsZero() {
		t.Fatalf("hold_until: capped %v, uncapped %v; want set, and zero", g.HoldUntil, other.HoldUntil)
	}
	if _, err := renewUntilRefused(t, b, key, g, time.Minute, latest); !errors.Is(err, locks.ErrNotHolder) {
		t.Fatalf("the capped reader's last renewal: got %v, want ErrNotHolder", err)
	}
	info := waitUntilHolders(t, b, key, 1)
	if info.FencingToken != other.FencingToken {
		t.Fatalf("left holding: %+v, want the uncapped reader", info)
	}
	got, events := kinds(t, b, key)
	if !strings.Contains(got, "max_hold") {
		t.Fatalf("history %q: want the capped reader's max_hold", got)
	}
	for _, e := range events {
		if e.Kind == "max_hold" && (e.FencingToken != g.FencingToken || e.Subject != "reader") {
			t.Fatalf("max_hold event %+v: want the capped reader's %d", e, g.FencingToken)
		}
	}
	b.Release(context.Background(), key, other.Token)
}

func testMaxHoldInspect(t *testing.T, b locks.Backend, key locks.Key) {
	g := MustAcquire(t, b, key, locks.AcquireRequest{TTL: time.Minute, MaxHold: time.Hour})
	info, err := b.Inspect(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if info.HoldUntil.IsZero() || len(info.Holders) != 1 || !info.Holders[0].HoldUntil.Equal(info.HoldUntil) ||
		info.HoldUntil.After(g.HoldUntil.Add(time.Second)) || info.HoldUntil.Before(g.HoldUntil.Add(-time.Second)) {
		t.Fatalf("inspect %+v: want the holder's hold_until, about %v", info, g.HoldUntil)
	}
	b.Release(context.Background(), key, g.Token)
	plain := MustAcquire(t, b, key, req(time.Minute))
	if info, err = b.Inspect(context.Background(), key); err != nil || !info.HoldUntil.IsZero() {
		t.Fatalf("inspect of a grant without a cap: %+v, %v; want no hold_until", info, err)
	}
	b.Release(context.Background(), key, plain.Token)
}

func testMaxHoldInvalid(t *testing.T, b locks.Backend, key locks.Key) {
	for name, r := range map[string]locks.AcquireRequest{
		"negative":      {TTL: time.Second, MaxHold: -time.Second},
		"below the ttl": {TTL: time.Second, MaxHold: 999 * time.Millisecond},
	} {
		if _, err := b.Acquire(context.Background(), key, r); !errors.Is(err, locks.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	_, err := b.AcquirePermit(context.Background(), key, locks.SemaphoreRequest{Limit: 2,
		AcquireRequest: locks.AcquireRequest{TTL: time.Second, MaxHold: time.Millisecond}})
	if !errors.Is(err, locks.ErrInvalid) {
		t.Errorf("a permit with a cap below its ttl: got %v, want ErrInvalid", err)
	}
	if _, err := b.Inspect(context.Background(), key); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("after refusals: inspect %v, want ErrNotHeld", err)
	}
}

// testMaxHoldSession: a session's keep-alives renew its grants, and a
// grant with a cap no further than the cap: then it is gone from the
// session, and free, while the session lives on.
func testMaxHoldSession(t *testing.T, b locks.Backend, key locks.Key) {
	ctx := context.Background()
	ss, err := b.OpenSession(ctx, "agent", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer b.EndSession(ctx, ss.Token, "agent")
	const maxHold = 600 * time.Millisecond
	g, err := b.AcquireInSession(ctx, ss.Token, key, locks.AcquireRequest{MaxHold: maxHold, Subject: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	latest := capEnd(maxHold)
	if g.HoldUntil.IsZero() || g.ExpiresAt.After(g.HoldUntil) || g.ExpiresAt.After(latest) {
		t.Fatalf("a capped grant in a session of 1m: %+v, want a lease up to hold_until, no later than %v", g.Lease, latest)
	}
	deadline := time.Now().Add(30 * time.Second)
	for n := 0; ; n++ {
		kept, err := b.KeepSession(ctx, ss.Token, "agent", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(kept.Gone) == 1 && kept.Gone[0].Key == key {
			break
		}
		if len(kept.Renewed) != 1 || kept.Renewed[0].ExpiresAt.After(latest) {
			t.Fatalf("keep-alive %d: renewed %+v, want the one grant, its lease no later than %v", n, kept.Renewed, latest)
		}
		if time.Now().After(deadline) {
			t.Fatalf("kept the session %d times for 30s: the cap never ended its grant", n)
		}
		time.Sleep(20 * time.Millisecond) // the keep-alive's pace, not synchronisation
	}
	WaitUntilFree(t, b, key)
	if _, err := b.KeepSession(ctx, ss.Token, "agent", 0); err != nil {
		t.Fatalf("the session after its grant's cap: %v, want it alive", err)
	}
}

// testMaxHoldPermit: a semaphore's permit takes a cap as a lock's grant
// does; at the cap its place goes to the waiter.
func testMaxHoldPermit(t *testing.T, b locks.Backend, key locks.Key) {
	const maxHold = 600 * time.Millisecond
	ctx := context.Background()
	permit := func(r locks.AcquireRequest) locks.SemaphoreRequest {
		return locks.SemaphoreRequest{AcquireRequest: r, Limit: 1}
	}
	g, err := b.AcquirePermit(ctx, key, permit(locks.AcquireRequest{TTL: 200 * time.Millisecond, MaxHold: maxHold, Subject: "worker"}))
	if err != nil {
		t.Fatal(err)
	}
	latest := capEnd(maxHold)
	if g.HoldUntil.IsZero() || g.HoldUntil.After(latest) {
		t.Fatalf("permit %+v: want hold_until, no later than %v", g.Lease, latest)
	}
	info, err := b.InspectSemaphore(ctx, key)
	if err != nil || len(info.Holders) != 1 || info.Holders[0].HoldUntil.IsZero() {
		t.Fatalf("inspect: %+v, %v; want the holder's hold_until", info, err)
	}
	waiter := make(chan error, 1)
	go func() {
		w, err := b.AcquirePermit(ctx, key, permit(locks.AcquireRequest{TTL: time.Minute, Wait: 30 * time.Second, Subject: "next"}))
		if err == nil && w.FencingToken <= g.FencingToken {
			err = errors.New("the waiter's permit has an older fencing token")
		}
		if err == nil {
			_, err = b.ReleasePermit(ctx, key, w.Token)
		}
		waiter <- err
	}()
	if _, err := renewWithUntilRefused(t, b.RenewPermit, key, g, time.Minute, latest); !errors.Is(err, locks.ErrNotHolder) {
		t.Fatalf("the permit's last renewal: got %v, want ErrNotHolder", err)
	}
	if err := <-waiter; err != nil {
		t.Fatalf("the waiter: %v", err)
	}
}
