package redisbackend_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

// TestRedisValueGoesWithTheGrant: a released or expired grant leaves its
// value in no key (without a history, which keeps events on purpose), so a
// lock's value costs Redis memory only while it is held.
func TestRedisValueGoesWithTheGrant(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	r := newRedis(t, srv, redisbackend.Options{})
	ctx := context.Background()
	key, err := locks.ParseKey("test", "value-goes")
	if err != nil {
		t.Fatal(err)
	}
	value := "value-" + strings.Repeat("v", 100)
	g, err := r.Acquire(ctx, key, locks.AcquireRequest{TTL: time.Minute, Subject: "s", Value: value})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.SetValue(ctx, key, g.Token, value+"2"); err != nil {
		t.Fatal(err)
	}
	// A waiter's value waits in the queue; it leaves with the waiter.
	if _, err := r.Acquire(ctx, key, locks.AcquireRequest{TTL: time.Minute, Wait: 100 * time.Millisecond, Subject: "s", Value: value + "3"}); !errors.Is(err, locks.ErrHeld) {
		t.Fatalf("waiter: got %v, want ErrHeld", err)
	}
	if _, err := r.Release(ctx, key, g.Token); err != nil {
		t.Fatal(err)
	}
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		dump, err := c.Dump(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(dump, value) {
			t.Errorf("key %s holds the value after the grant ended", k)
		}
	}
}
