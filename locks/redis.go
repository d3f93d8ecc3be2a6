package locks

import (
	"context"
	"errors"
	"fmt"
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
	return o
}

// Redis is the production backend: a lock is a hash in Redis whose expiry is
// the lease, changed only by the scripts in package lua, so that every
// check-then-act is atomic on the Redis side.
//
// Give it a client whose context deadlines apply to the network
// (ContextTimeoutEnabled) and that does not retry commands (MaxRetries -1):
// a script that timed out may have run, and must not run twice unseen.
type Redis struct {
	client  redis.UniversalClient
	opts    RedisOptions
	wakeups *wakeups
}

var _ Backend = (*Redis)(nil)

// NewRedis returns a backend on client. Close it to stop its subscription;
// the client stays the caller's to close.
func NewRedis(client redis.UniversalClient, opts RedisOptions) *Redis {
	opts = opts.withDefaults()
	return &Redis{
		client:  client,
		opts:    opts,
		wakeups: newWakeups(client, opts.Prefix+"released", opts.Timeout),
	}
}

// lockKey is the lock's hash. Every key of one lock shares the hash tag
// {ns/name}, so that one script can touch them all on Redis Cluster.
func (r *Redis) lockKey(key Key) string  { return r.opts.Prefix + "{" + key.String() + "}" }
func (r *Redis) fenceKey(key Key) string { return r.lockKey(key) + ":fence" }

// callCtx bounds one Redis call by the configured timeout, and detaches it
// from the caller's cancellation: a call cut off half way leaves an unknown
// outcome (did the grant happen?), one that runs to the end does not.
func (r *Redis) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), r.opts.Timeout)
}

// Acquire implements Locker. A waiting Acquire sleeps until a release on any
// gateway publishes the lock's name, or the holder's lease runs out, and then
// tries again.
func (r *Redis) Acquire(ctx context.Context, key Key, req AcquireRequest) (Grant, error) {
	if err := req.validate(); err != nil {
		return Grant{}, err
	}
	token := newToken()
	if req.Wait == 0 {
		return r.tryAcquire(ctx, key, req, token)
	}

	woken, unregister := r.wakeups.register(key.String())
	defer unregister()
	if err := r.wakeups.ready(ctx); err != nil {
		return Grant{}, unavailable("acquire", key, err)
	}
	deadline := time.NewTimer(req.Wait)
	defer deadline.Stop()
	for {
		grant, err := r.tryAcquire(ctx, key, req, token)
		var held *HeldError
		if !errors.As(err, &held) {
			return grant, err
		}
		// A crashed holder publishes nothing: wake when its lease ends.
		expiry := time.NewTimer(max(held.RetryAfter, time.Millisecond))
		select {
		case <-woken:
		case <-expiry.C:
		case <-deadline.C:
			expiry.Stop()
			return r.tryAcquire(ctx, key, req, token) // one last look
		case <-ctx.Done():
			expiry.Stop()
			return Grant{}, fmt.Errorf("acquire %s: %w", key, ctx.Err())
		}
		expiry.Stop()
	}
}

func (r *Redis) tryAcquire(ctx context.Context, key Key, req AcquireRequest, token string) (Grant, error) {
	start := time.Now()
	cctx, cancel := r.callCtx(ctx)
	defer cancel()
	res, err := lua.Acquire.Run(cctx, r.client,
		[]string{r.lockKey(key), r.fenceKey(key)},
		tokenHash(token), req.TTL.Milliseconds(), req.Subject, req.Owner,
		r.opts.FenceRetention.Milliseconds(),
	).Int64Slice()
	if err != nil {
		// The script may have run: make sure nobody holds a grant that no
		// caller knows about. Failing that, the lease ends it.
		r.Release(ctx, key, token)
		return Grant{}, unavailable("acquire", key, err)
	}
	if res[0] == 0 {
		return Grant{}, &HeldError{RetryAfter: time.Duration(max(res[1], 0)) * time.Millisecond}
	}
	if ctx.Err() != nil {
		// The caller left while the grant happened: nobody would release it.
		r.Release(ctx, key, token)
		return Grant{}, fmt.Errorf("acquire %s: %w", key, ctx.Err())
	}
	ttl := time.Duration(res[2]) * time.Millisecond
	return Grant{Token: token, Lease: Lease{FencingToken: res[1], TTL: ttl, ExpiresAt: start.Add(ttl)}}, nil
}

// Release implements Locker.
func (r *Redis) Release(ctx context.Context, key Key, token string) error {
	cctx, cancel := r.callCtx(ctx)
	defer cancel()
	res, err := lua.Release.Run(cctx, r.client, []string{r.lockKey(key)},
		tokenHash(token), r.wakeups.channel, key.String()).Int64()
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
	res, err := lua.Renew.Run(cctx, r.client, []string{r.lockKey(key)},
		tokenHash(token), ttl.Milliseconds()).Int64Slice()
	if err != nil {
		return Lease{}, unavailable("renew", key, err)
	}
	if res[0] != 1 {
		return Lease{}, fmt.Errorf("renew %s: %w", key, ErrNotHolder)
	}
	ttl = time.Duration(res[2]) * time.Millisecond
	return Lease{FencingToken: res[1], TTL: ttl, ExpiresAt: start.Add(ttl)}, nil
}

// Inspect implements Locker.
func (r *Redis) Inspect(ctx context.Context, key Key) (Info, error) {
	start := time.Now()
	cctx, cancel := r.callCtx(ctx)
	defer cancel()
	res, err := lua.Inspect.RunRO(cctx, r.client, []string{r.lockKey(key)}).Slice()
	if err != nil {
		return Info{}, unavailable("inspect", key, err)
	}
	if len(res) < 5 {
		return Info{}, fmt.Errorf("inspect %s: %w", key, ErrNotHeld)
	}
	fence, _ := res[0].(int64)
	pttl, _ := res[1].(int64)
	subject, _ := res[2].(string)
	owner, _ := res[3].(string)
	at, _ := res[4].(int64)
	ttl := time.Duration(pttl) * time.Millisecond
	return Info{
		Lease:      Lease{FencingToken: fence, TTL: ttl, ExpiresAt: start.Add(ttl)},
		Subject:    subject,
		Owner:      owner,
		AcquiredAt: time.UnixMilli(at).UTC(),
	}, nil
}

// Check implements Backend.
func (r *Redis) Check(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	if err := r.client.Ping(cctx).Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// Close implements Backend: it stops the subscription that wakes waiters.
func (r *Redis) Close() error {
	r.wakeups.close()
	return nil
}
