package redisbackend_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/locktest"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

// semIndexOf is the index InspectSemaphore answers, held or not.
func semIndexOf(t *testing.T, r *redisbackend.Backend, key locks.Key) int64 {
	t.Helper()
	info, err := r.InspectSemaphore(t.Context(), key)
	var nh *locks.NotHeldError
	switch {
	case err == nil:
		return info.Index
	case errors.As(err, &nh):
		return nh.Index
	}
	t.Fatalf("inspect semaphore: %v", err)
	return 0
}

// TestRedisSemaphoreIndexOutlivesItsRecord: a semaphore whose record was
// lost (Redis restarted empty, the keys evicted) answers index 0, and its
// next change starts the index again from the clock, above every index
// it had: never a repeat (lua/semlib.lua). And the record outlives the
// last lease by the fence retention, the index's promise over an idle
// semaphore.
func TestRedisSemaphoreIndexOutlivesItsRecord(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	r := newRedis(t, srv, redisbackend.Options{FenceRetention: time.Hour})
	client := newClient(t, srv)
	ctx := t.Context()
	key := locks.Key{Namespace: "semindex", Name: "lost"}
	holders := "lockgate:sem:{semindex/lost}"

	var last int64
	for range 3 {
		g := locktest.MustAcquirePermit(t, r, key, locks.SemaphoreRequest{AcquireRequest: locks.AcquireRequest{TTL: time.Minute, Subject: "test"}, Limit: 2})
		if _, err := r.ReleasePermit(ctx, key, g.Token); err != nil {
			t.Fatalf("release: %v", err)
		}
		last = semIndexOf(t, r, key)
	}
	// Idle: the record lives the retention after the last lease's end.
	if ttl := client.PTTL(ctx, holders).Val(); ttl < time.Hour {
		t.Fatalf("an idle semaphore's record: got PTTL %v, want at least the fence retention (1h) more", ttl)
	}

	if err := client.Del(ctx, holders, holders+":leases").Err(); err != nil {
		t.Fatal(err)
	}
	if i := semIndexOf(t, r, key); i != 0 {
		t.Fatalf("a semaphore whose record was lost: got index %d, want 0", i)
	}
	locktest.MustAcquirePermit(t, r, key, locks.SemaphoreRequest{AcquireRequest: locks.AcquireRequest{TTL: time.Minute, Subject: "test"}, Limit: 2})
	if i := semIndexOf(t, r, key); i <= last {
		t.Fatalf("the first change after the record was lost: got index %d, want above %d, the last before", i, last)
	}
}

// TestRedisSemaphoreRejoinMovesNoIndex: a waiter's acquire that Redis gets
// again while the waiter is still queued (its gateway sent it again: a
// reply lost, a replica's acknowledgement late) changes nothing a GET
// shows, so it does not move the index either. CI saw a watch from the
// index a GET had just answered find the next one ("watch semaphore from
// -1: got index …137 …; want index …136 as inspect says", with
// --redis-min-replicas): a waiter's acquire delivered again.
func TestRedisSemaphoreRejoinMovesNoIndex(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	r := newRedis(t, srv, redisbackend.Options{})
	key := locktest.UniqueKey(t)
	ctx := t.Context()
	if _, err := r.AcquirePermit(ctx, key, locks.SemaphoreRequest{AcquireRequest: locks.AcquireRequest{TTL: time.Minute, Subject: "holder"}, Limit: 1}); err != nil {
		t.Fatal(err)
	}
	token, err := r.QueuePermitGhost(ctx, key, 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	queued := semIndexOf(t, r, key)
	if err := r.PickUpPermit(ctx, key, token, 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := semIndexOf(t, r, key); got != queued {
		t.Fatalf("the waiter's acquire again, still queued: index %d, want %d as before", got, queued)
	}
}
