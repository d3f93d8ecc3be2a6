package locktest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// RunSemaphores runs the semaphore suite. newBackend returns a backend for
// one test; tests run in parallel on names of their own.
func RunSemaphores(t *testing.T, newBackend func(t *testing.T) locks.Backend) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T, b locks.Backend, key locks.Key)
	}{
		{"LimitHoldsUnderConcurrency", testLimitHolds},
		{"PermitsHaveTheirOwnTokensAndFences", testPermitsOwnTokens},
		{"ReleaseAndRenewNeedAHoldersToken", testPermitNotHolder},
		{"LimitMismatchWhileInUse", testLimitMismatch},
		{"ExpiredPermitPassesToWaiter", testPermitExpiry},
		{"WaitersGetPermitsInArrivalOrder", testPermitFIFO},
		{"WaitTimesOutWithFull", testPermitWaitTimesOut},
		{"CancelledWaiterLeavesNoPermit", testPermitCancelled},
		{"InspectDescribesHolders", testInspectSemaphore},
		{"InvalidLimitsRejected", testInvalidLimit},
		{"SemaphoreAndLockOfOneNameAreUnrelated", testSemaphoreLockApart},
		{"ReleaseSaysWhatItEnded", testPermitReleaseSaysWhatItEnded},
		{"RaisedLimitHandsPermitsToWaiters", testResizeUp},
		{"LoweredLimitRevokesNothingAndGrantsNothingUntilBelow", testResizeDown},
		{"ResizeOfIdleOrInvalid", testResizeIdle},
		{"IndexMovesWithEveryChangeAndWatchesWait", testSemaphoreIndex},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, newBackend(t), UniqueKey(t))
		})
	}
}

func permitReq(limit int, ttl, wait time.Duration) locks.SemaphoreRequest {
	return locks.SemaphoreRequest{AcquireRequest: locks.AcquireRequest{TTL: ttl, Wait: wait, Subject: "test"}, Limit: limit}
}

// MustAcquirePermit takes a permit or fails the test.
func MustAcquirePermit(t testing.TB, s locks.Semaphores, key locks.Key, r locks.SemaphoreRequest) locks.Grant {
	t.Helper()
	g, err := s.AcquirePermit(context.Background(), key, r)
	if err != nil {
		t.Fatalf("acquire permit of %s: %v", key, err)
	}
	return g
}

func permitAsync(ctx context.Context, s locks.Semaphores, key locks.Key, r locks.SemaphoreRequest) <-chan Result {
	ch := make(chan Result, 1)
	go func() {
		start := time.Now()
		g, err := s.AcquirePermit(ctx, key, r)
		ch <- Result{Grant: g, Err: err, Elapsed: time.Since(start)}
	}()
	return ch
}

// waitUntilSemaphoreQueued polls until n callers wait for a permit.
func waitUntilSemaphoreQueued(t testing.TB, s locks.Semaphores, key locks.Key, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := s.InspectSemaphore(context.Background(), key)
		if err == nil && info.Waiters == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("got %+v, %v; want %d waiters", info, err, n)
		}
		time.Sleep(time.Millisecond) // polling the backend
	}
}

func testLimitHolds(t *testing.T, b locks.Backend, key locks.Key) {
	const limit, callers = 3, 30
	var mu sync.Mutex
	var won []locks.Grant
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			g, err := b.AcquirePermit(context.Background(), key, permitReq(limit, time.Minute, 0))
			var full *locks.FullError
			switch {
			case err == nil:
				mu.Lock()
				won = append(won, g)
				mu.Unlock()
			case errors.As(err, &full):
				if full.RetryAfter <= 0 || full.RetryAfter > time.Minute {
					t.Errorf("retry after %v, want the soonest lease end, within a minute", full.RetryAfter)
				}
			default:
				t.Errorf("got %v, want a permit or ErrFull", err)
			}
		})
	}
	wg.Wait()
	if len(won) != limit {
		t.Fatalf("%d permits granted, want %d", len(won), limit)
	}
	for _, g := range won {
		if _, err := b.ReleasePermit(context.Background(), key, g.Token); err != nil {
			t.Fatal(err)
		}
	}
}

