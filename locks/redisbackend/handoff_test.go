package redisbackend_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/locktest"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

// The tests here pin what the review of issue 9 found: a waiter dropped
// from the queue finds out, a hand-off nobody picks up ends, and a waiter
// learns of an outage.

// TestRedisDroppedWaiterRejoins: a waiter that a hand-off dropped from the
// queue (its heartbeat lapsed, as in a network blip) learns it from its
// next heartbeat and rejoins in its old place: it gets the lock before a
// waiter that arrived after it, instead of sleeping to its deadline.
func TestRedisDroppedWaiterRejoins(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l := newRedis(t, srv, redisbackend.Options{WaiterLease: 300 * time.Millisecond})
	admin := srv.Client(t)
	key := locktest.UniqueKey(t)
	prefix := "lockgate:{" + key.String() + "}"
	holder := locktest.MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute})

	dropped := locktest.QueueInOrder(t, key, l)[0]
	ids, err := admin.ZRange(t.Context(), prefix+":queue", 0, -1).Result()
	if err != nil || len(ids) != 1 {
		t.Fatalf("queue: got %v, %v; want one waiter", ids, err)
	}
	// What a hand-off does to a waiter whose heartbeat lapsed.
	if err := admin.Eval(t.Context(), `
		redis.call('ZREM', KEYS[1], ARGV[1]); redis.call('ZREM', KEYS[2], ARGV[1])
		return redis.call('HDEL', KEYS[3], ARGV[1])`,
		[]string{prefix + ":queue", prefix + ":alive", prefix + ":waiters"}, ids[0]).Err(); err != nil {
		t.Fatal(err)
	}
	locktest.WaitUntilQueued(t, l, key, 1) // it is back
	later := locktest.QueueBehind(t, l, key, 1)

	if _, err := l.Release(t.Context(), key, holder.Token); err != nil {
		t.Fatal(err)
	}
	first := locktest.Within(t, 10*time.Second, "the dropped waiter", dropped)
	if first.Err != nil {
		t.Fatalf("the dropped waiter: got %v, want the lock", first.Err)
	}
	select {
	case res := <-later:
		t.Fatalf("the later waiter got %+v, %v while the dropped one held the lock", res.Grant, res.Err)
	default:
	}
	if _, err := l.Release(t.Context(), key, first.Grant.Token); err != nil {
		t.Fatal(err)
	}
	if res := locktest.Within(t, 10*time.Second, "the later waiter", later); res.Err != nil {
		t.Fatalf("the later waiter: %v", res.Err)
	}
}

// TestRedisUnpickedHandoffEnds: the lock is handed to a waiter whose
// gateway never picks it up (it froze with its subscription open, so
// PUBLISH counts it; or, on Cluster, PUBLISH cannot tell). That waiter
// asked for a one-minute TTL, but the grant was provisional: it ends within
// the waiter lease, and the next waiter gets the lock.
func TestRedisUnpickedHandoffEnds(t *testing.T) {
	t.Parallel()
	for _, cluster := range []bool{false, true} {
		t.Run(fmt.Sprintf("cluster=%v", cluster), func(t *testing.T) {
			srv := redistest.Start(t)
			const lease = 300 * time.Millisecond
			l := newRedis(t, srv, redisbackend.Options{WaiterLease: lease})
			channel := "frozen-gateway"
			if cluster {
				l.PretendCluster()
				channel = "" // nobody hears it, and on Cluster nobody can tell
			} else {
				frozen := srv.Client(t).Subscribe(t.Context(), channel)
				defer frozen.Close()
				if _, err := frozen.Receive(t.Context()); err != nil { // confirmed
					t.Fatal(err)
				}
			}
			// A busy machine may take longer than the ghost's waiter lease
			// from its queueing to the release: then the ghost is dead,
			// the live waiter gets the lock, rightly, and nothing is
			// shown; that round is drawn again (seen at load 13).
			for round := 1; ; round++ {
				key := locktest.UniqueKey(t)
				holder := locktest.MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute})
				queued := time.Now()
				if err := l.QueueGhost(t.Context(), key, locks.AcquireRequest{TTL: time.Minute, Wait: time.Minute}, channel); err != nil {
					t.Fatal(err)
				}
				live := locktest.QueueBehind(t, l, key, 1)
				if _, err := l.Release(t.Context(), key, holder.Token); err != nil {
					t.Fatal(err)
				}
				lapsed := time.Since(queued) > lease
				info, err := l.Inspect(t.Context(), key)
				if err == nil && info.Subject != "ghost" && lapsed && round < 10 {
					if res := locktest.Within(t, 10*time.Second, "the live waiter", live); res.Err == nil {
						l.Release(t.Context(), key, res.Grant.Token)
					}
					continue
				}
				if err != nil || info.Subject != "ghost" || info.TTL > lease {
					t.Fatalf("round %d: got %+v, %v; want the lock handed to the ghost for at most %v", round, info, err, lease)
				}
				// Far below the ghost's one-minute TTL.
				res := locktest.Within(t, 10*time.Second, "the live waiter", live)
				if res.Err != nil {
					t.Fatalf("the live waiter: %v", res.Err)
				}
				break
			}
		})
	}
}

