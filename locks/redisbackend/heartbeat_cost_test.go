package redisbackend_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/locktest"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

// What one heartbeat costs Redis does not grow with the waiters it keeps
// alive: a gateway sends one for all its waiters on a lock, and hundreds
// of them on one contended lock would otherwise make it the longest script
// that lock runs (see TestRedisCycleCommands for why commands are what is
// counted).
func TestRedisHeartbeatCommands(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client(t)
	for _, semaphore := range []bool{false, true} {
		t.Run(kindName(semaphore), func(t *testing.T) {
			l := newRedis(t, srv, redisbackend.Options{})
			var small map[string]int
			for _, n := range []int{4, 64} {
				key := locktest.UniqueKey(t)
				key.Name += fmt.Sprint("-", n)
				ids := queueUnserved(t, l, key, semaphore, n)
				// The first heartbeat loads the function, and takes the
				// waiters' alive times from their own lease to l's.
				if wake := l.Heartbeat(t.Context(), key, semaphore, ids); len(wake) != 0 {
					t.Fatalf("a heartbeat of %d queued waiters wakes %d of them, want none", n, len(wake))
				}
				if err := admin.ConfigResetStat(t.Context()).Err(); err != nil {
					t.Fatal(err)
				}
				if wake := l.Heartbeat(t.Context(), key, semaphore, ids); len(wake) != 0 {
					t.Fatalf("a heartbeat of %d queued waiters wakes %d of them, want none", n, len(wake))
				}
				got := commandCounts(t, admin)
				if small == nil {
					small = got
				} else if !maps.Equal(got, small) {
					t.Errorf("commands of one heartbeat of %d waiters: got %s (%d), want those of 4 waiters: %s (%d)",
						n, formatCounts(got), sumCounts(got), formatCounts(small), sumCounts(small))
				}
			}
		})
	}
}

// TestRedisHeartbeatManyWaiters: a heartbeat of more waiters than the
// scripts take in one command (lua/lib_queue.lua) keeps alive every one
// still queued, wherever it is in the list, and names every other.
func TestRedisHeartbeatManyWaiters(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client(t)
	for _, semaphore := range []bool{false, true} {
		t.Run(kindName(semaphore), func(t *testing.T) {
			l := newRedis(t, srv, redisbackend.Options{WaiterLease: 3 * time.Second})
			key := locktest.UniqueKey(t)
			queued := queueUnserved(t, l, key, semaphore, 5)
			alive := "lockgate:{" + key.String() + "}:alive"
			if semaphore {
				alive = "lockgate:sem:{" + key.String() + "}:alive"
			}
			// Around the ends of the first chunks, and at the end.
			ids := make([]string, 1200)
			var gone []string
			for i := range ids {
				ids[i] = fmt.Sprint("gone-", i)
			}
			for i, at := range []int{0, 499, 500, 1001, 1199} {
				ids[at] = queued[i]
			}
			for _, id := range ids {
				if !slices.Contains(queued, id) {
					gone = append(gone, id)
				}
			}
			before, err := admin.Time(t.Context()).Result()
			if err != nil {
				t.Fatal(err)
			}
			if wake := l.Heartbeat(t.Context(), key, semaphore, ids); !slices.Equal(wake, gone) {
				t.Fatalf("a heartbeat of %d ids, %d of them queued, wakes %d, want the %d others", len(ids), len(queued), len(wake), len(gone))
			}
			after, err := admin.Time(t.Context()).Result()
			if err != nil {
				t.Fatal(err)
			}
			// Queued for a minute, each is now alive for l's lease.
			for _, id := range queued {
				score, err := admin.ZScore(t.Context(), alive, id).Result()
				if err != nil {
					t.Fatal(err)
				}
				if low, high := before.UnixMilli()+3000, after.UnixMilli()+3000; int64(score) < low || int64(score) > high {
					t.Errorf("waiter %s alive until %d, want %d to %d", id, int64(score), low, high)
				}
			}
		})
	}
}

func kindName(semaphore bool) string {
	if semaphore {
		return "semaphore"
	}
	return "lock"
}

// queueUnserved holds key's lock, or its semaphore's one permit, with l and
// queues n waiters for it that nobody serves, queued for a minute, and
// returns their ids.
func queueUnserved(t *testing.T, l *redisbackend.Backend, key locks.Key, semaphore bool, n int) []string {
	t.Helper()
	req := locks.AcquireRequest{TTL: time.Minute}
	limit := 0
	if semaphore {
		limit = 1
		if _, err := l.AcquirePermit(t.Context(), key, locks.SemaphoreRequest{AcquireRequest: req, Limit: limit}); err != nil {
			t.Fatal(err)
		}
	} else {
		locktest.MustAcquire(t, l, key, req)
	}
	ids := make([]string, n)
	for i := range ids {
		id, _, err := l.QueueUnserved(t.Context(), key, limit)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}
