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

// TestRedisHistoryCutKeepsTheRecordSmall: a history keeps its last
// events cut after cut without decoding them (lua/lib_history.lua
// push_events), and its name record stays as small as the 2N events it may
// hold, also when the record came from a gateway that kept no cut (its
// count alone): the first cut decodes, the next ones do not.
func TestRedisHistoryCutKeepsTheRecordSmall(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client(t)
	ctx := context.Background()
	const n = 10
	r := newRedis(t, srv, redisbackend.Options{History: n})
	key := locktest.UniqueKey(t)
	record := "lockgate:{" + key.Namespace + "/" + key.Name + "}:fence"
	g := locktest.MustAcquire(t, r, key, locks.AcquireRequest{TTL: time.Minute})

	// renew adds count renewals, and checks the history's newest n.
	renew := func(count int) {
		t.Helper()
		for range count {
			if _, err := r.Renew(ctx, key, g.Token, 0); err != nil {
				t.Fatal(err)
			}
		}
		evs, err := r.History(ctx, key)
		if err != nil || len(evs) != n || evs[0].Kind != "renewed" || evs[n-1].Index != evs[0].Index-(n-1) {
			t.Fatalf("history after renewals: %d events, %v; want the newest %d, renewals", len(evs), err, n)
		}
	}
	// size is the record's length, and its bound: a header and 2n events
	// of this lock (each the size of the newest, a renewal, or less).
	size := func() (int64, int64) {
		t.Helper()
		one := admin.Eval(ctx, `return #cmsgpack.pack(({cmsgpack.unpack_limit(redis.call('GET', KEYS[1]), 7, 0)})[8])`, []string{record}).Val().(int64)
		return admin.StrLen(ctx, record).Val(), 60 + 2*n*one
	}

	renew(10 * n)
	if got, bound := size(); got > bound {
		t.Fatalf("after %d events the record is %d bytes, want at most %d", 10*n+1, got, bound)
	}
	// As an older gateway writes it: the count alone, no cut known.
	if err := admin.Eval(ctx, `
local v = redis.call('GET', KEYS[1])
local off, a, b, c, d, counts, f = cmsgpack.unpack_limit(v, 6, 0)
redis.call('SET', KEYS[1], cmsgpack.pack(a, b, c, d, counts % 4096, f) .. string.sub(v, off + 1), 'KEEPTTL')
return 1`, []string{record}).Err(); err != nil {
		t.Fatal(err)
	}
	renew(1)
	renew(10 * n)
	if got, bound := size(); got > bound {
		t.Fatalf("after a record an older gateway wrote and %d events more, the record is %d bytes, want at most %d", 10*n+1, got, bound)
	}
	if _, err := r.Release(ctx, key, g.Token); err != nil {
		t.Fatal(err)
	}
}
