package redisbackend_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/locktest"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

// TestRedisWatchAheadOfTheHubReadsAgain: a watcher that has seen an index
// this gateway has not (another gateway's answer, a plain GET's
// Lockgate-Index) gets the lock's state at that index or later, not the
// older state this gateway read before: the gateway reads Redis again
// first. Here this gateway's hint of the change is lost (its registration
// is dropped, as a Redis that restarted without it does), the widest case
// of the few milliseconds by which a hint follows a change. Before, the
// watch answered at once with the older state, index and holder.
func TestRedisWatchAheadOfTheHubReadsAgain(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	a := newRedis(t, srv, redisbackend.Options{History: 10})
	b := newRedis(t, srv, redisbackend.Options{History: 10})
	admin := newClient(t, srv)
	for round := range 3 {
		key := locktest.UniqueKey(t)
		g := locktest.MustAcquire(t, b, key, locks.AcquireRequest{TTL: time.Minute, Subject: "t"})
		before, err := a.Watch(ctx, key, -1) // a's hub now holds the lock's state
		if err != nil || !before.Held {
			t.Fatalf("round %d: a's first watch: got %+v, %v; want held", round, before, err)
		}
		if err := admin.Del(ctx, "lockgate:{"+key.Namespace+"/"+key.Name+"}:w").Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Release(ctx, key, g.Token); err != nil {
			t.Fatal(err)
		}
		now, err := b.Watch(ctx, key, -1)
		if err != nil || now.Held || now.Index <= before.Index {
			t.Fatalf("round %d: b after the release: got %+v, %v; want free, past index %d", round, now, err, before.Index)
		}
		// And the lock is taken again: a watcher from b's index is owed
		// this change, which a hears of no more than of the release.
		g2 := locktest.MustAcquire(t, b, key, locks.AcquireRequest{TTL: time.Minute, Subject: "t"})
		got, err := a.Watch(ctx, key, now.Index)
		if err != nil || !got.Held || got.Index <= now.Index || got.Info.FencingToken != g2.FencingToken {
			t.Fatalf("round %d: a's watch from b's index %d: got index %d, held %v (fencing token %d), %v; want past that index, held by %d",
				round, now.Index, got.Index, got.Held, got.Info.FencingToken, err, g2.FencingToken)
		}
		b.Release(ctx, key, g2.Token)
	}
}

// TestRedisWatchAfterTheLeaseEndReadsAgain: a watcher that comes after the
// soonest lease this gateway knows of has ended is answered from a read
// sent after it came, not from the state read before that end: the
// gateway's reads of the lock failed meanwhile (a Redis paused, replies
// lost), and so did the one at the lease's end. Before, a fresh watch got
// the old state at once, the lease ended and the grant released since
// (the fault matrix's stream finding: a grant shown held 5 s after its
// release).
func TestRedisWatchAfterTheLeaseEndReadsAgain(t *testing.T) {
	a, fail, key := releasedWhileReadsFail(t)
	fail.on.Store(false)
	c, err := a.Watch(context.Background(), key, -1)
	if err != nil || c.Held {
		t.Fatalf("a watch after the lease's end and the release: got held %v (%+v), %v; want free", c.Held, c.Info.Lease, err)
	}
}

// TestRedisWatchAfterTheLeaseEndIsNotAnsweredByAFailedRead: as above, but
// the read sent for the watcher that came after the lease's end fails
// too. It must not be answered the state from before (the fault matrix's
// stream showed a grant released 3.4 s before as held, ttl_ms 0, after a
// Redis pause and a lost reply): a failed read is no read after it came.
func TestRedisWatchAfterTheLeaseEndIsNotAnsweredByAFailedRead(t *testing.T) {
	a, _, key := releasedWhileReadsFail(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := a.Watch(ctx, key, -1)
	if err == nil && c.Held {
		t.Fatalf("a watch after the lease's end, whose read failed: got held (%+v); want ErrUnavailable, or free", c.Info.Lease)
	}
	if err != nil && !errors.Is(err, locks.ErrUnavailable) {
		t.Fatalf("a watch after the lease's end, whose read failed: got %v; want ErrUnavailable, or free", err)
	}
}

// releasedWhileReadsFail makes gateway a watch a lock held through
// gateway b with a short lease, then fails a's watch reads while b
// releases the lock: the one its hint of the release asked for, and the
// one at the lease's end, or its retry after it. It returns a, whose
// reads still fail, and the lock. The lease is 300 ms, and longer on a
// machine so busy that a's first watch, or b's release, came after it
// (CI, under load: "a's first watch: got {... Held:false ...}; want
// held", and "release lock ...: not the holder (expired)").
func releasedWhileReadsFail(t *testing.T) (*redisbackend.Backend, *failReads, locks.Key) {
	t.Helper()
	srv := redistest.Start(t)
	ctx := context.Background()
	client := newClient(t, srv)
	fail := &failReads{script: "lockgate_watch_"}
	client.AddHook(fail)
	a := openRedis(t, client, redisbackend.Options{History: 10})
	t.Cleanup(func() { a.Close() })
	b := newRedis(t, srv, redisbackend.Options{History: 10})
	var key locks.Key
	var g locks.Grant
	for _, ttl := range []time.Duration{300 * time.Millisecond, time.Second, 3 * time.Second, 10 * time.Second} {
		key = locktest.UniqueKey(t)
		g = locktest.MustAcquire(t, b, key, locks.AcquireRequest{TTL: ttl, Subject: "t"})
		c, err := a.Watch(ctx, key, -1)
		if err != nil {
			t.Fatalf("a's first watch: %v", err)
		}
		if !c.Held {
			t.Logf("a's first watch came after the %v lease's end (a busy machine): again with a longer one", ttl)
			g = locks.Grant{}
			continue
		}
		fail.failed.Store(0)
		fail.on.Store(true)
		_, err = b.Release(ctx, key, g.Token)
		if err == nil {
			break
		}
		if !errors.Is(err, locks.ErrNotHolder) {
			t.Fatal(err)
		}
		t.Logf("b's release came after the %v lease's end (a busy machine): again with a longer one", ttl)
		fail.on.Store(false)
		g = locks.Grant{}
	}
	if g.Token == "" {
		t.Fatal("a's first watch or b's release came after the lease's end, even of 10 s")
	}
	for fail.failed.Load() < 2 || !time.Now().After(g.ExpiresAt) {
		time.Sleep(10 * time.Millisecond) // polling for the failed reads
	}
	return a, fail, key
}

// failReads is a go-redis hook that fails every call of one script while
// on, as a Redis that does not answer in time does, and counts them.
type failReads struct {
	script string
	on     atomic.Bool
	failed atomic.Int64
}

func (*failReads) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*failReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (f *failReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var rest []redis.Cmder
		for _, c := range cmds {
			args := c.Args()
			if fn, _ := args[min(1, len(args)-1)].(string); f.on.Load() && strings.EqualFold(c.Name(), "fcall") && strings.HasPrefix(fn, f.script) {
				c.SetErr(errStalled)
				f.failed.Add(1)
				continue
			}
			rest = append(rest, c)
		}
		if len(rest) == 0 {
			return errStalled
		}
		return next(ctx, rest)
	}
}
