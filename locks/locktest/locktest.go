// Package locktest is the conformance suite every lock backend must pass.
// The same tests run against the embedded backend and against Redis, so the
// two cannot drift apart.
package locktest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// Run runs the suite. newLocker returns a backend for one test; tests run in
// parallel and each uses lock names of its own, so the backends may share a
// store.
func Run(t *testing.T, newLocker func(t *testing.T) locks.Locker) {
	for _, tc := range append([]struct {
		name string
		test func(t *testing.T, l locks.Locker, key locks.Key)
	}{
		{"OneWinnerAmongConcurrentAcquirers", testOneWinner},
		{"GrantDescribesItself", testGrantDescribesItself},
		{"ReleaseWithWrongTokenChangesNothing", testReleaseWrongToken},
		{"RenewWithWrongTokenChangesNothing", testRenewWrongToken},
		{"ReleaseIsIdempotent", testReleaseTwice},
		{"RenewRestoresAcquiredTTL", testRenewRestoresTTL},
		{"ExpiryFreesLock", testExpiryFreesLock},
		{"RenewAfterExpiryFailsAndDoesNotRecreate", testRenewAfterExpiry},
		{"FencingTokensStrictlyIncrease", testFencingIncreases},
		{"WaiterWokenByRelease", testWaiterWokenByRelease},
		{"WaiterWokenByExpiryOfCrashedHolder", testWaiterWokenByExpiry},
		{"WaitTimesOutWithHeld", testWaitTimesOut},
		{"CancelledWaiterLeavesNoLock", testCancelledWaiter},
		{"InvalidRequestsRejected", testInvalid},
		{"LocksAreIndependent", testIndependent},
		{"WaitersGetTheLockInArrivalOrder", testFIFO},
		{"NoSelfHandoffWhileOthersWait", testNoSelfHandoff},
		{"TimedOutWaiterLeavesTheQueue", testTimedOutWaiterLeaves},
		{"WaiterLeavingAsLockIsHandedOverLeavesNoLock", testLeaveAtHandoff},
		{"ReentryCountsHolds", testReentryCountsHolds},
		{"ReentryExtendsLeaseNeverShortens", testReentryExtends},
		{"ReentryNeedsAHoldersToken", testReentryNotHolder},
		{"LeaseEndsEveryHold", testLeaseEndsEveryHold},
		{"LastHoldHandsOn", testLastHoldHandsOn},
		{"ReleaseSaysWhatItEnded", testReleaseSaysWhatItEnded},
		{"SharedReleaseSaysWhatItEnded", testSharedReleaseSaysWhatItEnded},
	}, append(sharedCases, minHoldCases...)...) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, newLocker(t), UniqueKey(t))
		})
	}
}

var keySeq atomic.Int64

// errOf is the error of a call that also returns a count, such as Release.
func errOf(_ locks.Released, err error) error { return err }

