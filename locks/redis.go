package locks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/lua"
)

// RedisOptions configures the Redis backend. The zero value is usable.
type RedisOptions struct {
	// Prefix starts every key and channel name. Default "lockgate:".
	Prefix string
	// Timeout bounds each call to Redis; past it the call fails with
	// ErrUnavailable. Default 2s.
	Timeout time.Duration
	// FenceRetention is how long a lock's fencing counter outlives the last
	// acquisition. Losing it is safe (the next one is seeded from the Redis
	// clock); keeping it guards against the clock stepping back. Default 24h.
	FenceRetention time.Duration
	// WaiterLease is how long a queued waiter counts as alive without a
	// heartbeat from its gateway (sent every third of it). A gateway that
	// dies delays the queue by at most this long, plus the TTL of a grant
	// handed to it in its last moments. Default 3s.
	WaiterLease time.Duration
}

func (o RedisOptions) withDefaults() RedisOptions {
	if o.Prefix == "" {
		o.Prefix = "lockgate:"
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	if o.FenceRetention <= 0 {
		o.FenceRetention = 24 * time.Hour
	}
	if o.WaiterLease <= 0 {
		o.WaiterLease = 3 * time.Second
	}
	return o
}

// Redis is the production backend: a lock is a hash in Redis whose expiry is
// the lease, changed only by the scripts in package lua, so that every
// check-then-act is atomic on the Redis side. Waiters queue in Redis; a
// release hands the lock to the first of them inside the release script and
// publishes one message to that waiter's gateway.
//
// Give it a client whose context deadlines apply to the network
// (ContextTimeoutEnabled) and that does not retry commands (MaxRetries -1):
// a script that timed out may have run, and must not run twice unseen.
type Redis struct {
	client  redis.UniversalClient
	opts    RedisOptions
	waiters *waiters
	// checkHeard is "1" when PUBLISH's count of receivers is exact (a single
	// Redis), so that a hand-off nobody hears can skip a dead gateway at once.
	checkHeard string
	// cleanups are abandon calls still running; Close waits for them.
	cleanups sync.WaitGroup
}

var _ Backend = (*Redis)(nil)

// NewRedis returns a backend on client. Close it to stop its subscription;
// the client stays the caller's to close.
func NewRedis(client redis.UniversalClient, opts RedisOptions) *Redis {
	opts = opts.withDefaults()
	id := make([]byte, 8)
	rand.Read(id)
	r := &Redis{client: client, opts: opts, checkHeard: "1"}
	if _, cluster := client.(*redis.ClusterClient); cluster {
		r.checkHeard = "0"
	}
	r.waiters = newWaiters(client, opts.Prefix+"gateway:"+hex.EncodeToString(id), opts.Timeout, opts.WaiterLease, r.heartbeat)
	return r
}

// keys returns the keys of one lock, in the order the scripts take them.
// They share the hash tag {ns/name}, so that one script can touch them all
// on Redis Cluster.
func (r *Redis) keys(key Key) []string {
	lock := r.opts.Prefix + "{" + key.String() + "}"
	return []string{lock, lock + ":fence", lock + ":queue", lock + ":alive", lock + ":waiters"}
}

// callCtx bounds one Redis call by the configured timeout, and detaches it
// from the caller's cancellation: a call cut off half way leaves an unknown
// outcome (did the grant happen?), one that runs to the end does not.
func (r *Redis) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), r.opts.Timeout)
}

