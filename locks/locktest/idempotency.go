package locktest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// RunIdempotency runs the suite of acquires with an idempotency key (see
// locks.Idempotent). Tests run in parallel, with names of their own.
func RunIdempotency(t *testing.T, newBackend func(t *testing.T) locks.Backend) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T, b locks.Backend, key locks.Key)
	}{
		{"RetryGetsTheSameGrant", testIdemRetrySameGrant},
		{"RetryWithAnotherRequestIsAMismatch", testIdemMismatch},
		{"KeysOfOtherSubjectsAreApart", testIdemSubjectsApart},
		{"RetryWhileTheFirstWaitsIsInProgress", testIdemInProgress},
		{"CallNotGrantedLeavesNoTrace", testIdemNotGrantedNoTrace},
		{"CancelledWaiterLeavesNoTrace", testIdemCancelledNoTrace},
		{"GrantWhoseCallerLeftIsKeptForTheRetry", testIdemCallerLeftKept},
		{"RetryAfterReleaseIsGrantEnded", testIdemReleasedEnded},
		{"RetryAfterExpiryIsGrantEnded", testIdemExpiredEnded},
		{"ConcurrentRetriesShareOneGrant", testIdemConcurrent},
		{"SharedRetryGetsItsOwnHold", testIdemShared},
		{"PermitRetryTakesNoSecondPermit", testIdemPermit},
		{"PermitRetryWithAnotherLimitIsAMismatch", testIdemPermitMismatch},
		{"InvalidKeysRefused", testIdemInvalid},
		{"ReplayStatesTheCap", testIdemReplayStatesTheCap},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, newBackend(t), UniqueKey(t))
		})
	}
}

// IdemKey returns an idempotency key no other test in this process uses.
func IdemKey(t testing.TB) string { return "k-" + UniqueKey(t).Name }

func mustOnce(t testing.TB, b locks.Backend, key locks.Key, r locks.AcquireRequest, k string) locks.Grant {
	t.Helper()
	g, err := b.AcquireOnce(context.Background(), key, r, k)
	if err != nil {
		t.Fatalf("acquire %s once: %v", key, err)
	}
	return g
}

// sameGrant fails unless retry is a replay of first.
func sameGrant(t testing.TB, first, retry locks.Grant) {
	t.Helper()
	switch {
	case retry.Token != first.Token:
		t.Fatalf("retry got another token")
	case retry.FencingToken != first.FencingToken:
		t.Fatalf("retry got fencing token %d, want %d", retry.FencingToken, first.FencingToken)
	case !retry.Replayed:
		t.Fatalf("retry not marked Replayed")
	case retry.TTL <= 0 || retry.TTL > first.TTL:
		t.Fatalf("retry got TTL %s, want what remains of %s", retry.TTL, first.TTL)
	case retry.ExpiresAt.After(time.Now().Add(first.TTL)):
		// The grant was made before now, for first.TTL, and not renewed:
		// its lease ends before now + first.TTL. (Not before
		// first.ExpiresAt: each call counts from when it sent its own
		// script, and the first one's may have waited longer for Redis.)
		t.Fatalf("retry expires at %s, after the lease can end", retry.ExpiresAt)
	}
}

func testIdemRetrySameGrant(t *testing.T, b locks.Backend, key locks.Key) {
	k := IdemKey(t)
	r := req(time.Minute)
	first := mustOnce(t, b, key, r, k)
	if first.Replayed {
		t.Fatal("first call marked Replayed")
	}
	for range 3 {
		sameGrant(t, first, mustOnce(t, b, key, r, k))
	}
	// The replayed token is the real one: it releases the lock.
	if _, err := b.Release(context.Background(), key, mustOnce(t, b, key, r, k).Token); err != nil {
		t.Fatalf("release with the replayed token: %v", err)
	}
	if _, err := b.Inspect(context.Background(), key); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("inspect after release: got %v, want ErrNotHeld", err)
	}
}

func testIdemMismatch(t *testing.T, b locks.Backend, key locks.Key) {
	k := IdemKey(t)
	r := req(time.Minute)
	mustOnce(t, b, key, r, k)
	for name, other := range map[string]locks.AcquireRequest{
		"ttl":   {TTL: 2 * time.Minute, Subject: r.Subject},
		"wait":  {TTL: r.TTL, Wait: time.Second, Subject: r.Subject},
		"owner": {TTL: r.TTL, Owner: "someone", Subject: r.Subject},
		"mode":  {TTL: r.TTL, Subject: r.Subject, Mode: locks.Shared},
		"value": {TTL: r.TTL, Subject: r.Subject, Value: "v"},
	} {
		_, err := b.AcquireOnce(context.Background(), key, other, k)
		if !errors.Is(err, locks.ErrIdempotencyMismatch) {
			t.Fatalf("another %s: got %v, want ErrIdempotencyMismatch", name, err)
		}
	}
	// The same key on another lock is another record.
	mustOnce(t, b, UniqueKey(t), r, k)
}