// UniqueKey returns a lock name no other test in this process uses.
func UniqueKey(t testing.TB) locks.Key {
	key, err := locks.ParseKey("test", fmt.Sprintf("lock-%d-%d", time.Now().UnixNano(), keySeq.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func req(ttl time.Duration) locks.AcquireRequest {
	return locks.AcquireRequest{TTL: ttl, Subject: "tester"}
}

// MustAcquire acquires key or fails the test.
func MustAcquire(t testing.TB, l locks.Locker, key locks.Key, r locks.AcquireRequest) locks.Grant {
	t.Helper()
	g, err := l.Acquire(context.Background(), key, r)
	if err != nil {
		t.Fatalf("acquire %s: %v", key, err)
	}
	return g
}

func wantErr(t testing.TB, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("got error %v, want %v", err, want)
	}
}

// WaitUntilFree polls until nobody holds key: the way to see an expiry,
// or a release the caller does not make itself, happen.
func WaitUntilFree(t testing.TB, l locks.Locker, key locks.Key) {
	t.Helper()
	waitForInfo(t, l, key, "nobody to hold it", func(_ locks.Info, err error) bool {
		return errors.Is(err, locks.ErrNotHeld)
	})
}

// waitUntilHolders polls until key is held shared by n holders (some
// leases ended) and returns what Inspect then says.
func waitUntilHolders(t testing.TB, l locks.Locker, key locks.Key, n int) locks.Info {
	t.Helper()
	return waitForInfo(t, l, key, fmt.Sprintf("%d shared holders", n), func(info locks.Info, _ error) bool {
		return len(info.Holders) == n
	})
}

// waitForInfo polls Inspect of key, every few milliseconds for up to 10s,
// until done says what it answered is what the caller waits for (what,
// for the failure), and returns that answer. An error done does not
// accept fails t at once.
func waitForInfo(t testing.TB, l locks.Locker, key locks.Key, what string, done func(locks.Info, error) bool) locks.Info {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := l.Inspect(context.Background(), key)
		if done(info, err) {
			return info
		}
		if err != nil {
			t.Fatalf("%s: waiting for %s: inspect: %v", key, what, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: waited 10s for %s; last inspect: %+v, %v", key, what, info, err)
		}
		time.Sleep(2 * time.Millisecond) // polling for an expiry or a goroutine, not synchronising
	}
}

func testOneWinner(t *testing.T, l locks.Locker, key locks.Key) {
	const n = 100
	var wins, helds atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			_, err := l.Acquire(context.Background(), key, req(time.Minute))
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, locks.ErrHeld):
				helds.Add(1)
			default:
				t.Errorf("acquire: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if wins.Load() != 1 || helds.Load() != n-1 {
		t.Fatalf("got %d winners and %d held, want 1 and %d", wins.Load(), helds.Load(), n-1)
	}
}

func testGrantDescribesItself(t *testing.T, l locks.Locker, key locks.Key) {
	before := time.Now()
	g := MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute, Subject: "alice", Owner: "job-7"})
	if len(g.Token) < 22 || strings.ContainsAny(g.Token, "+/=") {
		t.Errorf("token %q: want at least 128 bits, URL-safe", g.Token)
	}
	if g.TTL != time.Minute {
		t.Errorf("got ttl %v, want 1m", g.TTL)
	}
	if g.ExpiresAt.Before(before.Add(time.Minute)) || g.ExpiresAt.After(time.Now().Add(time.Minute)) {
		t.Errorf("expires at %v, want about a minute after %v", g.ExpiresAt, before)
	}
	info, err := l.Inspect(context.Background(), key)
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	if info.Subject != "alice" || info.Owner != "job-7" || info.FencingToken != g.FencingToken {
		t.Errorf("got %+v, want subject alice, owner job-7, fencing token %d", info, g.FencingToken)
	}
	if info.TTL <= 0 || info.TTL > time.Minute {
		t.Errorf("got remaining ttl %v, want in (0, 1m]", info.TTL)
	}
	if d := info.AcquiredAt.Sub(before); d < -time.Second || d > 5*time.Second {
		t.Errorf("acquired at %v, want close to %v", info.AcquiredAt, before)
	}
	if _, err := l.Acquire(context.Background(), key, req(time.Minute)); !errors.Is(err, locks.ErrHeld) {
		t.Fatalf("second acquire: got %v, want ErrHeld", err)
	}
	var held *locks.HeldError
	_, err = l.Acquire(context.Background(), key, req(time.Minute))
	if !errors.As(err, &held) || held.RetryAfter <= 0 || held.RetryAfter > time.Minute {
		t.Fatalf("got %v, want a HeldError with retry-after in (0, 1m]", err)
	}
}

func testReleaseWrongToken(t *testing.T, l locks.Locker, key locks.Key) {
	g := MustAcquire(t, l, key, req(time.Minute))
	other := MustAcquire(t, l, UniqueKey(t), req(time.Minute)) // a real token, of another lock
	for _, token := range []string{"", "nope", other.Token, g.Token + "x"} {
		wantErr(t, errOf(l.Release(context.Background(), key, token)), locks.ErrNotHolder)
	}
	info, err := l.Inspect(context.Background(), key)
	if err != nil || info.FencingToken != g.FencingToken {
		t.Fatalf("after failed releases: got %+v, %v; want still held by fencing token %d", info, err, g.FencingToken)
	}
	if _, err := l.Release(context.Background(), key, g.Token); err != nil {
		t.Fatalf("release by holder: %v", err)
	}
}

