package locks

import (
	"context"

	"github.com/lockgate/lockgate/lua"
)

// QueueGhost queues a waiter that never takes the lock and sends no
// heartbeats: on channel "" nobody hears its hand-off, as after a crash;
// on a channel the test listens to, it is heard but never taken, as when a
// gateway froze.
func (r *Redis) QueueGhost(ctx context.Context, key Key, req AcquireRequest, channel string) error {
	if channel == "" {
		channel = r.opts.Prefix + "gateway:gone"
	}
	return lua.Acquire.Run(ctx, r.client, r.lockKeys(key).all(),
		tokenHash(newToken()), req.TTL.Milliseconds(), "ghost", "ghost",
		r.opts.FenceRetention.Milliseconds(), "ghost-"+newToken(), channel,
		req.Wait.Milliseconds(), r.opts.WaiterLease.Milliseconds(), r.checkHeard, 0,
	).Err()
}

// PretendCluster makes r trust no PUBLISH receiver count, as on Redis
// Cluster, where it counts the receivers of one node only.
func (r *Redis) PretendCluster() { r.checkHeard = "0" }
