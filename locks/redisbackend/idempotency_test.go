package redisbackend_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/locktest"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

func TestRedisIdempotencyConformance(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	locktest.RunIdempotency(t, func(t *testing.T) locks.Backend { return newRedis(t, srv, redisbackend.Options{}) })
}

// TestRedisClusterIdempotencyConformance: the record shares its lock's
// (semaphore's) hash tag, so its scripts, and the renew that reaches the
// record from the grant, run on Cluster.
func TestRedisClusterIdempotencyConformance(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	locktest.RunIdempotency(t, func(t *testing.T) locks.Backend {
		r := openRedis(t, cluster.Client(t), redisbackend.Options{})
		t.Cleanup(func() { r.Close() })
		return r
	})
}

// TestRedisIdempotencyRecord: what Redis holds of a key is useless without
// it (no token, no key), and it is remembered for IdempotencyGrace past the
// lease as renewals, re-entries and permit renewals move it.
func TestRedisIdempotencyRecord(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	r := newRedis(t, srv, redisbackend.Options{})
	c := srv.Client(t)
	ctx := t.Context()
	idemKey := "secret-" + locktest.UniqueKey(t).Name
	record := func(t *testing.T, pattern string) string {
		t.Helper()
		all, err := c.Keys(ctx, pattern).Result()
		keys := slices.DeleteFunc(all, func(k string) bool { return strings.Contains(k, ":c:") }) // the calls' records (lua/once.lua)
		if err != nil || len(keys) != 1 {
			t.Fatalf("got records %v (%v), want one matching %s", keys, err, pattern)
		}
		return keys[0]
	}
	remembered := func(t *testing.T, rec string, lease time.Duration) {
		t.Helper()
		pttl, err := c.PTTL(ctx, rec).Result()
		if err != nil {
			t.Fatal(err)
		}
		low, high := lease+locks.IdempotencyGrace-5*time.Second, lease+locks.IdempotencyGrace
		if pttl < low || pttl > high {
			t.Fatalf("record remembered for %s, want %s to %s", pttl, low, high)
		}
	}
	noSecrets := func(t *testing.T, rec, token string) {
		t.Helper()
		dump, err := c.HGetAll(ctx, rec).Result()
		if err != nil {
			t.Fatal(err)
		}
		for f, v := range dump {
			if strings.Contains(v, token) || strings.Contains(v, idemKey) || strings.Contains(rec, idemKey) {
				t.Fatalf("record field %s holds the owner token or the idempotency key", f)
			}
		}
	}

	t.Run("Lock", func(t *testing.T) {
		key := locktest.UniqueKey(t)
		g, err := r.AcquireOnce(ctx, key, locks.AcquireRequest{TTL: time.Minute, Subject: "s"}, idemKey)
		if err != nil {
			t.Fatal(err)
		}
		rec := record(t, "lockgate:{"+key.String()+"}:idem:*")
		noSecrets(t, rec, g.Token)
		remembered(t, rec, time.Minute)
		if _, err := r.Renew(ctx, key, g.Token, 10*time.Minute); err != nil {
			t.Fatal(err)
		}
		remembered(t, rec, 10*time.Minute)
		if _, err := r.Reenter(ctx, key, g.Token, 20*time.Minute, locks.Exclusive); err != nil {
			t.Fatal(err)
		}
		remembered(t, rec, 20*time.Minute)
	})
	t.Run("Permit", func(t *testing.T) {
		key := locktest.UniqueKey(t)
		g, err := r.AcquirePermitOnce(ctx, key, locks.SemaphoreRequest{Limit: 3,
			AcquireRequest: locks.AcquireRequest{TTL: time.Minute, Subject: "s"}}, idemKey)
		if err != nil {
			t.Fatal(err)
		}
		rec := record(t, "lockgate:sem:{"+key.String()+"}:idem:*")
		noSecrets(t, rec, g.Token)
		remembered(t, rec, time.Minute)
		if _, err := r.RenewPermit(ctx, key, g.Token, 10*time.Minute); err != nil {
			t.Fatal(err)
		}
		remembered(t, rec, 10*time.Minute)
	})
}