func testPermitsOwnTokens(t *testing.T, b locks.Backend, key locks.Key) {
	a := MustAcquirePermit(t, b, key, permitReq(2, time.Minute, 0))
	c := MustAcquirePermit(t, b, key, permitReq(2, time.Minute, 0))
	if a.Token == c.Token || c.FencingToken <= a.FencingToken {
		t.Fatalf("got tokens %q, %q and fences %d, %d; want distinct tokens, increasing fences", a.Token, c.Token, a.FencingToken, c.FencingToken)
	}
	if _, err := b.ReleasePermit(context.Background(), key, a.Token); err != nil {
		t.Fatal(err)
	}
	d := MustAcquirePermit(t, b, key, permitReq(2, time.Minute, 0))
	if d.FencingToken <= c.FencingToken {
		t.Fatalf("got fence %d after %d, want larger", d.FencingToken, c.FencingToken)
	}
	for _, g := range []locks.Grant{c, d} {
		if _, err := b.ReleasePermit(context.Background(), key, g.Token); err != nil {
			t.Fatal(err)
		}
	}
}

func testPermitNotHolder(t *testing.T, b locks.Backend, key locks.Key) {
	g := MustAcquirePermit(t, b, key, permitReq(1, time.Minute, 0))
	wantErr(t, errOf(b.ReleasePermit(context.Background(), key, "not-a-token")), locks.ErrNotHolder)
	_, err := b.RenewPermit(context.Background(), key, "not-a-token", time.Minute)
	wantErr(t, err, locks.ErrNotHolder)
	lease, err := b.RenewPermit(context.Background(), key, g.Token, 2*time.Minute)
	if err != nil || lease.FencingToken != g.FencingToken || lease.TTL <= time.Minute {
		t.Fatalf("renew: got %+v, %v; want the same fence and a 2m lease", lease, err)
	}
	if _, err := b.ReleasePermit(context.Background(), key, g.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ReleasePermit(context.Background(), key, g.Token); err != nil {
		t.Fatalf("a repeated release: got %v, want none (releases are idempotent)", err)
	}
	_, err = b.RenewPermit(context.Background(), key, g.Token, time.Minute)
	wantReason(t, err, locks.ReasonReleased)
	short := MustAcquirePermit(t, b, key, permitReq(1, 50*time.Millisecond, 0))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := b.InspectSemaphore(context.Background(), key); errors.Is(err, locks.ErrNotHeld) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a 50ms permit is still held after 10s")
		}
		time.Sleep(5 * time.Millisecond) // polling for an expiry, not synchronising
	}
	_, err = b.RenewPermit(context.Background(), key, short.Token, time.Minute)
	wantReason(t, err, locks.ReasonExpired)
	wantReason(t, errOf(b.ReleasePermit(context.Background(), key, short.Token)), locks.ReasonExpired)
}

func testLimitMismatch(t *testing.T, b locks.Backend, key locks.Key) {
	g := MustAcquirePermit(t, b, key, permitReq(1, time.Minute, 0))
	// The limit differs and the semaphore is full: the mismatch wins.
	_, err := b.AcquirePermit(context.Background(), key, permitReq(3, time.Minute, 0))
	var mm *locks.LimitMismatchError
	if !errors.As(err, &mm) || mm.Limit != 1 {
		t.Fatalf("got %v, want a limit mismatch naming limit 1", err)
	}
	if _, err := b.ReleasePermit(context.Background(), key, g.Token); err != nil {
		t.Fatal(err)
	}
	// Idle: the new limit applies.
	var gs []locks.Grant
	for range 3 {
		gs = append(gs, MustAcquirePermit(t, b, key, permitReq(3, time.Minute, 0)))
	}
	info, err := b.InspectSemaphore(context.Background(), key)
	if err != nil || info.Limit != 3 || len(info.Holders) != 3 {
		t.Fatalf("got %+v, %v; want limit 3 and 3 holders", info, err)
	}
	for _, g := range gs {
		b.ReleasePermit(context.Background(), key, g.Token)
	}
}