func testIdemSubjectsApart(t *testing.T, b locks.Backend, key locks.Key) {
	k := IdemKey(t)
	mustOnce(t, b, key, locks.AcquireRequest{TTL: time.Minute, Subject: "alice"}, k)
	_, err := b.AcquireOnce(context.Background(), key, locks.AcquireRequest{TTL: time.Minute, Subject: "bob"}, k)
	wantErr(t, err, locks.ErrHeld)
}

func testIdemInProgress(t *testing.T, b locks.Backend, key locks.Key) {
	holder := MustAcquire(t, b, key, req(time.Minute))
	k := IdemKey(t)
	r := locks.AcquireRequest{TTL: time.Minute, Wait: 30 * time.Second, Subject: "tester"}
	first := make(chan Result, 1)
	go func() {
		g, err := b.AcquireOnce(context.Background(), key, r, k)
		first <- Result{Grant: g, Err: err}
	}()
	WaitUntilQueued(t, b, key, 1)
	_, err := b.AcquireOnce(context.Background(), key, r, k)
	var ip *locks.InProgressError
	if !errors.As(err, &ip) {
		t.Fatalf("retry while the first waits: got %v, want an *InProgressError", err)
	}
	if ip.RetryAfter <= 0 || ip.RetryAfter > time.Second {
		t.Fatalf("got RetryAfter %s, want (0, 1s]", ip.RetryAfter)
	}
	if _, err := b.Release(context.Background(), key, holder.Token); err != nil {
		t.Fatal(err)
	}
	res := <-first
	if res.Err != nil {
		t.Fatalf("first call: %v", res.Err)
	}
	sameGrant(t, res.Grant, mustOnce(t, b, key, r, k))
}

func testIdemNotGrantedNoTrace(t *testing.T, b locks.Backend, key locks.Key) {
	holder := MustAcquire(t, b, key, req(time.Minute))
	k := IdemKey(t)
	_, err := b.AcquireOnce(context.Background(), key, req(time.Minute), k)
	wantErr(t, err, locks.ErrHeld)
	if _, err := b.Release(context.Background(), key, holder.Token); err != nil {
		t.Fatal(err)
	}
	g := mustOnce(t, b, key, req(time.Minute), k)
	if g.Replayed || g.Token == holder.Token {
		t.Fatal("the retry after a refusal did not acquire afresh")
	}
}

func testIdemCancelledNoTrace(t *testing.T, b locks.Backend, key locks.Key) {
	holder := MustAcquire(t, b, key, req(time.Minute))
	k := IdemKey(t)
	r := locks.AcquireRequest{TTL: time.Minute, Wait: 30 * time.Second, Subject: "tester"}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := b.AcquireOnce(ctx, key, r, k)
		done <- err
	}()
	WaitUntilQueued(t, b, key, 1)
	cancel()
	wantErr(t, <-done, context.Canceled)
	if _, err := b.Release(context.Background(), key, holder.Token); err != nil {
		t.Fatal(err)
	}
	if g := mustOnce(t, b, key, r, k); g.Replayed {
		t.Fatal("the retry after a cancelled call was a replay")
	}
}

// testIdemCallerLeftKept: a call whose caller is gone by the time it is
// granted (a client that timed out, or whose connection dropped, as the
// script ran) keeps its grant for the retry, as a lost 201's retry gets the
// lost grant. A context done before the call is one done as it was
// granted: an acquire that does not wait looks at it only after the grant.
func testIdemCallerLeftKept(t *testing.T, b locks.Backend, key locks.Key) {
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	k, sk := IdemKey(t), UniqueKey(t)
	for _, kind := range []struct {
		name    string
		acquire func(ctx context.Context) (locks.Grant, error)
	}{
		{"lock", func(ctx context.Context) (locks.Grant, error) { return b.AcquireOnce(ctx, key, req(time.Minute), k) }},
		{"permit", func(ctx context.Context) (locks.Grant, error) {
			return b.AcquirePermitOnce(ctx, sk, permitReq(2, time.Minute, 0), k)
		}},
	} {
		first, firstErr := kind.acquire(gone)
		retry, err := kind.acquire(context.Background())
		if err != nil {
			t.Fatalf("%s: the retry: %v", kind.name, err)
		}
		if !retry.Replayed {
			t.Fatalf("%s: the retry after a call granted as its caller left got a new grant (fencing token %d), want that call's, kept for it",
				kind.name, retry.FencingToken)
		}
		if firstErr != nil {
			t.Fatalf("%s: the call granted as its caller left: got %v, want its grant", kind.name, firstErr)
		}
		sameGrant(t, first, retry)
	}
}

func testIdemReleasedEnded(t *testing.T, b locks.Backend, key locks.Key) {
	k := IdemKey(t)
	g := mustOnce(t, b, key, req(time.Minute), k)
	if _, err := b.Release(context.Background(), key, g.Token); err != nil {
		t.Fatal(err)
	}
	_, err := b.AcquireOnce(context.Background(), key, req(time.Minute), k)
	wantErr(t, err, locks.ErrGrantEnded)
	// The lock itself is free for anyone else.
	MustAcquire(t, b, key, req(time.Minute))
}

