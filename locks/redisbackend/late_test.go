package redisbackend_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/redisbackend"
)

// holdBack is a go-redis hook that keeps the next call of one script from
// Redis, answers its caller with a timeout, as a connection that stalls
// does, and delivers it only when told: a command that a proxy or a
// congested link holds, which arrives after its caller gave up.
type holdBack struct {
	script string // the start of the function's name, "lockgate_renew_"
	// copy lets the armed call through, and keeps a copy to deliver
	// again: a call that a proxy sent twice, the second time late.
	copy  bool
	mu    sync.Mutex
	armed bool
	held  []any // the held call's arguments
}

// arm makes the next call of the script the one held back.
func (h *holdBack) arm() {
	h.mu.Lock()
	h.armed = true
	h.mu.Unlock()
}

func (h *holdBack) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdBack) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.take(cmd) {
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}

func (h *holdBack) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var rest []redis.Cmder
		for _, c := range cmds {
			if !h.take(c) {
				rest = append(rest, c)
			}
		}
		if len(rest) == 0 {
			return errStalled
		}
		return next(ctx, rest)
	}
}

var errStalled = errors.New("i/o timeout (held back by the test)")

// take holds cmd back if it is the armed call.
func (h *holdBack) take(cmd redis.Cmder) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	args := cmd.Args()
	if !h.armed || len(args) < 2 || !strings.EqualFold(cmd.Name(), "fcall") {
		return false
	}
	if fn, _ := args[1].(string); !strings.HasPrefix(fn, h.script) {
		return false
	}
	h.armed, h.held = false, args
	if h.copy {
		return false
	}
	cmd.SetErr(errStalled)
	return true
}

// deliver sends the held call to Redis now, on client.
func (h *holdBack) deliver(t *testing.T, client *redis.Client) {
	t.Helper()
	h.mu.Lock()
	args := h.held
	h.mu.Unlock()
	if args == nil {
		t.Fatal("no call was held back")
	}
	if err := client.Do(context.Background(), args...).Err(); err != nil {
		t.Fatalf("deliver the held call: %v", err)
	}
}

// TestRedisLateRenewShortensNothing: a renew whose caller was told its
// outcome is unknown, and which reaches Redis only after a later renew of
// the same grant was answered, must not cut that answered lease short
// (#36, finding 5: a lock renewed for 949 ms had 530 ms left moments
// later, and the history said nothing).
func TestRedisLateRenewShortensNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, script, key string
		acquire           func(r *redisbackend.Backend, key locks.Key) (locks.Grant, error)
		renew             func(r *redisbackend.Backend, key locks.Key, token string, ttl time.Duration) (locks.Lease, error)
	}{
		{"Lock", "lockgate_renew_", "lockgate:{late/lock}",
			func(r *redisbackend.Backend, key locks.Key) (locks.Grant, error) {
				return r.Acquire(context.Background(), key, locks.AcquireRequest{TTL: 10 * time.Second, Subject: "t"})
			},
			func(r *redisbackend.Backend, key locks.Key, token string, ttl time.Duration) (locks.Lease, error) {
				return r.Renew(context.Background(), key, token, ttl)
			}},
		{"Permit", "lockgate_sem_renew_", "",
			func(r *redisbackend.Backend, key locks.Key) (locks.Grant, error) {
				return r.AcquirePermit(context.Background(), key, locks.SemaphoreRequest{
					AcquireRequest: locks.AcquireRequest{TTL: 10 * time.Second, Subject: "t"}, Limit: 2})
			},
			func(r *redisbackend.Backend, key locks.Key, token string, ttl time.Duration) (locks.Lease, error) {
				return r.RenewPermit(context.Background(), key, token, ttl)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			client := newClient(t, srv)
			hook := &holdBack{script: tc.script}
			client.AddHook(hook)
			r := openRedis(t, client, redisbackend.Options{})
			t.Cleanup(func() { r.Close() })
			key := locks.Key{Namespace: "late", Name: "lock"}
			g, err := tc.acquire(r, key)
			if err != nil {
				t.Fatal(err)
			}
			hook.arm()
			// Its answer is lost; what it answers is the gateway's to decide.
			if _, err := tc.renew(r, key, g.Token, 2*time.Second); err != nil && !errors.Is(err, locks.ErrUnavailable) {
				t.Fatalf("the held renew: got %v, want a lease or ErrUnavailable", err)
			}
			l, err := tc.renew(r, key, g.Token, time.Minute)
			if err != nil {
				t.Fatalf("the renew after it: %v", err)
			}
			hook.deliver(t, newClient(t, srv))
			// What is left of the lease in Redis: the lock's key, or the
			// permit's score among the semaphore's leases.
			admin := newClient(t, srv)
			var left time.Duration
			if tc.key != "" {
				left = admin.PTTL(context.Background(), tc.key).Val()
			} else {
				end := admin.ZScore(context.Background(), "lockgate:sem:{late/lock}:leases", locks.TokenHash(g.Token)).Val()
				now := admin.Time(context.Background()).Val()
				left = time.UnixMilli(int64(end)).Sub(now)
			}
			if end := time.Now().Add(left + time.Millisecond); l.ExpiresAt.After(end) {
				t.Fatalf("a renew answered until %v; after a late renew, Redis holds it until %v at the latest: %v short",
					l.ExpiresAt.Format("15:04:05.000"), end.Format("15:04:05.000"), l.ExpiresAt.Sub(end))
			}
		})
	}
}

