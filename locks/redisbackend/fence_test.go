package redisbackend_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/locktest"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

// TestRedisFencingSurvivesCounterGoingBack: the fencing counter is behind
// the tokens already handed out, as on a replica promoted before it got the
// last grants, or after a restart from stale persistence. The next token is
// still larger than every one before. With a history the counter shares
// the name record with the events (lua/lib_fence.lua), and a counter alone,
// as a gateway without one writes it, reads as well.
func TestRedisFencingSurvivesCounterGoingBack(t *testing.T) {
	t.Parallel()
	forHistories(t, testFencingSurvivesCounterGoingBack)
}

func testFencingSurvivesCounterGoingBack(t *testing.T, history int) {
	srv := redistest.Start(t)
	l := newRedis(t, srv, redisbackend.Options{History: history})
	admin := srv.Client(t)
	key := locktest.UniqueKey(t)
	fenceKey := "lockgate:{" + key.String() + "}:fence"
	var last int64
	for round := range 3 {
		g := locktest.MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute})
		if g.FencingToken <= last {
			t.Fatalf("round %d: got fencing token %d, want more than %d", round, g.FencingToken, last)
		}
		last = g.FencingToken
		if _, err := l.Release(t.Context(), key, g.Token); err != nil {
			t.Fatal(err)
		}
		// The counter as a stale copy has it: far behind.
		if err := admin.Set(t.Context(), fenceKey, g.FencingToken-1000, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRedisFencingCounterAheadOfClock: the counter is ahead of the Redis
// clock, as after the clock stepped back, or many grants within one
// microsecond. Each token is the counter plus one, and the counter keeps
// its expiry.
func TestRedisFencingCounterAheadOfClock(t *testing.T) {
	t.Parallel()
	forHistories(t, testFencingCounterAheadOfClock)
}

func testFencingCounterAheadOfClock(t *testing.T, history int) {
	srv := redistest.Start(t)
	l := newRedis(t, srv, redisbackend.Options{History: history})
	admin := srv.Client(t)
	key := locktest.UniqueKey(t)
	fenceKey := "lockgate:{" + key.String() + "}:fence"
	ahead := time.Now().Add(time.Hour).UnixMicro()
	if err := admin.Set(t.Context(), fenceKey, ahead, 0).Err(); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		g := locktest.MustAcquire(t, l, key, locks.AcquireRequest{TTL: time.Minute})
		if want := ahead + int64(round) + 1; g.FencingToken != want {
			t.Fatalf("round %d: got fencing token %d, want %d (the counter plus one)", round, g.FencingToken, want)
		}
		if ttl := admin.PTTL(t.Context(), fenceKey).Val(); ttl <= 0 {
			t.Fatalf("round %d: the counter's PTTL is %v, want the retention", round, ttl)
		}
		if _, err := l.Release(t.Context(), key, g.Token); err != nil {
			t.Fatal(err)
		}
	}
}

// forHistories runs test without a history and with one: the fencing
// counter alone, and in a name record with the events.
func forHistories(t *testing.T, test func(t *testing.T, history int)) {
	for _, history := range []int{0, 10} {
		t.Run(fmt.Sprintf("history=%d", history), func(t *testing.T) { test(t, history) })
	}
}
