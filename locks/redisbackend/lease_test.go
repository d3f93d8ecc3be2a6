package redisbackend_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

// TestRedisAnsweredLeaseIsHeld checks, after every answer that states a
// lease (an acquire, a hand-off, a renew, a re-entry), that Redis holds
// the lock for the caller at least as long as the answer said (#36,
// finding 5: a renewed lease found shorter in Redis than answered). Three
// gateways share one Redis and hand three locks to each other under
// contention, with a short waiter lease, so that hand-offs are
// provisional, picked up, renewed and re-entered in every order. Nobody
// but the holder ends a grant here, so the holder's own check, made
// before its next call, sees what Redis holds for it.
func TestRedisAnsweredLeaseIsHeld(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := newClient(t, srv)
	const gateways, workers, rounds = 3, 3, 40
	var backends []*redisbackend.Backend
	for range gateways {
		backends = append(backends, newRedis(t, srv, redisbackend.Options{WaiterLease: 300 * time.Millisecond, History: 10}))
	}
	keys := []locks.Key{{Namespace: "lease", Name: "a"}, {Namespace: "lease", Name: "b"}, {Namespace: "lease", Name: "c"}}
	var (
		mu     sync.Mutex
		faults []string
		checks int
	)
	check := func(what string, key locks.Key, token string, answered time.Time) {
		ctx := context.Background()
		before := time.Now()
		lockKey := "lockgate:{" + key.String() + "}"
		pipe := admin.Pipeline()
		tok := pipe.HGet(ctx, lockKey, "tok")
		pttl := pipe.PTTL(ctx, lockKey)
		_, err := pipe.Exec(ctx)
		after := time.Now()
		mu.Lock()
		defer mu.Unlock()
		checks++
		switch {
		case err != nil && !errors.Is(err, redis.Nil):
			faults = append(faults, fmt.Sprintf("%s %s: read Redis: %v", what, key, err))
		case tok.Val() != locks.TokenHash(token):
			if answered.After(after) {
				faults = append(faults, fmt.Sprintf("%s %s: answered a lease until %v, but Redis holds it for another (%.8s) %v before that",
					what, key, answered.Format("15:04:05.000"), tok.Val(), answered.Sub(before)))
			}
		default:
			// Redis's end is at most after + PTTL; a lease answered later
			// than that (with a millisecond for PTTL's rounding) is longer
			// than the one Redis holds.
			if redisEnd := after.Add(pttl.Val() + time.Millisecond); answered.After(redisEnd) {
				faults = append(faults, fmt.Sprintf("%s %s: answered a lease until %v, Redis holds it until %v at the latest: %v short",
					what, key, answered.Format("15:04:05.000"), redisEnd.Format("15:04:05.000"), answered.Sub(redisEnd)))
			}
		}
	}
	var wg sync.WaitGroup
	for g, b := range backends {
		for w := range workers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(g), uint64(w)))
				ctx := context.Background()
				for range rounds {
					key := keys[rng.IntN(len(keys))]
					ttl := time.Duration(200+rng.IntN(1300)) * time.Millisecond
					grant, err := b.Acquire(ctx, key, locks.AcquireRequest{TTL: ttl, Wait: 5 * time.Second, Subject: "t", Owner: fmt.Sprintf("g%dw%d", g, w)})
					if err != nil {
						continue // a wait that ran out
					}
					check("acquire", key, grant.Token, grant.ExpiresAt)
					for range rng.IntN(3) {
						ttl := time.Duration(100+rng.IntN(1500)) * time.Millisecond
						if rng.IntN(2) == 0 {
							l, err := b.Renew(ctx, key, grant.Token, ttl)
							if err != nil {
								break // its lease ended meanwhile: the machine is slow
							}
							check("renew", key, grant.Token, l.ExpiresAt)
						} else {
							re, err := b.Reenter(ctx, key, grant.Token, ttl, locks.Exclusive)
							if err != nil {
								break
							}
							check("re-enter", key, grant.Token, re.ExpiresAt)
							b.ReleaseHold(ctx, key, grant.Token, re.Hold)
						}
					}
					b.Release(ctx, key, grant.Token)
				}
			})
		}
	}
	wg.Wait()
	t.Logf("%d leases checked", checks)
	if checks < gateways*workers*rounds/2 {
		t.Logf("only %d leases checked: the machine is slow", checks)
	}
	for _, f := range faults {
		t.Error(f)
	}
}

// TestRedisSessionGrantLeaseIsHeld: a lock or a permit taken in a session
// in one step (lua/session_acquire.lua) has the lease that is left of the
// session's, whatever TTL the caller asked for, and the answer states no
// lease end later than the one Redis holds: the script answers the lease it
// cut, and the gateway counts it from when it sent the call.
func TestRedisSessionGrantLeaseIsHeld(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := newClient(t, srv)
	l := newRedis(t, srv, redisbackend.Options{})
	ss, err := l.OpenSession(t.Context(), "s", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	asked := locks.AcquireRequest{Subject: "s", TTL: 10 * time.Minute}
	for _, kind := range []string{"lock", "permit"} {
		key := locks.Key{Namespace: "lease", Name: "session-" + kind}
		var g locks.Grant
		var redisKey string
		if kind == "lock" {
			g, err = l.AcquireInSession(t.Context(), ss.Token, key, asked)
			redisKey = "lockgate:{" + key.String() + "}"
		} else {
			g, err = l.AcquirePermitInSession(t.Context(), ss.Token, key, locks.SemaphoreRequest{AcquireRequest: asked, Limit: 2})
			redisKey = "lockgate:sem:{" + key.String() + "}:leases"
		}
		if err != nil {
			t.Fatalf("%s in the session: %v", kind, err)
		}
		var pttl time.Duration
		if kind == "lock" {
			pttl, err = admin.PTTL(t.Context(), redisKey).Result()
		} else {
			var score float64
			score, err = admin.ZScore(t.Context(), redisKey, locks.TokenHash(g.Token)).Result()
			pttl = time.Until(time.UnixMilli(int64(score)))
		}
		after := time.Now()
		if err != nil {
			t.Fatalf("%s: read Redis: %v", kind, err)
		}
		if g.TTL <= 0 || g.TTL > 2*time.Second {
			t.Errorf("%s: answered a TTL of %v; want what is left of the session's 2s", kind, g.TTL)
		}
		if redisEnd := after.Add(pttl + time.Millisecond); g.ExpiresAt.After(redisEnd) {
			t.Errorf("%s: answered a lease until %v, Redis holds it until %v at the latest", kind,
				g.ExpiresAt.Format("15:04:05.000"), redisEnd.Format("15:04:05.000"))
		}
	}
}