// TestRedisLateAcquireTakesNothing: an acquire whose caller was told its
// outcome is unknown, and which reaches Redis only after the gateway gave
// its token up, takes nothing, whether it waits or not: nobody would ever
// release what it took. No call record says so (an acquire keeps none,
// lua.Script.Keyed): its token's record does, written by the give-up.
func TestRedisLateAcquireTakesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, script, queue string
		wait                time.Duration
		acquire             func(r *redisbackend.Backend, key locks.Key, wait time.Duration) error
		held                func(r *redisbackend.Backend, key locks.Key) bool
	}{
		{"Lock/NoWait", "lockgate_acquire_", "lockgate:{late/lock}:queue", 0, lateLock, lockHeld},
		{"Lock/Waiting", "lockgate_acquire_", "lockgate:{late/lock}:queue", time.Minute, lateLock, lockHeld},
		{"Permit/NoWait", "lockgate_sem_acquire_", "lockgate:sem:{late/lock}:queue", 0, latePermit, permitHeld},
		{"Permit/Waiting", "lockgate_sem_acquire_", "lockgate:sem:{late/lock}:queue", time.Minute, latePermit, permitHeld},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			client := newClient(t, srv)
			hook := &holdBack{script: tc.script}
			client.AddHook(hook)
			r := openRedis(t, client, redisbackend.Options{})
			key := locks.Key{Namespace: "late", Name: "lock"}
			// Loads the functions, so that the held call names one Redis has.
			if err := r.LoadFunctions(context.Background()); err != nil {
				t.Fatal(err)
			}
			hook.arm()
			if err := tc.acquire(r, key, tc.wait); !errors.Is(err, locks.ErrUnavailable) {
				t.Fatalf("the held acquire: got %v; want ErrUnavailable", err)
			}
			r.Close() // waits for the give-up that the unknown outcome started
			hook.deliver(t, newClient(t, srv))
			if tc.held(newRedis(t, srv, redisbackend.Options{}), key) {
				t.Fatalf("after the late acquire: held, want free")
			}
			if n := newClient(t, srv).ZCard(context.Background(), tc.queue).Val(); n != 0 {
				t.Fatalf("after the late acquire: %d waiters queued, want none", n)
			}
		})
	}
}

// TestRedisLateCopyOfAGrantTakesNothing: an acquire that waits, granted
// at once, and delivered again after its lease ended (a proxy that sent it
// twice, the second time late) takes nothing and queues nothing. Its
// token's record says that this very call was granted ('h', handed, and
// its call id): only a waiter whose grant a hand-off made, and which has
// not picked it up, goes on waiting with that record. Before, the copy
// joined the queue as a waiter nobody waits for, and got the lock.
func TestRedisLateCopyOfAGrantTakesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, script, queue string
		acquire             func(r *redisbackend.Backend, key locks.Key, ttl, wait time.Duration) error
		held                func(r *redisbackend.Backend, key locks.Key) bool
	}{
		{"Lock", "lockgate_acquire_", "lockgate:{late/lock}:queue", acquireLock, lockHeld},
		{"Permit", "lockgate_sem_acquire_", "lockgate:sem:{late/lock}:queue", acquirePermit, permitHeld},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			client := newClient(t, srv)
			hook := &holdBack{script: tc.script, copy: true}
			client.AddHook(hook)
			r := openRedis(t, client, redisbackend.Options{})
			t.Cleanup(func() { r.Close() })
			key := locks.Key{Namespace: "late", Name: "lock"}
			if err := r.LoadFunctions(context.Background()); err != nil {
				t.Fatal(err)
			}
			hook.arm()
			if err := tc.acquire(r, key, 100*time.Millisecond, time.Minute); err != nil {
				t.Fatalf("the acquire: %v", err)
			}
			for tc.held(r, key) { // its lease ends, unreleased
				time.Sleep(10 * time.Millisecond)
			}
			hook.deliver(t, newClient(t, srv))
			if tc.held(r, key) {
				t.Fatalf("after the late copy: held, want free")
			}
			if n := newClient(t, srv).ZCard(context.Background(), tc.queue).Val(); n != 0 {
				t.Fatalf("after the late copy: %d waiters queued, want none", n)
			}
		})
	}
}

