package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/lockgate/lockgate/locks"

	"github.com/redis/go-redis/v9"
)

// CheckEviction asks every Redis master for its maxmemory-policy. It
// returns nil when each says noeviction, an *EvictionError when one does
// not, a *PolicyUnknownError when one refuses to say (and none evicts), and
// an error matching ErrUnavailable when one does not answer. Check runs it
// and lets a refusal pass, so call it once at start to learn of that.
func (r *Backend) CheckEviction(ctx context.Context) error {
	var (
		mu      sync.Mutex
		evict   *locks.EvictionError
		unknown *locks.PolicyUnknownError
		down    error
	)
	check := func(ctx context.Context, c redis.UniversalClient) {
		err := policyOf(ctx, c)
		mu.Lock()
		defer mu.Unlock()
		var (
			ev *locks.EvictionError
			pu *locks.PolicyUnknownError
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
			return fmt.Errorf("%w: list the Redis Cluster masters: %w", locks.ErrUnavailable, err)
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
func (r *Backend) checkPolicy(ctx context.Context) error {
	if err := r.CheckEviction(ctx); err != nil && !errors.As(err, new(*locks.PolicyUnknownError)) {
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
		return &locks.PolicyUnknownError{Addr: addr, Err: err}
	case err != nil:
		return fmt.Errorf("%w: CONFIG GET maxmemory-policy on %s: %w", locks.ErrUnavailable, addr, err)
	}
	policy, ok := res["maxmemory-policy"]
	switch {
	case !ok:
		return &locks.PolicyUnknownError{Addr: addr, Err: errors.New("no maxmemory-policy in the answer")}
	case policy != locks.SafePolicy:
		return &locks.EvictionError{Policy: policy, Addr: addr}
	}
	return nil
}