func testPermitExpiry(t *testing.T, b locks.Backend, key locks.Key) {
	g := MustAcquirePermit(t, b, key, permitReq(1, 300*time.Millisecond, 0)) // and then it crashes
	res := <-permitAsync(t.Context(), b, key, permitReq(1, time.Minute, 20*time.Second))
	if res.Err != nil {
		t.Fatalf("waiter: %v", res.Err)
	}
	if res.Elapsed > 10*time.Second || res.Grant.FencingToken <= g.FencingToken {
		t.Fatalf("waiter got %+v after %v; want the crashed holder's permit soon after its 300ms lease", res.Grant, res.Elapsed)
	}
	b.ReleasePermit(context.Background(), key, res.Grant.Token)
}

func testPermitFIFO(t *testing.T, b locks.Backend, key locks.Key) {
	holder := MustAcquirePermit(t, b, key, permitReq(1, time.Minute, 0))
	var waiters []<-chan Result
	for i := range 5 {
		r := permitReq(1, time.Minute, 30*time.Second)
		r.Owner = string(rune('a' + i))
		waiters = append(waiters, permitAsync(t.Context(), b, key, r))
		waitUntilSemaphoreQueued(t, b, key, i+1)
	}
	if _, err := b.ReleasePermit(context.Background(), key, holder.Token); err != nil {
		t.Fatal(err)
	}
	for i, w := range waiters {
		res := <-w
		if res.Err != nil {
			t.Fatalf("waiter %d: %v", i, res.Err)
		}
		info, err := b.InspectSemaphore(context.Background(), key)
		if err != nil || len(info.Holders) != 1 || info.Holders[0].Owner != string(rune('a'+i)) {
			t.Fatalf("after waiter %d's grant: got %+v, %v; want held by waiter %d alone", i, info, err, i)
		}
		if _, err := b.ReleasePermit(context.Background(), key, res.Grant.Token); err != nil {
			t.Fatal(err)
		}
	}
}

func testPermitWaitTimesOut(t *testing.T, b locks.Backend, key locks.Key) {
	g := MustAcquirePermit(t, b, key, permitReq(1, time.Minute, 0))
	res := <-permitAsync(t.Context(), b, key, permitReq(1, time.Minute, 200*time.Millisecond))
	var full *locks.FullError
	if !errors.As(res.Err, &full) || full.RetryAfter <= 0 {
		t.Fatalf("got %v, want ErrFull with the holder's remaining lease", res.Err)
	}
	info, err := b.InspectSemaphore(context.Background(), key)
	if err != nil || info.Waiters != 0 {
		t.Fatalf("got %+v, %v; want nobody waiting", info, err)
	}
	b.ReleasePermit(context.Background(), key, g.Token)
}

func testPermitCancelled(t *testing.T, b locks.Backend, key locks.Key) {
	g := MustAcquirePermit(t, b, key, permitReq(1, time.Minute, 0))
	ctx, cancel := context.WithCancel(t.Context())
	ch := permitAsync(ctx, b, key, permitReq(1, time.Minute, 30*time.Second))
	waitUntilSemaphoreQueued(t, b, key, 1)
	cancel()
	if res := <-ch; !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", res.Err)
	}
	if _, err := b.ReleasePermit(context.Background(), key, g.Token); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for { // the cancelled waiter's permit, if it got one, is released
		_, err := b.InspectSemaphore(context.Background(), key)
		if errors.Is(err, locks.ErrNotHeld) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a permit is still held after its waiter left: %v", err)
		}
		time.Sleep(time.Millisecond) // polling the backend
	}
}

func testInspectSemaphore(t *testing.T, b locks.Backend, key locks.Key) {
	_, err := b.InspectSemaphore(context.Background(), key)
	wantErr(t, err, locks.ErrNotHeld)
	r := permitReq(2, time.Minute, 0)
	r.Owner = "job-1"
	a := MustAcquirePermit(t, b, key, r)
	r.Owner, r.TTL = "job-2", 2*time.Minute
	c := MustAcquirePermit(t, b, key, r)
	info, err := b.InspectSemaphore(context.Background(), key)
	if err != nil || info.Limit != 2 || info.Waiters != 0 || len(info.Holders) != 2 {
		t.Fatalf("got %+v, %v; want limit 2, 2 holders", info, err)
	}
	first, second := info.Holders[0], info.Holders[1]
	if first.Owner != "job-1" || first.FencingToken != a.FencingToken || second.Owner != "job-2" ||
		second.FencingToken != c.FencingToken || first.Subject != "test" || second.TTL <= time.Minute {
		t.Fatalf("got holders %+v, want job-1 then job-2 (soonest lease first)", info.Holders)
	}
	b.ReleasePermit(context.Background(), key, a.Token)
	b.ReleasePermit(context.Background(), key, c.Token)
}

