package redisbackend_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

// pause is a go-redis hook that, once armed, keeps the next call of one
// script waiting until let is closed, then sends it: a call that a busy
// link delays, not one that fails.
type pause struct {
	script string // the start of the function's name
	mu     sync.Mutex
	armed  bool
	caught chan struct{} // closed when the armed call is held
	let    chan struct{} // closed to send it
}

func newPause(script string) *pause {
	return &pause{script: script, caught: make(chan struct{}), let: make(chan struct{})}
}

func (p *pause) arm() {
	p.mu.Lock()
	p.armed = true
	p.mu.Unlock()
}

func (p *pause) DialHook(next redis.DialHook) redis.DialHook { return next }

func (p *pause) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		p.hold(cmd)
		return next(ctx, cmd)
	}
}

func (p *pause) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			p.hold(c)
		}
		return next(ctx, cmds)
	}
}

// hold waits for let if cmd is the armed call.
func (p *pause) hold(cmd redis.Cmder) {
	args := cmd.Args()
	if len(args) < 2 || !strings.EqualFold(cmd.Name(), "fcall") {
		return
	}
	p.mu.Lock()
	fn, _ := args[1].(string)
	mine := p.armed && strings.HasPrefix(fn, p.script)
	if mine {
		p.armed = false
	}
	p.mu.Unlock()
	if mine {
		close(p.caught)
		<-p.let
	}
}

// TestRedisSessionEndedBeforeThePickUp: a lock handed to a session's
// waiter, whose session ends before the waiter's gateway picks the grant
// up, answers the acquire that the session ended, not that the backend
// failed. The end released the handed grant, and the pick-up then found
// its token released: TestClusterSlotMigration's session acquires that
// answered 503 "fenced off: a late delivery of an acquire took nothing",
// seconds away from any migration.
func TestRedisSessionEndedBeforeThePickUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := locks.Key{Namespace: "race", Name: "lock"}
	sem := func(req locks.AcquireRequest) locks.SemaphoreRequest {
		return locks.SemaphoreRequest{AcquireRequest: req, Limit: 1}
	}
	for _, tc := range []struct {
		name, script string
		acquire      func(r *redisbackend.Backend) (locks.Grant, error)
		inSession    func(r *redisbackend.Backend, token string) (locks.Grant, error)
		release      func(r *redisbackend.Backend, token string) error
		// waiters says how many wait, and held whether anyone holds it.
		waiters func(r *redisbackend.Backend) (n int, held bool, err error)
	}{
		{"Lock", "lockgate_acquire_",
			func(r *redisbackend.Backend) (locks.Grant, error) {
				return r.Acquire(ctx, key, locks.AcquireRequest{TTL: time.Minute, Subject: "holder"})
			},
			func(r *redisbackend.Backend, token string) (locks.Grant, error) {
				return r.AcquireInSession(ctx, token, key, locks.AcquireRequest{Wait: time.Minute, Subject: "w"})
			},
			func(r *redisbackend.Backend, token string) error { _, err := r.Release(ctx, key, token); return err },
			func(r *redisbackend.Backend) (int, bool, error) {
				info, err := r.Inspect(ctx, key)
				if errors.Is(err, locks.ErrNotHeld) {
					return 0, false, nil
				}
				return info.Waiters, true, err
			}},
		{"Permit", "lockgate_sem_acquire_",
			func(r *redisbackend.Backend) (locks.Grant, error) {
				return r.AcquirePermit(ctx, key, sem(locks.AcquireRequest{TTL: time.Minute, Subject: "holder"}))
			},
			func(r *redisbackend.Backend, token string) (locks.Grant, error) {
				return r.AcquirePermitInSession(ctx, token, key, sem(locks.AcquireRequest{Wait: time.Minute, Subject: "w"}))
			},
			func(r *redisbackend.Backend, token string) error {
				_, err := r.ReleasePermit(ctx, key, token)
				return err
			},
			func(r *redisbackend.Backend) (int, bool, error) {
				info, err := r.InspectSemaphore(ctx, key)
				if errors.Is(err, locks.ErrNotHeld) {
					return 0, false, nil
				}
				return info.Waiters, len(info.Holders) > 0, err
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t)
			holder := newRedis(t, srv, redisbackend.Options{})
			client := newClient(t, srv)
			hook := newPause(tc.script)
			client.AddHook(hook)
			waiter := openRedis(t, client, redisbackend.Options{})
			t.Cleanup(func() { waiter.Close() })

			g, err := tc.acquire(holder)
			if err != nil {
				t.Fatal(err)
			}
			s, err := waiter.OpenSession(ctx, "w", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() {
				_, err := tc.inSession(waiter, s.Token)
				got <- err
			}()
			for {
				n, _, err := tc.waiters(holder)
				if err != nil {
					t.Fatal(err)
				}
				if n == 1 {
					break
				}
				select {
				case err := <-got:
					t.Fatalf("the acquire in the session ended before it waited: %v", err)
				case <-time.After(5 * time.Millisecond):
				}
			}
			// The release hands the grant to the waiter, on another
			// gateway: its pick-up is held back until the session has ended.
			hook.arm()
			if err := tc.release(holder, g.Token); err != nil {
				t.Fatal(err)
			}
			<-hook.caught
			if _, err := waiter.EndSession(ctx, s.Token, "w"); err != nil {
				t.Fatalf("end the session: %v", err)
			}
			close(hook.let)
			if err := <-got; !errors.Is(err, locks.ErrSessionEnded) {
				t.Errorf("the acquire whose session ended before it picked up its grant: got %v, want ErrSessionEnded", err)
			}
			if _, held, err := tc.waiters(holder); err != nil || held {
				t.Errorf("after the session's end: held %v (%v), want free", held, err)
			}
		})
	}
}