// Acquire implements Locker.
func (r *Redis) Acquire(ctx context.Context, key Key, req AcquireRequest) (Grant, error) {
	if err := req.validate(); err != nil {
		return Grant{}, err
	}
	token := newToken()
	if req.Wait == 0 {
		start := time.Now()
		res, err := r.runAcquire(ctx, key, req, token, "")
		if err != nil {
			return Grant{}, err
		}
		if res[0] == 0 {
			return Grant{}, &HeldError{RetryAfter: millis(res[1])}
		}
		return r.deliver(ctx, key, token, Lease{FencingToken: res[1], TTL: millis(res[2]), ExpiresAt: start.Add(millis(res[2]))})
	}

	w := r.waiters.register(key)
	defer r.waiters.unregister(w)
	if err := r.waiters.ready(ctx); err != nil {
		return Grant{}, unavailable("acquire", key, err)
	}
	deadline := time.NewTimer(req.Wait)
	defer deadline.Stop()
	retry := time.NewTimer(time.Hour) // reset before each wait
	defer retry.Stop()
	for {
		start := time.Now()
		res, err := r.runAcquire(ctx, key, req, token, w.id)
		if err != nil {
			return Grant{}, err
		}
		if res[0] == 1 {
			return r.deliver(ctx, key, token, Lease{FencingToken: res[1], TTL: millis(res[2]), ExpiresAt: start.Add(millis(res[2]))})
		}
		// Queued. A release hands us the lock with a message; the end of a
		// lease does not (a crashed holder publishes nothing). The first in
		// line looks again when the holder's lease ends; failing that, the
		// heartbeats of every gateway with waiters hand the lock on.
		pttl, redisNow, rank := res[1], res[2], res[3]
		if rank == 0 && pttl >= 0 {
			retry.Reset(millis(max(pttl, 1)))
		} else {
			retry.Stop()
		}
		select {
		case h := <-w.handed:
			// The lease began at h.now on the Redis clock. Our call began at
			// start, before Redis read redisNow: counting from start is never
			// late, whatever the two clocks say. Both readings are whole
			// milliseconds, cut down: one more makes up for that.
			handedAt := start.Add(millis(h.now - redisNow - 1))
			expiresAt := handedAt.Add(millis(h.ttl))
			lease := Lease{FencingToken: h.fence, TTL: time.Until(expiresAt), ExpiresAt: expiresAt}
			if lease.TTL > 0 {
				g, err := r.deliver(ctx, key, token, lease)
				g.HandoffDelay = max(time.Since(handedAt), 0)
				return g, err
			}
			r.Release(ctx, key, token) // it may already be dead: never hand that out
		case <-w.woken:
		case <-retry.C:
		case <-deadline.C:
			lease, handed, err := r.leave(ctx, key, w.id, token)
			if err != nil {
				return Grant{}, err
			}
			if handed {
				return r.deliver(ctx, key, token, lease) // handed over as the wait ran out
			}
			return Grant{}, &HeldError{RetryAfter: lease.TTL}
		case <-ctx.Done():
			if _, handed, _ := r.leave(ctx, key, w.id, token); handed {
				r.Release(ctx, key, token)
			}
			return Grant{}, fmt.Errorf("acquire %s: %w", key, ctx.Err())
		}
	}
}

// runAcquire runs the acquire script; waiterID is empty for an acquire that
// does not wait.
func (r *Redis) runAcquire(ctx context.Context, key Key, req AcquireRequest, token, waiterID string) ([]int64, error) {
	cctx, cancel := r.callCtx(ctx)
	defer cancel()
	res, err := lua.Acquire.Run(cctx, r.client, r.keys(key),
		tokenHash(token), req.TTL.Milliseconds(), req.Subject, req.Owner,
		r.opts.FenceRetention.Milliseconds(), waiterID, r.waiters.channel,
		req.Wait.Milliseconds(), r.opts.WaiterLease.Milliseconds(), r.checkHeard,
	).Int64Slice()
	if err != nil {
		r.abandon(ctx, key, waiterID, token) // the script may have run
		return nil, unavailable("acquire", key, err)
	}
	return res, nil
}

// abandon undoes, in the background, what a call whose outcome is unknown
// may have done: it takes the waiter out of the queue, if there is one, and
// releases the grant, if there is one, so that nobody holds a lock that no
// caller knows about. The caller has its answer (503) within the Redis
// timeout meanwhile. If Redis does not answer these either, the waiter's
// heartbeat lapses and the grant's lease ends on their own.
func (r *Redis) abandon(ctx context.Context, key Key, waiterID, token string) {
	ctx = context.WithoutCancel(ctx)
	r.cleanups.Go(func() {
		if waiterID != "" {
			cctx, cancel := r.callCtx(ctx)
			lua.Leave.Run(cctx, r.client, r.keys(key), waiterID, tokenHash(token))
			cancel()
		}
		r.Release(ctx, key, token)
	})
}

// deliver returns the grant, unless the caller has left: then nobody would
// ever release it, so it is released at once.
func (r *Redis) deliver(ctx context.Context, key Key, token string, lease Lease) (Grant, error) {
	if ctx.Err() != nil {
		r.Release(ctx, key, token)
		return Grant{}, fmt.Errorf("acquire %s: %w", key, ctx.Err())
	}
	return Grant{Token: token, Lease: lease}, nil
}

