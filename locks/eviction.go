package locks

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Every lockgate key has a TTL (a lock's hash expires with its lease, its
// fencing counter after RedisOptions.FenceRetention), so under any
// volatile-* policy, as under any allkeys-* one, a Redis short of memory
// deletes live locks, and the next caller gets a lock someone still holds.
// Only noeviction, which refuses writes instead, keeps the promise.
const safePolicy = "noeviction"

// CheckEviction asks every Redis master for its maxmemory-policy. It
// returns nil when each says noeviction, an *EvictionError when one does
// not, a *PolicyUnknownError when one refuses to say (and none evicts), and
// an error matching ErrUnavailable when one does not answer. Check runs it
// and lets a refusal pass, so call it once at start to learn of that.
func (r *Redis) CheckEviction(ctx context.Context) error {
	var (
		mu      sync.Mutex
		evict   *EvictionError
		unknown *PolicyUnknownError
		down    error
	)
	check := func(ctx context.Context, c redis.UniversalClient) {
		err := policyOf(ctx, c)
		mu.Lock()
		defer mu.Unlock()
		var (
			ev *EvictionError
			pu *PolicyUnknownError
		)
		switch {
		case errors.As(err, &ev):
			evict = ev
		case errors.As(err, &pu):
			unknown = pu
		case err != nil:
			down = err
		}
	}
	if c, ok := r.client.(*redis.ClusterClient); ok {
		err := c.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			check(ctx, c)
			return nil
		})
		if err != nil {
			return fmt.Errorf("%w: list the Redis Cluster masters: %w", ErrUnavailable, err)
		}
	} else {
		// One Redis; a failover client asks its master.
		check(ctx, r.client)
	}
	switch {
	case evict != nil:
		return evict
	case down != nil:
		return down
	case unknown != nil:
		return unknown
	}
	return nil
}

// checkPolicy is CheckEviction for readiness: a Redis that will not say
// its policy was reported at start, and is no reason to stop serving.
func (r *Redis) checkPolicy(ctx context.Context) error {
	if err := r.CheckEviction(ctx); err != nil && !errors.As(err, new(*PolicyUnknownError)) {
		return err
	}
	return nil
}

// policyOf reads one node's maxmemory-policy.
func policyOf(ctx context.Context, c redis.UniversalClient) error {
	addr := "(unknown address)"
	if cl, ok := c.(*redis.Client); ok {
		addr = cl.Options().Addr
	}
	res, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
	var refused redis.Error
	switch {
	case errors.As(err, &refused):
		// An answer, not a failure: CONFIG is renamed away ("unknown
		// command") or the user lacks +config ("NOPERM").
		return &PolicyUnknownError{Addr: addr, Err: err}
	case err != nil:
		return fmt.Errorf("%w: CONFIG GET maxmemory-policy on %s: %w", ErrUnavailable, addr, err)
	}
	policy, ok := res["maxmemory-policy"]
	switch {
	case !ok:
		return &PolicyUnknownError{Addr: addr, Err: errors.New("no maxmemory-policy in the answer")}
	case policy != safePolicy:
		return &EvictionError{Policy: policy, Addr: addr}
	}
	return nil
}
