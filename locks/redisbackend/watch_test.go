package redisbackend_test

import (
	"context"
	"testing"
	"time"

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