// TestRedisWaiterLearnsOfOutage: Redis goes away while a waiter waits. The
// waiter learns it from its gateway's next heartbeat and gets
// ErrUnavailable within about a heartbeat and a timeout, not at the end of
// its 30 s wait.
func TestRedisWaiterLearnsOfOutage(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l := openRedis(t, newClient(t, srv), redisbackend.Options{WaiterLease: 300 * time.Millisecond, Timeout: 300 * time.Millisecond})
	t.Cleanup(func() { l.Close() })
	key := locktest.UniqueKey(t)
	locktest.MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute})
	waiter := locktest.QueueInOrder(t, key, l)[0]
	srv.Stop()
	res := locktest.Within(t, 10*time.Second, "the waiter, once Redis is gone", waiter)
	if !errors.Is(res.Err, locks.ErrUnavailable) {
		t.Fatalf("got %+v, %v; want ErrUnavailable", res.Grant, res.Err)
	}
}

// TestRedisLateFullHandOver: a release on a waiter's own gateway hands the
// lock to it in full, and says so in its reply, which the gateway passes
// to the waiter. A waiter that ended without the lock can never be handed
// it: a call of it that Redis receives after its leave (one whose outcome
// was unknown) is fenced off by its token and queues nothing, so the next
// waiter has the lock long before the ghost's one-minute TTL. (Until the
// acquire was keyed by its token, such a call queued the waiter again, and
// the gateway had to release what the late reply handed it.) One that has
// the lock (its own script picked the grant up before the reply came)
// keeps it.
func TestRedisLateFullHandOver(t *testing.T) {
	t.Parallel()
	t.Run("waiter gave up", func(t *testing.T) {
		srv := redistest.Start(t)
		l := newRedis(t, srv, redisbackend.Options{WaiterLease: time.Minute})
		key := locktest.UniqueKey(t)
		holder := locktest.MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := l.Acquire(ctx, key, locks.AcquireRequest{TTL: time.Minute, Wait: time.Minute})
			done <- err
		}()
		locktest.WaitUntilQueued(t, l, key, 1)
		ids := l.WaitingIDs(key)
		if len(ids) != 1 {
			t.Fatalf("waiting ids: got %v, want one", ids)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled acquire: got %v, want context.Canceled", err)
		}
		if err := l.RequeueGone(t.Context(), key, ids[0], locks.AcquireRequest{TTL: time.Minute, Wait: time.Minute}); !errors.Is(err, redisbackend.ErrFencedOff) {
			t.Fatalf("a late call of the waiter that gave up: got %v, want it fenced off", err)
		}
		next := locktest.QueueBehind(t, l, key, 0) // the ghost is not queued
		if _, err := l.Release(t.Context(), key, holder.Token); err != nil {
			t.Fatal(err)
		}
		if res := locktest.Within(t, 10*time.Second, "the waiter behind the ghost", next); res.Err != nil {
			t.Fatalf("the waiter behind the ghost: %v", res.Err)
		}
	})
	t.Run("waiter has the lock", func(t *testing.T) {
		srv := redistest.Start(t)
		l := newRedis(t, srv, redisbackend.Options{WaiterLease: time.Minute})
		key := locktest.UniqueKey(t)
		holder := locktest.MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute})
		waiter := locktest.QueueBehind(t, l, key, 0)
		ids := l.WaitingIDs(key)
		if len(ids) != 1 {
			t.Fatalf("waiting ids: got %v, want one", ids)
		}
		if _, err := l.Release(t.Context(), key, holder.Token); err != nil {
			t.Fatal(err)
		}
		res := locktest.Within(t, 10*time.Second, "the waiter", waiter)
		if res.Err != nil {
			t.Fatalf("the waiter: %v", res.Err)
		}
		l.LateHandOver(t.Context(), key, ids[0])
		// LateHandOver's clean-up, if any, runs in the background: a
		// release of a lock held by nobody else ends the moment the next
		// acquire is answered.
		info, err := l.Inspect(t.Context(), key)
		if err != nil || info.FencingToken != res.Grant.FencingToken {
			t.Fatalf("inspect after a late hand-over: got %+v, %v; want the waiter's grant (fence %d)", info, err, res.Grant.FencingToken)
		}
	})
}

