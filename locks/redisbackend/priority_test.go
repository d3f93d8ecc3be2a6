package redisbackend_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/locktest"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

// TestRedisPriorityAfterOldArrivals: the queue that the scripts of the
// release before write, whose arrival numbers count from 1 in '#seq'
// (HINCRBY), and the one these write, scored by the Redis clock in ms less
// a priority's head start, mix during a rolling upgrade. The old numbers
// rank first, as the older arrivals they are, a priority-9 waiter after
// them; and an old script's HINCRBY of '#seq' carries on from the clock's
// number, above every arrival drawn so far.
func TestRedisPriorityAfterOldArrivals(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	client := newClient(t, srv)
	r := newRedis(t, srv, redisbackend.Options{})
	ctx := context.Background()
	key := locktest.UniqueKey(t)
	lock := "lockgate:{" + key.Namespace + "/" + key.Name + "}"
	holder := locktest.MustAcquire(t, r, key, locks.AcquireRequest{TTL: time.Minute})
	old := locktest.QueueInOrder(t, key, r, r)
	ids, err := client.ZRange(ctx, lock+":queue", 0, -1).Result()
	if err != nil || len(ids) != 2 {
		t.Fatalf("queue: got %v, %v; want two waiters", ids, err)
	}
	// As the old acquire.lua drew their numbers.
	for i, id := range ids {
		if err := client.Do(ctx, "ZADD", lock+":queue", "XX", i+1, id).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := client.HSet(ctx, lock+":waiters", "#seq", 2).Err(); err != nil {
		t.Fatal(err)
	}
	nine := locktest.AcquireAsync(ctx, r, key, locks.AcquireRequest{TTL: time.Minute, Wait: 30 * time.Second, Owner: "9", Priority: 9})
	locktest.WaitUntilQueued(t, r, key, 3)
	drawn, err := client.HGet(ctx, lock+":waiters", "#seq").Int64()
	if err != nil || drawn < time.Now().Add(-time.Hour).UnixMilli() {
		t.Fatalf("'#seq' after a new arrival: got %d, %v; want the Redis clock in ms", drawn, err)
	}
	if next, err := client.HIncrBy(ctx, lock+":waiters", "#seq", 1).Result(); err != nil || next != drawn+1 {
		t.Fatalf("an old script's HINCRBY of '#seq': got %d, %v; want %d", next, err, drawn+1)
	}
	info, err := r.Inspect(ctx, key)
	if want := []int{0, 0, 9}; err != nil || len(info.QueuePriorities) != 3 || info.QueuePriorities[2] != 9 {
		t.Fatalf("got queue priorities %v, %v; want %v", info.QueuePriorities, err, want)
	}
	if _, err := r.Release(ctx, key, holder.Token); err != nil {
		t.Fatal(err)
	}
	for i, w := range append(old, nine) {
		res := <-w
		if res.Err != nil {
			t.Fatalf("waiter %d: %v", i, res.Err)
		}
		info, err := r.Inspect(ctx, key)
		if want := strconv.Itoa(i); i == 2 {
			want = "9"
			if err != nil || info.Owner != want {
				t.Fatalf("third grant: got %+v, %v; want the priority-9 waiter's", info, err)
			}
		} else if err != nil || info.Owner != want {
			t.Fatalf("grant %d: got %+v, %v; want the old arrival %s's", i, info, err, want)
		}
		if _, err := r.Release(ctx, key, res.Grant.Token); err != nil {
			t.Fatal(err)
		}
	}
}
