package locktest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// RunLockSets runs the lock set cases (locks.LockSets) on backends that
// newBackend makes.
func RunLockSets(t *testing.T, newBackend func(t *testing.T) locks.Backend) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T, b locks.Backend)
	}{
		{"AllOrNothing", testSetAllOrNothing},
		{"OneWinner", testSetOneWinner},
		{"CrossedOrdersNeverDeadlock", testSetCrossedOrders},
		{"FIFOPerLockBehindAPlainWaiter", testSetFIFO},
		{"PriorityNineServedBeforeTenEarlierZeros", testSetPriority},
		{"AWaitThatRunsOutRollsBack", testSetRollback},
		{"ALockLostWhileWaitingIsHeld", testSetLostWhileWaiting},
		{"ALockLostWhileWaitingEndsTheWait", testSetLossEndsWait},
		{"LeasesAfterAWaitAreTheTTL", testSetLeaseAfterWait},
		{"OneReleaseEndsThemAll", testSetRelease},
		{"RenewExtendsThemAll", testSetRenew},
		{"FencingStaysPerLock", testSetFencing},
		{"SizeAndDuplicates", testSetInvalid},
		{"MaxHoldCapsEveryLock", testSetMaxHold},
		{"MaxHoldCapsASetThatWaited", testSetMaxHoldAfterAWait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, newBackend(t))
		})
	}
}

// UniqueKeys returns n lock names no other test in this process uses.
func UniqueKeys(t testing.TB, n int) []locks.Key {
	keys := make([]locks.Key, n)
	for i := range keys {
		keys[i] = UniqueKey(t)
	}
	return keys
}

// MustAcquireSet acquires the set keys or fails the test.
func MustAcquireSet(t testing.TB, s locks.LockSets, keys []locks.Key, r locks.AcquireRequest) locks.SetGrant {
	t.Helper()
	g, err := s.AcquireSet(context.Background(), keys, r)
	if err != nil {
		t.Fatalf("acquire set %v: %v", keys, err)
	}
	return g
}

// wantFree fails the test unless nobody holds key.
func wantFree(t testing.TB, l locks.Locker, key locks.Key, when string) {
	t.Helper()
	if info, err := l.Inspect(context.Background(), key); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("%s: %s: got %+v, %v; want it free", when, key, info, err)
	}
}

// checkSetGrant checks that g holds every lock of keys, in their order,
// each with a live lease and the fencing token Inspect shows.
func checkSetGrant(t testing.TB, l locks.Locker, keys []locks.Key, g locks.SetGrant) {
	t.Helper()
	if g.Token == "" || len(g.Locks) != len(keys) || g.TTL <= 0 || time.Until(g.ExpiresAt) <= 0 {
		t.Fatalf("got set grant %+v, want a token and %d live locks", g, len(keys))
	}
	for i, k := range keys {
		sl := g.Locks[i]
		if sl.Key != k || sl.TTL <= 0 || sl.FencingToken <= 0 {
			t.Fatalf("lock %d: got %+v, want %s with a live lease", i, sl, k)
		}
		info, err := l.Inspect(context.Background(), k)
		if err != nil || info.FencingToken != sl.FencingToken {
			t.Fatalf("%s: got %+v, %v; want held with fencing token %d", k, info, err, sl.FencingToken)
		}
	}
}

func testSetAllOrNothing(t *testing.T, b locks.Backend) {
	keys := UniqueKeys(t, 3)
	other := MustAcquire(t, b, keys[1], req(time.Minute))
	_, err := b.AcquireSet(context.Background(), keys, req(time.Minute))
	var held *locks.HeldError
	if !errors.As(err, &held) || held.RetryAfter <= 0 {
		t.Fatalf("acquire a set with one lock held: got %v, want a HeldError with a retry", err)
	}
	wantFree(t, b, keys[0], "after a refused set")
	wantFree(t, b, keys[2], "after a refused set")
	if _, err := b.Release(context.Background(), keys[1], other.Token); err != nil {
		t.Fatal(err)
	}
	g := MustAcquireSet(t, b, keys, req(time.Minute))
	checkSetGrant(t, b, keys, g)
}