func testIdemExpiredEnded(t *testing.T, b locks.Backend, key locks.Key) {
	k := IdemKey(t)
	r := req(50 * time.Millisecond)
	mustOnce(t, b, key, r, k)
	WaitUntilFree(t, b, key)
	_, err := b.AcquireOnce(context.Background(), key, r, k)
	wantErr(t, err, locks.ErrGrantEnded)
}

func testIdemConcurrent(t *testing.T, b locks.Backend, key locks.Key) {
	const n = 20
	k := IdemKey(t)
	sk := UniqueKey(t) // a semaphore with room for all: retries must not take more
	var mu sync.Mutex
	tokens, semTokens := map[string]bool{}, map[string]bool{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			g, err := b.AcquireOnce(context.Background(), key, req(time.Minute), k)
			sg, serr := b.AcquirePermitOnce(context.Background(), sk, permitReq(n, time.Minute, 0), k)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				tokens[g.Token] = true
			} else if !errors.Is(err, locks.ErrIdempotencyInProgress) {
				t.Errorf("lock: got %v, want a grant or ErrIdempotencyInProgress", err)
			}
			if serr == nil {
				semTokens[sg.Token] = true
			} else if !errors.Is(serr, locks.ErrIdempotencyInProgress) {
				t.Errorf("semaphore: got %v, want a grant or ErrIdempotencyInProgress", serr)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(tokens) != 1 || len(semTokens) != 1 {
		t.Fatalf("got %d lock tokens and %d permit tokens, want 1 of each", len(tokens), len(semTokens))
	}
	info, err := b.InspectSemaphore(context.Background(), sk)
	if err != nil || len(info.Holders) != 1 {
		t.Fatalf("got %d permits taken (%v), want 1", len(info.Holders), err)
	}
}

func testIdemPermit(t *testing.T, b locks.Backend, key locks.Key) {
	k := IdemKey(t)
	r := permitReq(2, time.Minute, 0)
	first, err := b.AcquirePermitOnce(context.Background(), key, r, k)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		retry, err := b.AcquirePermitOnce(context.Background(), key, r, k)
		if err != nil {
			t.Fatal(err)
		}
		sameGrant(t, first, retry)
	}
	info, err := b.InspectSemaphore(context.Background(), key)
	if err != nil || len(info.Holders) != 1 {
		t.Fatalf("got %d permits taken (%v), want 1", len(info.Holders), err)
	}
	// The lock of the same name is apart, and so is its record.
	if g := mustOnce(t, b, key, req(time.Minute), k); g.Replayed {
		t.Fatal("a lock's call replayed a permit of the semaphore of the same name")
	}
	if _, err := b.ReleasePermit(context.Background(), key, first.Token); err != nil {
		t.Fatal(err)
	}
	_, err = b.AcquirePermitOnce(context.Background(), key, r, k)
	wantErr(t, err, locks.ErrGrantEnded)
}

func testIdemPermitMismatch(t *testing.T, b locks.Backend, key locks.Key) {
	k := IdemKey(t)
	if _, err := b.AcquirePermitOnce(context.Background(), key, permitReq(2, time.Minute, 0), k); err != nil {
		t.Fatal(err)
	}
	_, err := b.AcquirePermitOnce(context.Background(), key, permitReq(3, time.Minute, 0), k)
	wantErr(t, err, locks.ErrIdempotencyMismatch)
}

func testIdemInvalid(t *testing.T, b locks.Backend, key locks.Key) {
	for name, k := range map[string]string{
		"empty":     "",
		"too long":  strings.Repeat("k", locks.MaxIdempotencyKeyLen+1),
		"space":     "a b",
		"non-ASCII": "clé",
		"control":   "a\x00",
	} {
		_, err := b.AcquireOnce(context.Background(), key, req(time.Minute), k)
		if !errors.Is(err, locks.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	mustOnce(t, b, key, req(time.Minute), strings.Repeat("~", locks.MaxIdempotencyKeyLen))
}

func testIdemShared(t *testing.T, b locks.Backend, key locks.Key) {
	r := locks.AcquireRequest{TTL: time.Minute, Subject: "reader", Mode: locks.Shared}
	k1, k2 := IdemKey(t), IdemKey(t)
	one := mustOnce(t, b, key, r, k1)
	two := mustOnce(t, b, key, r, k2)
	if one.Token == two.Token {
		t.Fatal("two keys, one shared hold")
	}
	sameGrant(t, one, mustOnce(t, b, key, r, k1))
	sameGrant(t, two, mustOnce(t, b, key, r, k2))
	if _, err := b.Renew(context.Background(), key, one.Token, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if g := mustOnce(t, b, key, r, k1); g.TTL <= time.Minute || g.Token != one.Token {
		t.Fatalf("retry after a renew: got %+v, want the renewed hold", g.Lease)
	}
	if _, err := b.Release(context.Background(), key, one.Token); err != nil {
		t.Fatal(err)
	}
	_, err := b.AcquireOnce(context.Background(), key, r, k1)
	wantErr(t, err, locks.ErrGrantEnded)
	sameGrant(t, two, mustOnce(t, b, key, r, k2))
	if _, err := b.Release(context.Background(), key, two.Token); err != nil {
		t.Fatal(err)
	}
}
