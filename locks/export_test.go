package locks

import (
	"context"

	"github.com/lockgate/lockgate/lua"
)

// QueueGhost queues a waiter whose gateway is gone: nobody listens on its
// channel and nobody sends its heartbeats, as after a crash.
func (r *Redis) QueueGhost(ctx context.Context, key Key, req AcquireRequest) error {
	return lua.Acquire.Run(ctx, r.client, r.keys(key),
		tokenHash(newToken()), req.TTL.Milliseconds(), "ghost", "ghost",
		r.opts.FenceRetention.Milliseconds(), "ghost-"+newToken(), r.opts.Prefix+"gateway:gone",
		req.Wait.Milliseconds(), r.opts.WaiterLease.Milliseconds(), r.checkHeard,
	).Err()
}

// PretendCluster makes r trust no PUBLISH receiver count, as on Redis
// Cluster, where it counts the receivers of one node only.
func (r *Redis) PretendCluster() { r.checkHeard = "0" }