// TestRedisFullHandOverBrokenBeforeDelivery: a release hands the lock in
// full to a waiter of its own gateway, and before the gateway gives the
// waiter that grant (its reply is slow), a break ends it and the waiter's
// own script, run again, finds nothing and queues it again. The waiter must
// not then take the grant that ended and leave its place in the queue
// behind: the next hand-off would go to its owner token, and its holder's
// calls would act on a grant it was never told of.
func TestRedisFullHandOverBrokenBeforeDelivery(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l := newRedis(t, srv, redisbackend.Options{WaiterLease: time.Minute})
	other := newRedis(t, srv, redisbackend.Options{WaiterLease: time.Minute}) // another gateway
	// A waiter on another lock first: the heartbeat round that l's new
	// subscription asks for takes l's waiters before the waiter below
	// exists, which it would wake at a moment of its own.
	busy := locktest.UniqueKey(t)
	busyHolder := locktest.MustAcquire(t, l, busy, locks.AcquireRequest{TTL: time.Minute})
	busyWaiter := locktest.QueueBehind(t, l, busy, 0)
	defer func() {
		if _, err := l.Release(t.Context(), busy, busyHolder.Token); err != nil {
			t.Error(err)
		}
		locktest.Within(t, 10*time.Second, "the waiter on the other lock", busyWaiter)
	}()

	key := locktest.UniqueKey(t)
	holder := locktest.MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute})
	waiter := locktest.QueueBehind(t, l, key, 0)
	next := locktest.QueueBehind(t, other, key, 1)
	deliver, err := l.ReleaseSlowly(t.Context(), key, holder.Token)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Break(t.Context(), key, "admin", 0); err != nil {
		t.Fatal(err)
	}
	second := locktest.Within(t, 10*time.Second, "the waiter after the break", next)
	if second.Err != nil {
		t.Fatalf("the waiter after the break: %v", second.Err)
	}
	l.WakeWaiters(key)
	locktest.WaitUntilQueued(t, l, key, 1) // its script queued it again
	deliver()
	if _, err := other.Release(t.Context(), key, second.Grant.Token); err != nil {
		t.Fatal(err)
	}
	res := locktest.Within(t, 10*time.Second, "the waiter", waiter)
	if res.Err != nil {
		t.Fatalf("the waiter: %v", res.Err)
	}
	// Its owner token holds the grant it was answered, or nothing.
	lease, err := l.Renew(t.Context(), key, res.Grant.Token, time.Minute)
	if err == nil && lease.FencingToken != res.Grant.FencingToken {
		t.Fatalf("renew of the waiter's grant: renewed fencing token %d, want %d, the one its acquire answered", lease.FencingToken, res.Grant.FencingToken)
	}
}