func acquireLock(r *redisbackend.Backend, key locks.Key, ttl, wait time.Duration) error {
	_, err := r.Acquire(context.Background(), key, locks.AcquireRequest{TTL: ttl, Subject: "t", Wait: wait})
	return err
}

func acquirePermit(r *redisbackend.Backend, key locks.Key, ttl, wait time.Duration) error {
	_, err := r.AcquirePermit(context.Background(), key, locks.SemaphoreRequest{
		AcquireRequest: locks.AcquireRequest{TTL: ttl, Subject: "t", Wait: wait}, Limit: 1})
	return err
}

func lateLock(r *redisbackend.Backend, key locks.Key, wait time.Duration) error {
	_, err := r.Acquire(context.Background(), key, locks.AcquireRequest{TTL: time.Minute, Subject: "t", Wait: wait})
	return err
}

func latePermit(r *redisbackend.Backend, key locks.Key, wait time.Duration) error {
	_, err := r.AcquirePermit(context.Background(), key, locks.SemaphoreRequest{
		AcquireRequest: locks.AcquireRequest{TTL: time.Minute, Subject: "t", Wait: wait}, Limit: 1})
	return err
}

func lockHeld(r *redisbackend.Backend, key locks.Key) bool {
	_, err := r.Inspect(context.Background(), key)
	return !errors.Is(err, locks.ErrNotHeld)
}

func permitHeld(r *redisbackend.Backend, key locks.Key) bool {
	info, err := r.InspectSemaphore(context.Background(), key)
	return err == nil && len(info.Holders) > 0
}

// loseReply is a go-redis hook that sends the next call of one script to
// Redis, which runs it, and answers its caller with a timeout: a reply
// lost on the way back.
type loseReply struct {
	script string
	mu     sync.Mutex
	armed  bool
}

func (h *loseReply) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *loseReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *loseReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, c := range cmds {
			args := c.Args()
			if !h.armed || len(args) < 2 || !strings.EqualFold(c.Name(), "fcall") {
				continue
			}
			if fn, _ := args[1].(string); strings.HasPrefix(fn, h.script) && c.Err() == nil {
				h.armed = false
				c.SetErr(errStalled)
			}
		}
		return err
	}
}

// TestRedisLostGrantIsGivenBack: an acquire that Redis ran, but whose reply
// was lost, is given back by the gateway's clean-up, a lock's and a
// permit's alike: nobody holds what no caller was told of. (The permit's
// clean-up, sem_leave, failed on a release record it could not write once
// that record carried how long the grant was held: the permit stayed held
// for its whole lease.)
func TestRedisLostGrantIsGivenBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, script string
		acquire      func(r *redisbackend.Backend, key locks.Key) error
		held         func(r *redisbackend.Backend, key locks.Key) bool
	}{
		{"Lock", "lockgate_acquire_",
			func(r *redisbackend.Backend, key locks.Key) error {
				_, err := r.Acquire(context.Background(), key, locks.AcquireRequest{TTL: time.Minute, Subject: "t"})
				return err
			},
			lockHeld},
		{"Permit", "lockgate_sem_acquire_",
			func(r *redisbackend.Backend, key locks.Key) error {
				_, err := r.AcquirePermit(context.Background(), key, locks.SemaphoreRequest{
					AcquireRequest: locks.AcquireRequest{TTL: time.Minute, Subject: "t"}, Limit: 1})
				return err
			},
			permitHeld},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			client := newClient(t, srv)
			hook := &loseReply{script: tc.script}
			client.AddHook(hook)
			r := openRedis(t, client, redisbackend.Options{})
			// Loads the functions first, so that the lost call is the one
			// that runs, and no first call of one fails for want of it.
			if err := r.LoadFunctions(context.Background()); err != nil {
				t.Fatal(err)
			}
			key := locks.Key{Namespace: "lost", Name: "grant"}
			admin := newClient(t, srv)
			failedBefore := failedScriptCalls(t, admin)
			hook.mu.Lock()
			hook.armed = true
			hook.mu.Unlock()
			if err := tc.acquire(r, key); !errors.Is(err, locks.ErrUnavailable) {
				t.Fatalf("the acquire whose reply was lost: got %v, want ErrUnavailable", err)
			}
			r.Close() // waits for the clean-up
			if tc.held(newRedis(t, srv, redisbackend.Options{}), key) {
				t.Fatalf("after the clean-up of an acquire whose reply was lost, it is still held: nobody was told of that grant")
			}
			if n := failedScriptCalls(t, admin) - failedBefore; n != 0 {
				t.Fatalf("%d script calls failed in Redis during the clean-up, want none: it must run to its end (the hand-off to the next waiter comes last)", n)
			}
		})
	}
}

// failedScriptCalls is how many FCALLs Redis answered with an error.
func failedScriptCalls(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	stats, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(stats, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_fcall:"); ok {
			_, f, _ := strings.Cut(rest, "failed_calls=")
			n, _ := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
			return n
		}
	}
	return 0
}