func testInvalidLimit(t *testing.T, b locks.Backend, key locks.Key) {
	for _, limit := range []int{0, -1, locks.MaxLimit + 1} {
		if _, err := b.AcquirePermit(context.Background(), key, permitReq(limit, time.Minute, 0)); !errors.Is(err, locks.ErrInvalid) {
			t.Errorf("limit %d: got %v, want ErrInvalid", limit, err)
		}
	}
}

func testSemaphoreLockApart(t *testing.T, b locks.Backend, key locks.Key) {
	l := MustAcquire(t, b, key, req(time.Minute))
	p := MustAcquirePermit(t, b, key, permitReq(1, time.Minute, 0))
	if _, err := b.Release(context.Background(), key, p.Token); !errors.Is(err, locks.ErrNotHolder) {
		t.Fatalf("releasing the lock with a permit's token: got %v, want ErrNotHolder", err)
	}
	if _, err := b.ReleasePermit(context.Background(), key, l.Token); !errors.Is(err, locks.ErrNotHolder) {
		t.Fatalf("releasing a permit with the lock's token: got %v, want ErrNotHolder", err)
	}
	b.Release(context.Background(), key, l.Token)
	b.ReleasePermit(context.Background(), key, p.Token)
}

func testResizeUp(t *testing.T, b locks.Backend, key locks.Key) {
	holder := MustAcquirePermit(t, b, key, permitReq(1, time.Minute, 0))
	var waiters []<-chan Result
	for i := range 3 {
		waiters = append(waiters, permitAsync(t.Context(), b, key, permitReq(1, time.Minute, 30*time.Second)))
		waitUntilSemaphoreQueued(t, b, key, i+1)
	}
	size, err := b.ResizeSemaphore(context.Background(), key, 3)
	if err != nil || size != (locks.SemaphoreSize{Limit: 3, Holders: 3, Waiters: 1}) {
		t.Fatalf("resize to 3: got %+v, %v; want limit 3, 3 holders, 1 waiter", size, err)
	}
	// The first two waiters got the new permits at once, before any
	// release; the third waits on.
	var granted []locks.Grant
	for i, w := range waiters[:2] {
		res := <-w
		if res.Err != nil {
			t.Fatalf("waiter %d: %v", i, res.Err)
		}
		granted = append(granted, res.Grant)
	}
	info, err := b.InspectSemaphore(context.Background(), key)
	if err != nil || info.Limit != 3 || len(info.Holders) != 3 || info.Waiters != 1 {
		t.Fatalf("got %+v, %v; want limit 3, 3 holders, 1 waiter", info, err)
	}
	// The limit in force is 3 now: an acquire asking for 1 is refused.
	_, err = b.AcquirePermit(context.Background(), key, permitReq(1, time.Minute, 0))
	var mm *locks.LimitMismatchError
	if !errors.As(err, &mm) || mm.Limit != 3 {
		t.Fatalf("an acquire with the old limit: got %v, want a limit mismatch naming 3", err)
	}
	if _, err := b.ReleasePermit(context.Background(), key, holder.Token); err != nil {
		t.Fatal(err)
	}
	res := <-waiters[2]
	if res.Err != nil {
		t.Fatalf("waiter 2: %v", res.Err)
	}
	for _, g := range append(granted, res.Grant) {
		b.ReleasePermit(context.Background(), key, g.Token)
	}
}