func testRenewWrongToken(t *testing.T, l locks.Locker, key locks.Key) {
	g := MustAcquire(t, l, key, req(2*time.Second))
	_, err := l.Renew(context.Background(), key, "not-the-token", time.Hour)
	wantErr(t, err, locks.ErrNotHolder)
	info, err := l.Inspect(context.Background(), key)
	if err != nil || info.TTL > 2*time.Second || info.FencingToken != g.FencingToken {
		t.Fatalf("after failed renew: got %+v, %v; want unchanged lease of at most 2s", info, err)
	}
}

// testReleaseTwice: a release is idempotent: the second one succeeds and
// changes nothing, even once another grant holds the lock, whose holder
// keeps it. A released token renews nothing, and says why.
func testReleaseTwice(t *testing.T, l locks.Locker, key locks.Key) {
	wantReason(t, errOf(l.Release(context.Background(), key, "never-held")), locks.ReasonUnknown)
	g := MustAcquire(t, l, key, req(time.Minute))
	if _, err := l.Release(context.Background(), key, g.Token); err != nil {
		t.Fatalf("release: %v", err)
	}
	if rel, err := l.Release(context.Background(), key, g.Token); err != nil || rel.Holds != 0 {
		t.Fatalf("second release: got %+v, %v; want 0 holds, no error", rel, err)
	}
	_, err := l.Inspect(context.Background(), key)
	wantErr(t, err, locks.ErrNotHeld)
	// A released grant's token does not touch the next grant either.
	next := MustAcquire(t, l, key, req(time.Minute))
	if rel, err := l.Release(context.Background(), key, g.Token); err != nil || rel.Holds != 0 {
		t.Fatalf("release of the old grant again: got %+v, %v; want 0 holds, no error", rel, err)
	}
	if info, err := l.Inspect(context.Background(), key); err != nil || info.FencingToken != next.FencingToken {
		t.Fatalf("the next grant after a repeated release of the old one: got %+v, %v; want it held", info, err)
	}
	_, err = l.Renew(context.Background(), key, g.Token, 0)
	wantReason(t, err, locks.ReasonReleased)
	_, err = l.Reenter(context.Background(), key, g.Token, time.Minute, locks.Exclusive)
	wantReason(t, err, locks.ReasonReleased)
	if _, err := l.Release(context.Background(), key, next.Token); err != nil {
		t.Fatalf("release next: %v", err)
	}
}

// wantReason checks that err is a NotHolderError for reason.
func wantReason(t testing.TB, err error, reason locks.Reason) {
	t.Helper()
	var nh *locks.NotHolderError
	if !errors.As(err, &nh) || nh.Reason != reason || !errors.Is(err, locks.ErrNotHolder) {
		t.Fatalf("got error %v, want not the holder (%s)", err, reason)
	}
}

func testRenewRestoresTTL(t *testing.T, l locks.Locker, key locks.Key) {
	g := MustAcquire(t, l, key, req(time.Minute))
	lease, err := l.Renew(context.Background(), key, g.Token, 2*time.Hour)
	if err != nil || lease.TTL != 2*time.Hour || lease.FencingToken != g.FencingToken {
		t.Fatalf("renew 2h: got %+v, %v; want ttl 2h, same fencing token", lease, err)
	}
	info, err := l.Inspect(context.Background(), key)
	if err != nil || info.TTL <= time.Hour {
		t.Fatalf("inspect after renew: got %+v, %v; want ttl over 1h", info, err)
	}
	lease, err = l.Renew(context.Background(), key, g.Token, 0)
	if err != nil || lease.TTL != time.Minute {
		t.Fatalf("renew without ttl: got %+v, %v; want the acquired ttl 1m", lease, err)
	}
	info, err = l.Inspect(context.Background(), key)
	if err != nil || info.TTL > time.Minute {
		t.Fatalf("inspect after reset: got %+v, %v; want ttl at most 1m", info, err)
	}
}