// TestRedisNearHandOverIsNoted: a grant the release script hands in full
// to a waiter of its own gateway leaves the same record and lock delay as
// one the waiter's own script takes: once its lease ends unreleased, its
// token's release says "expired", and the lock stays unavailable for the
// delay.
func TestRedisNearHandOverIsNoted(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l := newRedis(t, srv, redisbackend.Options{LockDelay: 2 * time.Second})
	key := locktest.UniqueKey(t)
	holder := locktest.MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute})
	waiter := make(chan locktest.Result, 1)
	go func() {
		g, err := l.Acquire(t.Context(), key, locks.AcquireRequest{TTL: 100 * time.Millisecond, Wait: time.Minute})
		waiter <- locktest.Result{Grant: g, Err: err}
	}()
	locktest.WaitUntilQueued(t, l, key, 1)
	if _, err := l.Release(t.Context(), key, holder.Token); err != nil {
		t.Fatal(err)
	}
	res := locktest.Within(t, 10*time.Second, "the waiter", waiter)
	if res.Err != nil {
		t.Fatalf("the waiter: %v", res.Err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for { // its 100 ms lease ends unreleased
		if _, err := l.Inspect(t.Context(), key); errors.Is(err, locks.ErrNotHeld) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter's 100ms lease did not end within 10s")
		}
		time.Sleep(5 * time.Millisecond) // polling for an expiry
	}
	_, err := l.Release(t.Context(), key, res.Grant.Token)
	var nh *locks.NotHolderError
	if !errors.As(err, &nh) || nh.Reason != locks.ReasonExpired {
		t.Fatalf("release after the lease ended: got %v, want not the holder (expired)", err)
	}
	if _, err := l.Acquire(t.Context(), key, locks.AcquireRequest{TTL: time.Minute}); !errors.Is(err, locks.ErrHeld) {
		t.Fatalf("acquire inside the lock delay: got %v, want held", err)
	}
}

// TestRedisLatePermitPickUpKeepsItsLease: a permit handed to a waiter whose
// gateway picks it up late gets its whole TTL from the pick-up, and the
// semaphore's keys live that long too. They used to keep the expiry set at
// the hand-off, so a late pick-up lost its permit early with them
// (TestSemaphoreRandomFaults: "release answered 409 ... before its
// expires_at").
func TestRedisLatePermitPickUpKeepsItsLease(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l := newRedis(t, srv, redisbackend.Options{})
	l.PretendCluster() // a hand-off nobody hears stays handed, as on Cluster
	key := locktest.UniqueKey(t)
	// Seconds, not hundreds of milliseconds: the renew must land between
	// the hand-off's expiry and the pick-up's, and a machine busy with
	// other work stalls a test for more than 150 ms (it did, at 600 ms).
	const ttl = 4 * time.Second
	holder := locktest.MustAcquirePermit(t, l, key, locks.SemaphoreRequest{Limit: 1, AcquireRequest: locks.AcquireRequest{TTL: time.Minute}})
	ghost, err := l.QueuePermitGhost(t.Context(), key, 1, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.ReleasePermit(t.Context(), key, holder.Token); err != nil { // hands the permit on, provisionally
		t.Fatal(err)
	}
	time.Sleep(ttl / 2) // the pick-up comes late: the delay under test
	pickedUp := time.Now()
	if err := l.PickUpPermit(t.Context(), key, ghost, 1, ttl); err != nil {
		t.Fatal(err)
	}
	for time.Since(pickedUp) < ttl*3/4 { // past the hand-off's expiry, inside the pick-up's lease
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := l.RenewPermit(t.Context(), key, ghost, time.Minute); err != nil {
		t.Fatalf("renew %v after a pick-up with a %v TTL: %v", time.Since(pickedUp), ttl, err)
	}
	l.ReleasePermit(t.Context(), key, ghost)
}