// leave takes a waiter out of the queue. If the lock was handed to it
// before it left, handed is true and lease describes the grant; otherwise
// lease.TTL is the holder's remaining TTL.
func (r *Redis) leave(ctx context.Context, key Key, waiterID, token string) (lease Lease, handed bool, err error) {
	start := time.Now()
	cctx, cancel := r.callCtx(ctx)
	defer cancel()
	res, err := lua.Leave.Run(cctx, r.client, r.keys(key), waiterID, tokenHash(token)).Int64Slice()
	if err != nil {
		r.abandon(ctx, key, waiterID, token) // a hand-off may have got there first
		return Lease{}, false, unavailable("acquire", key, err)
	}
	if res[0] == 1 {
		ttl := millis(res[2])
		return Lease{FencingToken: res[1], TTL: ttl, ExpiresAt: start.Add(ttl)}, true, nil
	}
	return Lease{TTL: millis(max(res[1], 0))}, false, nil
}

// heartbeat tells Redis that this process's waiters on key are alive.
func (r *Redis) heartbeat(ctx context.Context, key Key, ids []string) {
	cctx, cancel := r.callCtx(ctx)
	defer cancel()
	args := make([]any, 0, len(ids)+3)
	args = append(args, r.opts.WaiterLease.Milliseconds(), r.opts.FenceRetention.Milliseconds(), r.checkHeard)
	for _, id := range ids {
		args = append(args, id)
	}
	lua.Heartbeat.Run(cctx, r.client, r.keys(key), args...) // a missed beat: the next one, or the lease, settles it
}

// Release implements Locker.
func (r *Redis) Release(ctx context.Context, key Key, token string) error {
	cctx, cancel := r.callCtx(ctx)
	defer cancel()
	res, err := lua.Release.Run(cctx, r.client, r.keys(key),
		tokenHash(token), r.opts.FenceRetention.Milliseconds(), r.checkHeard).Int64()
	if err != nil {
		return unavailable("release", key, err)
	}
	if res != 1 {
		return fmt.Errorf("release %s: %w", key, ErrNotHolder)
	}
	return nil
}

// Renew implements Locker.
func (r *Redis) Renew(ctx context.Context, key Key, token string, ttl time.Duration) (Lease, error) {
	if ttl < 0 {
		return Lease{}, fmt.Errorf("%w: ttl must not be negative", ErrInvalid)
	}
	start := time.Now()
	cctx, cancel := r.callCtx(ctx)
	defer cancel()
	res, err := lua.Renew.Run(cctx, r.client, r.keys(key)[:1],
		tokenHash(token), ttl.Milliseconds()).Int64Slice()
	if err != nil {
		return Lease{}, unavailable("renew", key, err)
	}
	if res[0] != 1 {
		return Lease{}, fmt.Errorf("renew %s: %w", key, ErrNotHolder)
	}
	ttl = millis(res[2])
	return Lease{FencingToken: res[1], TTL: ttl, ExpiresAt: start.Add(ttl)}, nil
}

// Inspect implements Locker.
func (r *Redis) Inspect(ctx context.Context, key Key) (Info, error) {
	start := time.Now()
	cctx, cancel := r.callCtx(ctx)
	defer cancel()
	keys := r.keys(key)
	res, err := lua.Inspect.RunRO(cctx, r.client, []string{keys[0], keys[2]}).Slice()
	if err != nil {
		return Info{}, unavailable("inspect", key, err)
	}
	if len(res) < 6 {
		return Info{}, fmt.Errorf("inspect %s: %w", key, ErrNotHeld)
	}
	fence, _ := res[0].(int64)
	pttl, _ := res[1].(int64)
	subject, _ := res[2].(string)
	owner, _ := res[3].(string)
	at, _ := res[4].(int64)
	waiting, _ := res[5].(int64)
	ttl := millis(pttl)
	return Info{
		Lease:      Lease{FencingToken: fence, TTL: ttl, ExpiresAt: start.Add(ttl)},
		Subject:    subject,
		Owner:      owner,
		AcquiredAt: time.UnixMilli(at).UTC(),
		Waiters:    int(waiting),
	}, nil
}

// Check implements Backend: every Redis node answers, and none may evict
// keys (see CheckEviction).
func (r *Redis) Check(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	if err := r.client.Ping(cctx).Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return r.checkPolicy(cctx)
}

// Close implements Backend: it stops the subscription and the heartbeats,
// and waits for the clean-ups of calls that failed. Waiters still queued
// are dropped by the next hand-off.
func (r *Redis) Close() error {
	r.waiters.close()
	r.cleanups.Wait()
	return nil
}

func millis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
