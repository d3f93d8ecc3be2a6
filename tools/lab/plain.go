package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/cmd/lockbench/loadgen"
)

// plainTarget is the plainest Redis lock there is, called in-process: SET
// NX PX to take it, a compare-and-delete script to release it. No queue,
// no fencing token, no record, no history. It is the yardstick for what
// the lock scripts cost Redis per cycle, and
// runs uncontended only: it cannot wait.
type plainTarget struct {
	client    *redis.Client
	namespace string
	ttl       time.Duration
}

// compareAndDelete releases a plain lock if the token still holds it.
var compareAndDelete = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

func newPlainTarget(redisURL, namespace string, ttl time.Duration) (*plainTarget, error) {
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return nil, errors.New("invalid --redis-url: want redis://[[user]:password@]host[:port][/db]")
	}
	opts.MaxRetries = -1
	return &plainTarget{client: redis.NewClient(opts), namespace: namespace, ttl: ttl}, nil
}

func (t *plainTarget) close() error { return t.client.Close() }

func (t *plainTarget) NewSession(ctx context.Context, name string) loadgen.Session {
	return &plainSession{ctx: ctx, t: t, key: plainKey(t.namespace, name)}
}

type plainSession struct {
	ctx context.Context
	t   *plainTarget
	key string
}

func (s *plainSession) Acquire(time.Duration) (string, int64, error) {
	token, ok, err := plainLock{s.t.client}.acquire(s.ctx, s.key, s.t.ttl)
	if err != nil {
		return "", 0, &loadgen.CallError{Class: "error", Err: fmt.Errorf("plain: %w", err)}
	}
	if !ok {
		return "", 0, &loadgen.CallError{Class: "lock_held", Err: errors.New("plain: held")}
	}
	return token, 0, nil
}

func (s *plainSession) Release(token string) error {
	ok, err := plainLock{s.t.client}.release(s.ctx, s.key, token)
	if err != nil {
		return &loadgen.CallError{Class: "error", Err: fmt.Errorf("plain: %w", err)}
	}
	if !ok {
		return &loadgen.CallError{Class: "not_holder", Err: errors.New("plain: not the holder")}
	}
	return nil
}

// plainLock is the plain lock's two calls: the plain target makes them in
// the lab's process, the redis-ceiling behind the ceiling's HTTP.
type plainLock struct{ client *redis.Client }

// plainKey is the Redis key of the plain lock name in namespace.
func plainKey(namespace, name string) string {
	return loadgen.FloorPrefix + "plain:{" + namespace + "/" + name + "}"
}

// acquire sets key to a fresh random token for ttl unless it is set; ok
// is false when someone holds it.
func (l plainLock) acquire(ctx context.Context, key string, ttl time.Duration) (token string, ok bool, err error) {
	b := make([]byte, 16)
	rand.Read(b)
	token = hex.EncodeToString(b)
	ok, err = l.client.SetNX(ctx, key, token, ttl).Result()
	return token, ok, err
}

// release deletes key if token holds it; ok is false when it does not.
func (l plainLock) release(ctx context.Context, key, token string) (ok bool, err error) {
	n, err := compareAndDelete.Run(ctx, l.client, []string{key}, token).Int()
	return n == 1, err
}
