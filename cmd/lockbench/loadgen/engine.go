package loadgen

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

// FloorPrefix keeps the floor's keys and wake-up channel apart from the
// gateway's: same Redis, same scripts, but its releases do not wake the
// gateway's subscription and the other way round.
const FloorPrefix = "lockbench:"

// EngineTarget calls the lock engine in-process against Redis, with the
// client settings the gateway uses: the floor under any HTTP gateway.
type EngineTarget struct {
	client    *redis.Client
	backend   *redisbackend.Backend
	namespace string
	ttl       time.Duration
	// Permits, when not 0, makes every lock name a semaphore of that many
	// permits (AcquirePermit, ReleasePermit) instead of a lock.
	Permits int
}

// NewEngineTarget connects the engine to the Redis at redisURL.
func NewEngineTarget(redisURL, namespace string, ttl time.Duration) (*EngineTarget, error) {
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		// Not err: it may quote the URL, password included.
		return nil, errors.New("invalid --redis-url: want redis://[[user]:password@]host[:port][/db]")
	}
	// As cmd/gateway/app does: never re-run a script unseen, and let the
	// engine's deadline bound the network wait.
	opts.MaxRetries = -1
	opts.ContextTimeoutEnabled = true
	client := redis.NewClient(opts)
	backend, err := redisbackend.New(client, redisbackend.Options{Prefix: FloorPrefix})
	if err != nil {
		client.Close()
		return nil, err
	}
	return &EngineTarget{
		client:    client,
		backend:   backend,
		namespace: namespace,
		ttl:       ttl,
	}, nil
}

// Close closes the engine and its Redis connections.
func (t *EngineTarget) Close() error {
	return errors.Join(t.backend.Close(), t.client.Close())
}

// NewSession implements Target.
func (t *EngineTarget) NewSession(ctx context.Context, name string) Session {
	return &engineSession{
		ctx:     ctx,
		backend: t.backend,
		key:     locks.Key{Namespace: t.namespace, Name: name},
		req:     locks.AcquireRequest{TTL: t.ttl, Subject: "lockbench", Owner: "lockbench"},
		permits: t.Permits,
	}
}

type engineSession struct {
	ctx     context.Context
	backend *redisbackend.Backend
	key     locks.Key
	req     locks.AcquireRequest
	permits int
}

func (s *engineSession) Acquire(wait time.Duration) (string, int64, error) {
	s.req.Wait = wait
	var g locks.Grant
	var err error
	if s.permits > 0 {
		g, err = s.backend.AcquirePermit(s.ctx, s.key, locks.SemaphoreRequest{AcquireRequest: s.req, Limit: s.permits})
	} else {
		g, err = s.backend.Acquire(s.ctx, s.key, s.req)
	}
	if err != nil {
		return "", 0, engineError(err)
	}
	return g.Token, g.FencingToken, nil
}

func (s *engineSession) Release(token string) error {
	var err error
	if s.permits > 0 {
		_, err = s.backend.ReleasePermit(s.ctx, s.key, token)
	} else {
		_, err = s.backend.Release(s.ctx, s.key, token)
	}
	if err != nil {
		return engineError(err)
	}
	return nil
}

// engineClasses are the problem codes the gateway would answer engine
// errors with, by their code (locks.ErrorCode), so that both paths count
// errors alike; any other code is "error".
var engineClasses = map[locks.Code]string{
	locks.CodeHeld:        "lock_held",
	locks.CodeFull:        "lock_held",
	locks.CodeNotHolder:   "not_holder",
	locks.CodeUnavailable: "backend_unavailable",
	locks.CodeInvalid:     "invalid_request",
	locks.CodeCancelled:   "cancelled",
}

// engineError classes an engine error as the gateway would.
func engineError(err error) error {
	class, ok := engineClasses[locks.ErrorCode(err)]
	if !ok {
		class = "error"
	}
	return &CallError{Class: class, Err: fmt.Errorf("engine: %w", err)}
}