func testExpiryFreesLock(t *testing.T, l locks.Locker, key locks.Key) {
	g := MustAcquire(t, l, key, req(50*time.Millisecond))
	WaitUntilFree(t, l, key)
	next := MustAcquire(t, l, key, req(time.Minute))
	if next.FencingToken <= g.FencingToken {
		t.Fatalf("got fencing token %d after expiry, want more than %d", next.FencingToken, g.FencingToken)
	}
	wantReason(t, errOf(l.Release(context.Background(), key, g.Token)), locks.ReasonExpired)
}

func testRenewAfterExpiry(t *testing.T, l locks.Locker, key locks.Key) {
	g := MustAcquire(t, l, key, req(30*time.Millisecond))
	WaitUntilFree(t, l, key)
	_, err := l.Renew(context.Background(), key, g.Token, time.Minute)
	wantReason(t, err, locks.ReasonExpired)
	_, err = l.Inspect(context.Background(), key)
	wantErr(t, err, locks.ErrNotHeld)
	_, err = l.Renew(context.Background(), key, "never-held", time.Minute)
	wantReason(t, err, locks.ReasonUnknown)
}

func testFencingIncreases(t *testing.T, l locks.Locker, key locks.Key) {
	var last int64
	check := func(g locks.Grant, how string) {
		t.Helper()
		if g.FencingToken <= last {
			t.Fatalf("%s: got fencing token %d, want more than %d", how, g.FencingToken, last)
		}
		last = g.FencingToken
	}
	for range 5 {
		g := MustAcquire(t, l, key, req(time.Minute))
		check(g, "acquire after release")
		if _, err := l.Release(context.Background(), key, g.Token); err != nil {
			t.Fatal(err)
		}
	}
	check(MustAcquire(t, l, key, req(20*time.Millisecond)), "acquire")
	WaitUntilFree(t, l, key)
	check(MustAcquire(t, l, key, req(time.Minute)), "acquire after expiry")
}

// acquireAsync runs Acquire in a goroutine and returns its outcome later.
func AcquireAsync(ctx context.Context, l locks.Locker, key locks.Key, r locks.AcquireRequest) <-chan Result {
	out := make(chan Result, 1)
	go func() {
		start := time.Now()
		g, err := l.Acquire(ctx, key, r)
		out <- Result{Grant: g, Err: err, Elapsed: time.Since(start)}
	}()
	return out
}

// Result is the outcome of an Acquire run in a goroutine.
type Result struct {
	Grant   locks.Grant
	Err     error
	Elapsed time.Duration
}

func testWaiterWokenByRelease(t *testing.T, l locks.Locker, key locks.Key) {
	g := MustAcquire(t, l, key, req(30*time.Second))
	waiter := AcquireAsync(t.Context(), l, key, locks.AcquireRequest{TTL: time.Minute, Wait: 20 * time.Second})
	time.AfterFunc(50*time.Millisecond, func() { l.Release(context.Background(), key, g.Token) })
	res := <-waiter
	if res.Err != nil {
		t.Fatalf("waiter: %v", res.Err)
	}
	// Far less than the holder's 30 s TTL: it was the release that woke it.
	if res.Elapsed > 5*time.Second {
		t.Fatalf("waiter took %v, want far less than the holder's 30s TTL", res.Elapsed)
	}
	if res.Grant.FencingToken <= g.FencingToken {
		t.Fatalf("got fencing token %d, want more than %d", res.Grant.FencingToken, g.FencingToken)
	}
}

func testWaiterWokenByExpiry(t *testing.T, l locks.Locker, key locks.Key) {
	g := MustAcquire(t, l, key, req(300*time.Millisecond)) // and then it "crashes"
	res := <-AcquireAsync(t.Context(), l, key, locks.AcquireRequest{TTL: time.Minute, Wait: 20 * time.Second})
	if res.Err != nil {
		t.Fatalf("waiter: %v", res.Err)
	}
	if res.Elapsed > 10*time.Second {
		t.Fatalf("waiter took %v, want about the holder's 300ms lease", res.Elapsed)
	}
	if res.Grant.FencingToken <= g.FencingToken {
		t.Fatalf("got fencing token %d, want more than %d", res.Grant.FencingToken, g.FencingToken)
	}
}