func testSetOneWinner(t *testing.T, b locks.Backend) {
	keys := UniqueKeys(t, 3)
	const n = 10
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		// Each racer names the locks in another order.
		set := []locks.Key{keys[i%3], keys[(i+1)%3], keys[(i+2)%3]}
		wg.Go(func() {
			_, err := b.AcquireSet(context.Background(), set, req(time.Minute))
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, locks.ErrHeld):
				t.Errorf("racer %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if got := wins.Load(); got != 1 {
		t.Fatalf("got %d winners, want 1", got)
	}
}

// testSetCrossedOrders: callers that name the same locks in opposite
// orders, all waiting, are each served in turn, and never two at once.
func testSetCrossedOrders(t *testing.T, b locks.Backend) {
	keys := UniqueKeys(t, 2)
	const callers, rounds = 4, 5
	var inside atomic.Int32
	var wg sync.WaitGroup
	for c := range callers {
		set := keys
		if c%2 == 1 {
			set = []locks.Key{keys[1], keys[0]}
		}
		wg.Go(func() {
			for r := range rounds {
				g, err := b.AcquireSet(context.Background(), set, locks.AcquireRequest{TTL: time.Minute, Wait: 20 * time.Second, Subject: "tester"})
				if err != nil {
					t.Errorf("caller %d round %d: %v", c, r, err)
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("caller %d round %d: %d sets hold the locks at once", c, r, n)
				}
				inside.Add(-1)
				if _, err := b.ReleaseSet(context.Background(), set, g.Token); err != nil {
					t.Errorf("caller %d round %d: release: %v", c, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// testSetFIFO: a set that waits queues in each lock's own queue: behind
// a plain waiter that came first, it gets the lock after that waiter.
func testSetFIFO(t *testing.T, b locks.Backend) {
	keys := UniqueKeys(t, 2)
	holder := MustAcquire(t, b, keys[1], req(time.Minute))
	first := QueueInOrder(t, keys[1], b)[0]
	set := make(chan error, 1)
	var sg locks.SetGrant
	go func() {
		var err error
		sg, err = b.AcquireSet(context.Background(), keys, locks.AcquireRequest{TTL: time.Minute, Wait: 20 * time.Second, Subject: "tester"})
		set <- err
	}()
	WaitUntilQueued(t, b, keys[1], 2)
	if _, err := b.Release(context.Background(), keys[1], holder.Token); err != nil {
		t.Fatal(err)
	}
	res := <-first
	if res.Err != nil {
		t.Fatalf("the plain waiter ahead: %v", res.Err)
	}
	select {
	case err := <-set:
		t.Fatalf("the set got its answer (%v) while the waiter ahead of it holds the lock", err)
	default:
	}
	if _, err := b.Release(context.Background(), keys[1], res.Grant.Token); err != nil {
		t.Fatal(err)
	}
	if err := <-set; err != nil {
		t.Fatalf("the set behind it: %v", err)
	}
	checkSetGrant(t, b, keys, sg)
	if sg.Locks[1].FencingToken <= res.Grant.FencingToken {
		t.Fatalf("got fencing token %d for the set, want above the waiter's %d", sg.Locks[1].FencingToken, res.Grant.FencingToken)
	}
}

// testSetPriority is #39's acceptance for a set: ten waiters at priority
// 0 queue on a held lock, then a set naming it waits at priority 9. A set
// waits in each lock's own queue with its request's priority, so it ranks
// first there and is served when the lock frees, before the ten; they
// follow in their order once the set is released. The set takes its first
// lock (free) before it queues on the held one, so the priority is that of
// a set that waits holding a lock, not only of its first wait.
func testSetPriority(t *testing.T, b locks.Backend) {
	ctx := context.Background()
	keys := UniqueKeys(t, 3)
	locks.SortSet(keys)
	held := keys[1]
	holder := MustAcquire(t, b, held, req(time.Minute))
	zeros := queueWaiters(t, b, held, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	set := make(chan error, 1)
	var sg locks.SetGrant
	go func() {
		var err error
		sg, err = b.AcquireSet(ctx, []locks.Key{keys[2], held, keys[0]},
			locks.AcquireRequest{TTL: time.Minute, Wait: 30 * time.Second, Subject: "tester", Owner: "set", Priority: 9})
		set <- err
	}()
	WaitUntilQueued(t, b, held, 11)
	info, err := b.Inspect(ctx, held)
	if want := []int{9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}; err != nil || !slices.Equal(info.QueuePriorities, want) {
		t.Fatalf("got queue priorities %v (%v), want %v: the set's waiter first", info.QueuePriorities, err, want)
	}
	if _, err := b.Release(ctx, held, holder.Token); err != nil {
		t.Fatal(err)
	}
	if err := <-set; err != nil {
		t.Fatalf("the set at priority 9: got %v, want it served first", err)
	}
	checkSetGrant(t, b, []locks.Key{keys[2], held, keys[0]}, sg)
	if info, err := b.Inspect(ctx, held); err != nil || info.Owner != "set" || info.Waiters != 10 {
		t.Fatalf("after the set's grant: got %+v, %v; want the set holding %s and the ten still waiting", info, err, held)
	}
	if _, err := b.ReleaseSet(ctx, keys, sg.Token); err != nil {
		t.Fatal(err)
	}
	res := <-zeros[0]
	if res.Err != nil {
		t.Fatalf("the first priority-0 waiter after the set: %v", res.Err)
	}
	if info, err := b.Inspect(ctx, held); err != nil || info.Owner != "w0" || res.Grant.FencingToken <= sg.Locks[1].FencingToken {
		t.Fatalf("after the set's release: got %+v, %v (w0's fencing token %d, the set's %d); want w0 next",
			info, err, res.Grant.FencingToken, sg.Locks[1].FencingToken)
	}
}

func testSetRollback(t *testing.T, b locks.Backend) {
	keys := UniqueKeys(t, 3)
	other := MustAcquire(t, b, keys[2], req(time.Minute))
	start := time.Now()
	_, err := b.AcquireSet(context.Background(), keys, locks.AcquireRequest{TTL: time.Minute, Wait: 300 * time.Millisecond, Subject: "tester"})
	if !errors.Is(err, locks.ErrHeld) {
		t.Fatalf("got %v, want ErrHeld once the wait ran out", err)
	}
	if elapsed := time.Since(start); elapsed < 300*time.Millisecond || elapsed > 5*time.Second {
		t.Fatalf("answered after %v, want after the wait of 300ms", elapsed)
	}
	wantFree(t, b, keys[0], "after the wait ran out")
	wantFree(t, b, keys[1], "after the wait ran out")
	if info, err := b.Inspect(context.Background(), keys[2]); err != nil || info.FencingToken != other.FencingToken {
		t.Fatalf("the other holder: got %+v, %v; want still its grant", info, err)
	}
}

// testSetLostWhileWaiting: a set that loses a lock it took (broken here)
// while it waits for the next never held the set, so it is refused as a
// set is, with the lock it lost as the one in the way: a HeldError that
// says when its holder now is done, and nothing held.
func testSetLostWhileWaiting(t *testing.T, b locks.Backend) {
	keys := UniqueKeys(t, 2)
	other := MustAcquire(t, b, keys[1], req(time.Minute))
	set := make(chan error, 1)
	go func() {
		_, err := b.AcquireSet(context.Background(), keys, locks.AcquireRequest{TTL: time.Minute, Wait: 20 * time.Second, Subject: "tester"})
		set <- err
	}()
	WaitUntilQueued(t, b, keys[1], 1) // the set holds keys[0], and waits
	if _, err := b.Break(context.Background(), keys[0], "admin", 0); err != nil {
		t.Fatalf("break %s: %v", keys[0], err)
	}
	taker := MustAcquire(t, b, keys[0], req(30*time.Second))
	if _, err := b.Release(context.Background(), keys[1], other.Token); err != nil {
		t.Fatal(err)
	}
	err := <-set
	var held *locks.HeldError
	if !errors.As(err, &held) || held.RetryAfter <= 0 || held.RetryAfter > 30*time.Second {
		t.Fatalf("a set that lost a lock while it waited: got %v, want a HeldError with a retry within the new holder's 30s", err)
	}
	wantFree(t, b, keys[1], "after the set that lost a lock")
	if info, err := b.Inspect(context.Background(), keys[0]); err != nil || info.FencingToken != taker.FencingToken {
		t.Fatalf("%s: got %+v, %v; want held by the caller that took it after the break", keys[0], info, err)
	}
}

// testSetLeaseAfterWait: a lock held while the set waited for the rest
// ends up with the set's TTL, not the TTL plus the wait.
func testSetLeaseAfterWait(t *testing.T, b locks.Backend) {
	keys := UniqueKeys(t, 2)
	other := MustAcquire(t, b, keys[1], req(time.Minute))
	set := make(chan error, 1)
	var sg locks.SetGrant
	go func() {
		var err error
		sg, err = b.AcquireSet(context.Background(), keys, locks.AcquireRequest{TTL: 2 * time.Second, Wait: 30 * time.Second, Subject: "tester"})
		set <- err
	}()
	WaitUntilQueued(t, b, keys[1], 1)
	if _, err := b.Release(context.Background(), keys[1], other.Token); err != nil {
		t.Fatal(err)
	}
	if err := <-set; err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		info, err := b.Inspect(context.Background(), k)
		if err != nil || info.TTL > 2*time.Second || info.TTL <= 0 {
			t.Fatalf("%s: got %+v, %v; want a lease of at most 2s", k, info.Lease, err)
		}
	}
	if sg.TTL > 2*time.Second {
		t.Fatalf("got set ttl %v, want at most 2s", sg.TTL)
	}
	// A renewal without a TTL restores the set's, not the longer lease a
	// lock had while the set waited.
	renewed, err := b.RenewSet(context.Background(), keys, sg.Token, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, sl := range renewed {
		if sl.TTL > 2*time.Second || sl.TTL <= 0 {
			t.Fatalf("%s renewed without a TTL: got %v, want at most 2s", sl.Key, sl.TTL)
		}
	}
}

func testSetRelease(t *testing.T, b locks.Backend) {
	keys := UniqueKeys(t, 3)
	g := MustAcquireSet(t, b, keys, req(time.Minute))
	if _, err := b.ReleaseSet(context.Background(), keys, "not-the-token"); !errors.Is(err, locks.ErrNotHolder) {
		t.Fatalf("release with another token: got %v, want ErrNotHolder", err)
	}
	rel, err := b.ReleaseSet(context.Background(), keys, g.Token)
	if err != nil || len(rel.Released) != 3 || len(rel.Gone) != 0 {
		t.Fatalf("release: got %+v, %v; want 3 released", rel, err)
	}
	for _, k := range keys {
		wantFree(t, b, k, "after the release")
	}
	if _, err := b.ReleaseSet(context.Background(), keys, g.Token); err != nil {
		t.Fatalf("a repeated release: got %v, want success", err)
	}
	// A lock a plain holder takes meanwhile is not the set's.
	plain := MustAcquire(t, b, keys[0], req(time.Minute))
	if _, err := b.ReleaseSet(context.Background(), keys, g.Token); err != nil {
		t.Fatalf("a repeated release: got %v, want success", err)
	}
	if info, err := b.Inspect(context.Background(), keys[0]); err != nil || info.FencingToken != plain.FencingToken {
		t.Fatalf("the plain holder after the set's repeated release: got %+v, %v", info, err)
	}
}

func testSetRenew(t *testing.T, b locks.Backend) {
	keys := UniqueKeys(t, 2)
	g := MustAcquireSet(t, b, keys, req(time.Second))
	renewed, err := b.RenewSet(context.Background(), keys, g.Token, time.Minute)
	if err != nil || len(renewed) != 2 {
		t.Fatalf("renew: got %+v, %v", renewed, err)
	}
	for i, sl := range renewed {
		if sl.Key != keys[i] || sl.TTL <= 50*time.Second || sl.FencingToken != g.Locks[i].FencingToken {
			t.Fatalf("renewed %d: got %+v, want %s for a minute with its fencing token", i, sl, keys[i])
		}
	}
	if _, err := b.RenewSet(context.Background(), keys, "not-the-token", time.Minute); !errors.Is(err, locks.ErrNotHolder) {
		t.Fatalf("renew with another token: got %v, want ErrNotHolder", err)
	}
	// A lock released on its own is the renewal's error.
	if _, err := b.ReleaseSet(context.Background(), keys[1:], g.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RenewSet(context.Background(), keys, g.Token, time.Minute); !errors.Is(err, locks.ErrNotHolder) {
		t.Fatalf("renew a set that lost a lock: got %v, want ErrNotHolder", err)
	}
}

func testSetFencing(t *testing.T, b locks.Backend) {
	keys := UniqueKeys(t, 4)
	last := make([]int64, len(keys))
	for i, k := range keys {
		g := MustAcquire(t, b, k, req(time.Minute))
		last[i] = g.FencingToken
		if _, err := b.Release(context.Background(), k, g.Token); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		g := MustAcquireSet(t, b, keys, req(time.Minute))
		checkSetGrant(t, b, keys, g)
		for i, sl := range g.Locks {
			if sl.FencingToken <= last[i] {
				t.Fatalf("round %d, %s: got fencing token %d, want above %d", round, sl.Key, sl.FencingToken, last[i])
			}
			last[i] = sl.FencingToken
		}
		if _, err := b.ReleaseSet(context.Background(), keys, g.Token); err != nil {
			t.Fatal(err)
		}
	}
}

func testSetInvalid(t *testing.T, b locks.Backend) {
	keys := UniqueKeys(t, locks.MaxSetLocks+1)
	g := MustAcquireSet(t, b, keys[:locks.MaxSetLocks], req(time.Minute))
	checkSetGrant(t, b, keys[:locks.MaxSetLocks], g)
	if _, err := b.ReleaseSet(context.Background(), keys[:locks.MaxSetLocks], g.Token); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		keys []locks.Key
		r    locks.AcquireRequest
	}{
		"17 locks":  {keys, req(time.Minute)},
		"none":      {nil, req(time.Minute)},
		"duplicate": {[]locks.Key{keys[0], keys[1], keys[0]}, req(time.Minute)},
		"shared":    {keys[:2], locks.AcquireRequest{TTL: time.Minute, Mode: locks.Shared}},
		"value":     {keys[:2], locks.AcquireRequest{TTL: time.Minute, Value: "v"}},
		"no ttl":    {keys[:2], locks.AcquireRequest{}},
	} {
		if _, err := b.AcquireSet(context.Background(), tc.keys, tc.r); !errors.Is(err, locks.ErrInvalid) {
			t.Fatalf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	for _, p := range []int{-1, locks.MaxPriority + 1} {
		_, err := b.AcquireSet(context.Background(), keys[:2], locks.AcquireRequest{TTL: time.Minute, Wait: time.Second, Priority: p})
		if !errors.Is(err, locks.ErrInvalidPriority) {
			t.Fatalf("priority %d: got %v, want ErrInvalidPriority", p, err)
		}
	}
	for _, k := range keys {
		wantFree(t, b, k, fmt.Sprintf("after the refused sets (%s)", k))
	}
}

// testSetLossEndsWait: a set that waits for one lock and loses one it took
// is refused when the loss is seen, not when its wait runs out (#36,
// finding 6): its other locks go back to the queues at once.
func testSetLossEndsWait(t *testing.T, b locks.Backend) {
	keys := UniqueKeys(t, 2)
	MustAcquire(t, b, keys[1], req(5*time.Minute)) // never released here
	set := make(chan error, 1)
	go func() {
		_, err := b.AcquireSet(context.Background(), keys, locks.AcquireRequest{TTL: time.Minute, Wait: 2 * time.Minute, Subject: "tester"})
		set <- err
	}()
	WaitUntilQueued(t, b, keys[1], 1) // the set holds keys[0], and waits
	if _, err := b.Break(context.Background(), keys[0], "admin", 0); err != nil {
		t.Fatalf("break %s: %v", keys[0], err)
	}
	// The loss is seen within a second or so; the wait runs two minutes.
	// A minute is a bound no busy machine reaches, and far from the wait.
	select {
	case err := <-set:
		var held *locks.HeldError
		if !errors.As(err, &held) {
			t.Fatalf("a set that lost a lock while it waited: got %v, want a HeldError", err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the set still waits a minute after it lost %s; its wait is two", keys[0])
	}
	WaitUntilQueued(t, b, keys[1], 0)
}
