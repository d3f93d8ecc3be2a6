package redisbackend_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/locktest"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

// deliverTwice is a go-redis hook that sends every script call twice, as
// a client does that lost the first reply and sent the command again (a
// ClusterClient re-sending a pipeline on a broken connection): Redis runs
// both deliveries, and the caller sees the second reply.
type deliverTwice struct{}

func (deliverTwice) DialHook(next redis.DialHook) redis.DialHook { return next }

func (deliverTwice) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd) {
			next(ctx, cmd)
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook sends each script call of the pipeline twice in the
// same pipeline, the copies first: Redis runs the two deliveries back to
// back, and each command keeps the second reply. Sent as two pipelines, a
// busy machine put tens of milliseconds between them, past the 20 ms lease
// of a conformance case, whose second delivery then rightly took nothing
// (the first's grant had ended) and answered unavailable.
func (deliverTwice) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var twice []redis.Cmder
		for _, c := range cmds {
			if isScript(c) {
				twice = append(twice, c)
			}
		}
		if len(twice) == 0 {
			return next(ctx, cmds)
		}
		return next(ctx, append(twice, cmds...))
	}
}

func isScript(cmd redis.Cmder) bool {
	name := strings.ToLower(cmd.Name())
	return strings.HasPrefix(name, "eval") || strings.HasPrefix(name, "fcall")
}

// TestRedisDeliveredTwice: the conformance suites, on a client that
// delivers every script call twice. Each call must have one effect (see
// lua/once.lua): before the exactly-once change a re-entered lock's inner
// release took two holds away and freed the lock under its outer holder.
func TestRedisDeliveredTwice(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	open := func(t *testing.T) *redisbackend.Backend {
		c := newClient(t, srv)
		c.AddHook(deliverTwice{})
		r := openRedis(t, c, redisbackend.Options{History: locktest.HistoryLen})
		t.Cleanup(func() { r.Close() })
		return r
	}
	t.Run("Locks", func(t *testing.T) {
		locktest.Run(t, func(t *testing.T) locks.Locker { return open(t) })
	})
	t.Run("Semaphores", func(t *testing.T) {
		locktest.RunSemaphores(t, func(t *testing.T) locks.Backend { return open(t) })
	})
	t.Run("Idempotency", func(t *testing.T) {
		locktest.RunIdempotency(t, func(t *testing.T) locks.Backend { return open(t) })
	})
	t.Run("History", func(t *testing.T) {
		locktest.RunHistory(t, func(t *testing.T) locks.Backend { return open(t) })
	})
	t.Run("Values", func(t *testing.T) {
		locktest.RunValues(t, func(t *testing.T) locks.Backend { return open(t) })
	})
	t.Run("Sessions", func(t *testing.T) {
		locktest.RunSessions(t, func(t *testing.T) locks.Backend { return open(t) })
	})
	t.Run("LockSets", func(t *testing.T) {
		locktest.RunLockSets(t, func(t *testing.T) locks.Backend { return open(t) })
	})
}

// TestDeliverTwiceDelivers: the hook above runs a script call twice, and
// the caller sees the second reply, alone in a pipeline or with others.
func TestDeliverTwiceDelivers(t *testing.T) {
	t.Parallel()
	c := newClient(t, redistest.Start(t))
	c.AddHook(deliverTwice{})
	pipe := c.Pipeline()
	incr := pipe.Eval(t.Context(), "return redis.call('INCR', KEYS[1])", []string{"twice"})
	get := pipe.Get(t.Context(), "twice")
	if _, err := pipe.Exec(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, _ := incr.Int(); n != 2 || get.Val() != "2" {
		t.Fatalf("a script call sent once through the hook: its reply %d, the key %q; want 2 and 2 (two deliveries, the second's reply)", n, get.Val())
	}
}

// TestRedisRefusalKeepsNoRecord: a renewal refused because its grant was
// released keeps no call record, as its refusal is final (SAFETY P13); one
// refused for a token never granted, or whose lease ran out, keeps its
// record (either may be a waiter's, whose hand-off may come later), as does
// a renewal that extended a lease.
func TestRedisRefusalKeepsNoRecord(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	// A call record lives five timeouts: a minute and more, however long
	// a busy machine stalls between the calls and the counts.
	r := newRedis(t, srv, redisbackend.Options{Timeout: 15 * time.Second})
	c := srv.Client(t)
	ctx := t.Context()
	key := locktest.UniqueKey(t)
	records := func(t *testing.T) int {
		t.Helper()
		keys, err := c.Keys(ctx, "*{"+key.Namespace+"/"+key.Name+"}:c:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}
	g := locktest.MustAcquire(t, r, key, locks.AcquireRequest{TTL: time.Minute})
	if _, err := r.Renew(ctx, key, g.Token, 0); err != nil {
		t.Fatalf("renew: %v", err)
	}
	if n := records(t); n != 1 {
		t.Fatalf("after a renewal: %d call records, want 1", n)
	}
	if _, err := r.Release(ctx, key, g.Token); err != nil {
		t.Fatalf("release: %v", err)
	}
	if _, err := r.Renew(ctx, key, g.Token, 0); !errors.Is(err, locks.ErrNotHolder) {
		t.Fatalf("renew after the release: got %v, want ErrNotHolder", err)
	}
	if n := records(t); n != 1 {
		t.Fatalf("after a renewal refused as released: %d call records, want still 1", n)
	}
	if _, err := r.Renew(ctx, key, locks.NewToken(), 0); !errors.Is(err, locks.ErrNotHolder) {
		t.Fatalf("renew of a token never granted: got %v, want ErrNotHolder", err)
	}
	if n := records(t); n != 2 {
		t.Fatalf("after a renewal of a token never granted: %d call records, want 2", n)
	}
	short := locktest.MustAcquire(t, r, key, locks.AcquireRequest{TTL: 50 * time.Millisecond})
	deadline := time.Now().Add(10 * time.Second)
	for { // its lease ends unreleased
		if _, err := r.Inspect(ctx, key); errors.Is(err, locks.ErrNotHeld) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a 50ms lease did not end within 10s")
		}
		time.Sleep(5 * time.Millisecond) // polling for an expiry
	}
	if _, err := r.Renew(ctx, key, short.Token, 0); !errors.Is(err, locks.ErrNotHolder) {
		t.Fatalf("renew after the lease ran out: got %v, want ErrNotHolder", err)
	}
	if n := records(t); n != 3 {
		t.Fatalf("after a renewal refused as expired: %d call records, want 3", n)
	}
}