func testWaitTimesOut(t *testing.T, l locks.Locker, key locks.Key) {
	g := MustAcquire(t, l, key, req(time.Minute))
	res := <-AcquireAsync(t.Context(), l, key, locks.AcquireRequest{TTL: time.Minute, Wait: 100 * time.Millisecond})
	var held *locks.HeldError
	if !errors.As(res.Err, &held) || held.RetryAfter <= 0 {
		t.Fatalf("got %v, want a HeldError with the holder's remaining ttl", res.Err)
	}
	if res.Elapsed < 100*time.Millisecond {
		t.Fatalf("gave up after %v, want at least the 100ms wait", res.Elapsed)
	}
	info, err := l.Inspect(context.Background(), key)
	if err != nil || info.FencingToken != g.FencingToken {
		t.Fatalf("got %+v, %v; want the first holder unchanged", info, err)
	}
}

// testCancelledWaiter races a waiter's cancellation against the release that
// would grant it the lock: whichever wins, either the waiter got a grant or
// nobody holds the lock.
func testCancelledWaiter(t *testing.T, l locks.Locker, key locks.Key) {
	for i := range 20 {
		g := MustAcquire(t, l, key, req(time.Minute))
		ctx, cancel := context.WithCancel(context.Background())
		waiter := AcquireAsync(ctx, l, key, locks.AcquireRequest{TTL: time.Minute, Wait: 20 * time.Second})
		delay := time.Duration(i%5) * time.Millisecond
		time.AfterFunc(delay, cancel)
		time.AfterFunc(delay, func() { l.Release(context.Background(), key, g.Token) })
		res := <-waiter
		cancel()
		if res.Err == nil {
			if _, err := l.Release(context.Background(), key, res.Grant.Token); err != nil {
				t.Fatalf("round %d: release the waiter's grant: %v", i, err)
			}
			continue
		}
		if !errors.Is(res.Err, context.Canceled) {
			t.Fatalf("round %d: got %v, want a grant or context.Canceled", i, res.Err)
		}
		waitReleased(t, l, key, g)
	}
}

// waitReleased waits until g's release (running concurrently) has happened,
// then checks that nobody holds key.
func waitReleased(t *testing.T, l locks.Locker, key locks.Key, g locks.Grant) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := l.Inspect(context.Background(), key)
		if errors.Is(err, locks.ErrNotHeld) {
			return
		}
		if err != nil {
			t.Fatalf("inspect: %v", err)
		}
		if info.FencingToken != g.FencingToken {
			t.Fatalf("a cancelled waiter left a lock behind: %+v", info)
		}
		if time.Now().After(deadline) {
			t.Fatal("release did not happen")
		}
		time.Sleep(time.Millisecond) // polling for the concurrent release
	}
}