func testResizeDown(t *testing.T, b locks.Backend, key locks.Key) {
	// 3 s, not less: the waiter must queue behind three holders (a 300 ms
	// lease ran out first at load 13 with replicas, and the waiter got
	// its permit at once: "want 1 waiters").
	short := MustAcquirePermit(t, b, key, permitReq(3, 3*time.Second, 0))
	var holders []locks.Grant
	for range 2 {
		holders = append(holders, MustAcquirePermit(t, b, key, permitReq(3, time.Minute, 0)))
	}
	// Queued before the resize, asking for 3: it waits on under the new
	// limit, also when it looks again as the short lease ends.
	early := permitAsync(t.Context(), b, key, permitReq(3, time.Minute, 30*time.Second))
	waitUntilSemaphoreQueued(t, b, key, 1)
	size, err := b.ResizeSemaphore(context.Background(), key, 1)
	// On a busy machine the short lease may have ended before the resize:
	// then 2 hold (the count must not depend on the machine's speed).
	kept := 3
	if time.Now().After(short.ExpiresAt) {
		kept = 2
	}
	if err != nil || size.Limit != 1 || size.Waiters != 1 || (size.Holders != 3 && size.Holders != kept) {
		t.Fatalf("resize to 1: got %+v, %v; want limit 1, the %d holders kept, 1 waiter", size, err, kept)
	}
	for i, g := range holders {
		if _, err := b.RenewPermit(context.Background(), key, g.Token, time.Minute); err != nil {
			t.Fatalf("renew of holder %d after the limit was lowered: %v", i, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for { // the short lease ends: 2 hold, still not below 1
		info, err := b.InspectSemaphore(context.Background(), key)
		if err == nil && len(info.Holders) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("got %+v, %v; want the 3s permit gone", info, err)
		}
		time.Sleep(5 * time.Millisecond) // polling for an expiry
	}
	_, err = b.AcquirePermit(context.Background(), key, permitReq(3, time.Minute, 0))
	var mm *locks.LimitMismatchError
	if !errors.As(err, &mm) || mm.Limit != 1 {
		t.Fatalf("an acquire with the old limit: got %v, want a limit mismatch naming 1", err)
	}
	_, err = b.AcquirePermit(context.Background(), key, permitReq(1, time.Minute, 0))
	if !errors.Is(err, locks.ErrFull) {
		t.Fatalf("an acquire with the new limit while 2 hold: got %v, want ErrFull", err)
	}
	if _, err := b.ReleasePermit(context.Background(), key, holders[0].Token); err != nil {
		t.Fatal(err)
	}
	select { // 1 holds, not below the limit of 1: nothing for the waiter
	case res := <-early:
		t.Fatalf("with 1 holder and a limit of 1 the waiter got %+v, %v; want it still waiting", res.Grant, res.Err)
	case <-time.After(time.Second): // an absence: how long to look for it
	}
	if _, err := b.ReleasePermit(context.Background(), key, holders[1].Token); err != nil {
		t.Fatal(err)
	}
	res := <-early
	if res.Err != nil || res.Grant.FencingToken <= short.FencingToken {
		t.Fatalf("the waiter: got %+v, %v; want the permit once nobody else held", res.Grant, res.Err)
	}
	if _, err := b.ReleasePermit(context.Background(), key, res.Grant.Token); err != nil {
		t.Fatal(err)
	}
	// Idle: the resize is forgotten, the next acquire's limit applies.
	a := MustAcquirePermit(t, b, key, permitReq(3, time.Minute, 0))
	c := MustAcquirePermit(t, b, key, permitReq(3, time.Minute, 0))
	b.ReleasePermit(context.Background(), key, a.Token)
	b.ReleasePermit(context.Background(), key, c.Token)
}

func testResizeIdle(t *testing.T, b locks.Backend, key locks.Key) {
	if _, err := b.ResizeSemaphore(context.Background(), key, 2); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("resize of an idle semaphore: got %v, want ErrNotHeld", err)
	}
	g := MustAcquirePermit(t, b, key, permitReq(1, time.Minute, 0))
	for _, limit := range []int{0, -1, locks.MaxLimit + 1} {
		if _, err := b.ResizeSemaphore(context.Background(), key, limit); !errors.Is(err, locks.ErrInvalid) {
			t.Errorf("resize to %d: got %v, want ErrInvalid", limit, err)
		}
	}
	size, err := b.ResizeSemaphore(context.Background(), key, locks.MaxLimit)
	if err != nil || size != (locks.SemaphoreSize{Limit: locks.MaxLimit, Holders: 1}) {
		t.Fatalf("resize to the most: got %+v, %v", size, err)
	}
	if _, err := b.ReleasePermit(context.Background(), key, g.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ResizeSemaphore(context.Background(), key, 2); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("resize once idle again: got %v, want ErrNotHeld", err)
	}
}