func testInvalid(t *testing.T, l locks.Locker, key locks.Key) {
	for name, r := range map[string]locks.AcquireRequest{
		"zero ttl":      {TTL: 0},
		"negative ttl":  {TTL: -time.Second},
		"negative wait": {TTL: time.Second, Wait: -time.Second},
		"long owner":    {TTL: time.Second, Owner: strings.Repeat("x", locks.MaxOwnerLen+1)},
		// Redis counts in whole milliseconds: these would become 0.
		"ttl under 1ms":  {TTL: 999 * time.Microsecond},
		"wait under 1ms": {TTL: time.Second, Wait: 999 * time.Microsecond},
	} {
		if _, err := l.Acquire(context.Background(), key, r); !errors.Is(err, locks.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	g := MustAcquire(t, l, key, req(time.Minute))
	for _, ttl := range []time.Duration{-time.Second, 999 * time.Microsecond} {
		if _, err := l.Renew(context.Background(), key, g.Token, ttl); !errors.Is(err, locks.ErrInvalid) {
			t.Errorf("renew for %v: got %v, want ErrInvalid", ttl, err)
		}
	}
	if info, err := l.Inspect(context.Background(), key); err != nil || info.TTL < 50*time.Second {
		t.Errorf("after invalid renews: got %+v, %v; want the one-minute lease unchanged", info, err)
	}
	if _, err := l.Release(context.Background(), key, g.Token); err != nil {
		t.Fatal(err)
	}
	_, err := l.Inspect(context.Background(), key)
	wantErr(t, err, locks.ErrNotHeld)
}

func testIndependent(t *testing.T, l locks.Locker, key locks.Key) {
	a := MustAcquire(t, l, key, req(time.Minute))
	other := UniqueKey(t)
	b := MustAcquire(t, l, other, req(time.Minute))
	wantErr(t, errOf(l.Release(context.Background(), other, a.Token)), locks.ErrNotHolder)
	if _, err := l.Release(context.Background(), other, b.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Inspect(context.Background(), key); err != nil {
		t.Fatalf("releasing another lock changed this one: %v", err)
	}
}

// WaitUntilQueued polls until key has n waiters: the way to know that a
// waiter started in a goroutine has joined the queue.
func WaitUntilQueued(t testing.TB, l locks.Locker, key locks.Key, n int) {
	t.Helper()
	waitForInfo(t, l, key, fmt.Sprintf("%d waiters", n), func(info locks.Info, err error) bool {
		return err == nil && info.Waiters == n
	})
}

// QueueInOrder starts one waiter per locker, each after the previous one has
// queued (behind any already queued), and returns their results in queue
// order.
func QueueInOrder(t testing.TB, key locks.Key, lockers ...locks.Locker) []<-chan Result {
	t.Helper()
	// Behind whoever waits already: each new waiter makes one more.
	info, err := lockers[0].Inspect(context.Background(), key)
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	var waiters []<-chan Result
	for i, l := range lockers {
		waiters = append(waiters, AcquireAsync(context.Background(), l, key,
			locks.AcquireRequest{TTL: time.Minute, Wait: 30 * time.Second, Owner: fmt.Sprint(i)}))
		WaitUntilQueued(t, l, key, info.Waiters+i+1)
	}
	return waiters
}

// CheckFIFO releases the holder and checks that the queued waiters get the
// lock one after another in queue order, each releasing it in turn.
func CheckFIFO(t testing.TB, l locks.Locker, key locks.Key, holder locks.Grant, lockers []locks.Locker, waiters []<-chan Result) {
	t.Helper()
	last := holder.FencingToken
	if _, err := l.Release(context.Background(), key, holder.Token); err != nil {
		t.Fatal(err)
	}
	for i, w := range waiters {
		res := <-w
		if res.Err != nil {
			t.Fatalf("waiter %d: %v", i, res.Err)
		}
		info, err := l.Inspect(context.Background(), key)
		if err != nil || info.Owner != fmt.Sprint(i) || info.FencingToken != res.Grant.FencingToken {
			t.Fatalf("after waiter %d's grant: got %+v, %v; want held by waiter %d", i, info, err, i)
		}
		if res.Grant.HandoffDelay <= 0 || res.Grant.HandoffDelay > 10*time.Second {
			t.Fatalf("waiter %d: got hand-off delay %v, want a small positive one", i, res.Grant.HandoffDelay)
		}
		if res.Grant.FencingToken <= last || res.Grant.TTL <= 0 || time.Until(res.Grant.ExpiresAt) <= 0 {
			t.Fatalf("waiter %d: got %+v, want a live lease with fencing token above %d", i, res.Grant.Lease, last)
		}
		last = res.Grant.FencingToken
		if _, err := lockers[i].Release(context.Background(), key, res.Grant.Token); err != nil {
			t.Fatalf("waiter %d release: %v", i, err)
		}
	}
}

func testFIFO(t *testing.T, l locks.Locker, key locks.Key) {
	holder := MustAcquire(t, l, key, req(time.Minute))
	lockers := []locks.Locker{l, l, l, l, l}
	CheckFIFO(t, l, key, holder, lockers, QueueInOrder(t, key, lockers...))
}

// testNoSelfHandoff: a holder that releases and asks again at once goes to
// the back of the line.
func testNoSelfHandoff(t *testing.T, l locks.Locker, key locks.Key) {
	holder := MustAcquire(t, l, key, req(time.Minute))
	waiter := QueueInOrder(t, key, l)[0]
	if _, err := l.Release(context.Background(), key, holder.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(context.Background(), key, req(time.Minute)); !errors.Is(err, locks.ErrHeld) {
		t.Fatalf("re-acquire by the releaser while another waits: got %v, want ErrHeld", err)
	}
	if res := <-waiter; res.Err != nil {
		t.Fatalf("waiter: %v", res.Err)
	}
}

func testTimedOutWaiterLeaves(t *testing.T, l locks.Locker, key locks.Key) {
	holder := MustAcquire(t, l, key, req(time.Minute))
	res := <-AcquireAsync(context.Background(), l, key, locks.AcquireRequest{TTL: time.Minute, Wait: 50 * time.Millisecond})
	if !errors.Is(res.Err, locks.ErrHeld) {
		t.Fatalf("got %v, want ErrHeld", res.Err)
	}
	info, err := l.Inspect(context.Background(), key)
	if err != nil || info.Waiters != 0 {
		t.Fatalf("got %+v, %v; want no waiters left", info, err)
	}
	if _, err := l.Release(context.Background(), key, holder.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Inspect(context.Background(), key); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("got %v, want the lock free: nobody waits", err)
	}
}

// testLeaveAtHandoff cancels a queued waiter just as the lock is handed to
// it: either it returns the grant, or nobody holds the lock.
func testLeaveAtHandoff(t *testing.T, l locks.Locker, key locks.Key) {
	for round := range 20 {
		holder := MustAcquire(t, l, key, req(time.Minute))
		ctx, cancel := context.WithCancel(context.Background())
		waiter := AcquireAsync(ctx, l, key, locks.AcquireRequest{TTL: time.Minute, Wait: 30 * time.Second})
		WaitUntilQueued(t, l, key, 1)
		if _, err := l.Release(context.Background(), key, holder.Token); err != nil {
			t.Fatal(err)
		}
		cancel()
		res := <-waiter
		if res.Err == nil {
			if _, err := l.Release(context.Background(), key, res.Grant.Token); err != nil {
				t.Fatalf("round %d: release the waiter's grant: %v", round, err)
			}
			continue
		}
		if !errors.Is(res.Err, context.Canceled) {
			t.Fatalf("round %d: got %v, want a grant or context.Canceled", round, res.Err)
		}
		if info, err := l.Inspect(context.Background(), key); !errors.Is(err, locks.ErrNotHeld) {
			t.Fatalf("round %d: a waiter that left holds the lock: %+v, %v", round, info, err)
		}
	}
}

func testReentryCountsHolds(t *testing.T, l locks.Locker, key locks.Key) {
	g := MustAcquire(t, l, key, req(time.Minute))
	if g.Holds != 1 {
		t.Fatalf("a new grant: got %d holds, want 1", g.Holds)
	}
	ids := []string{locks.BaseHold}
	for want := 2; want <= 3; want++ {
		r, err := l.Reenter(context.Background(), key, g.Token, time.Minute, locks.Exclusive)
		if err != nil || r.Holds != want || r.Token != g.Token || r.FencingToken != g.FencingToken || r.Hold == "" || slices.Contains(ids, r.Hold) {
			t.Fatalf("re-enter: got %+v, %v; want %d holds, the same token and fence, a new hold id", r, err, want)
		}
		ids = append(ids, r.Hold)
	}
	if info, err := l.Inspect(context.Background(), key); err != nil || info.Holds != 3 || !slices.Equal(info.HoldIDs, ids) {
		t.Fatalf("inspect: got %+v, %v; want 3 holds, %v", info, err, ids)
	}
	// Each release names its hold; ending a hold twice (a retried
	// release) changes nothing, nor does the token alone once the base
	// hold has ended.
	for _, step := range []struct {
		hold string
		want int
	}{{ids[1], 2}, {ids[1], 2}, {"", 1}, {"", 1}, {locks.BaseHold, 1}, {ids[2], 0}} {
		rel, err := l.ReleaseHold(context.Background(), key, g.Token, step.hold)
		if err != nil || rel.Holds != step.want || rel.Ended != (step.want == 0) {
			t.Fatalf("release hold %q: got %+v, %v; want %d holds left, the grant ended with the last", step.hold, rel, err, step.want)
		}
		if _, err := l.Inspect(context.Background(), key); (err == nil) != (step.want > 0) {
			t.Fatalf("with %d holds left, inspect says %v", step.want, err)
		}
	}
	_, err := l.ReleaseHold(context.Background(), key, g.Token, "not a hold")
	wantErr(t, err, locks.ErrInvalid)
}

func testReentryExtends(t *testing.T, l locks.Locker, key locks.Key) {
	g := MustAcquire(t, l, key, req(time.Minute))
	r1, err := l.Reenter(context.Background(), key, g.Token, time.Second, locks.Exclusive)
	if err != nil || r1.TTL < 50*time.Second {
		t.Fatalf("re-enter for 1s: got %+v, %v; want the one-minute lease kept", r1, err)
	}
	r2, err := l.Reenter(context.Background(), key, g.Token, 2*time.Minute, locks.Exclusive)
	if err != nil || r2.TTL < 110*time.Second || time.Until(r2.ExpiresAt) > 2*time.Minute {
		t.Fatalf("re-enter for 2m: got %+v, %v; want a lease of about 2m", r2, err)
	}
	if info, err := l.Inspect(context.Background(), key); err != nil || info.TTL < 110*time.Second {
		t.Fatalf("inspect: got %+v, %v; want the 2m lease", info, err)
	}
	for _, hold := range []string{"", r1.Hold, r2.Hold} {
		l.ReleaseHold(context.Background(), key, g.Token, hold)
	}
}

func testReentryNotHolder(t *testing.T, l locks.Locker, key locks.Key) {
	_, err := l.Reenter(context.Background(), key, "never-held", time.Minute, locks.Exclusive)
	wantErr(t, err, locks.ErrNotHolder)
	if _, err := l.Inspect(context.Background(), key); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("a refused re-entry acquired the lock: %v", err)
	}
	g := MustAcquire(t, l, key, req(time.Minute))
	_, err = l.Reenter(context.Background(), key, "not-the-holder", time.Minute, locks.Exclusive)
	wantErr(t, err, locks.ErrNotHolder)
	if info, err := l.Inspect(context.Background(), key); err != nil || info.Holds != 1 || info.FencingToken != g.FencingToken {
		t.Fatalf("got %+v, %v; want the holder's single hold unchanged", info, err)
	}
	_, err = l.Reenter(context.Background(), key, g.Token, 0, locks.Exclusive)
	wantErr(t, err, locks.ErrInvalid)
	l.Release(context.Background(), key, g.Token)
}

func testLeaseEndsEveryHold(t *testing.T, l locks.Locker, key locks.Key) {
	// 2 s, not 200 ms: the re-entry must come within the lease ("re-enter
	// …: not the holder (expired)" on a busy machine, Cluster).
	g := MustAcquire(t, l, key, req(2*time.Second))
	if _, err := l.Reenter(context.Background(), key, g.Token, 200*time.Millisecond, locks.Exclusive); err != nil {
		t.Fatal(err)
	}
	WaitUntilFree(t, l, key)
	_, err := l.Release(context.Background(), key, g.Token)
	wantErr(t, err, locks.ErrNotHolder)
	_, err = l.Reenter(context.Background(), key, g.Token, time.Minute, locks.Exclusive)
	wantErr(t, err, locks.ErrNotHolder)
}

func testLastHoldHandsOn(t *testing.T, l locks.Locker, key locks.Key) {
	g := MustAcquire(t, l, key, req(time.Minute))
	inner, err := l.Reenter(context.Background(), key, g.Token, time.Minute, locks.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	waiter := QueueInOrder(t, key, l)[0]
	if rel, err := l.Release(context.Background(), key, g.Token); err != nil || rel.Holds != 1 {
		t.Fatalf("first release: got %+v, %v; want 1 hold left", rel, err)
	}
	select {
	case res := <-waiter:
		t.Fatalf("the waiter got %+v, %v while a hold remained", res.Grant, res.Err)
	default:
	}
	if rel, err := l.ReleaseHold(context.Background(), key, g.Token, inner.Hold); err != nil || rel.Holds != 0 {
		t.Fatalf("last release: got %+v, %v; want 0", rel, err)
	}
	res := <-waiter
	if res.Err != nil || res.Grant.FencingToken <= g.FencingToken || res.Grant.Holds != 1 {
		t.Fatalf("waiter: got %+v, %v; want the lock, one hold, a larger fence", res.Grant, res.Err)
	}
	l.Release(context.Background(), key, res.Grant.Token)
}
