package locks

import (
	"context"
	"errors"
	"time"
)

// QueueGhost queues a waiter that never takes the lock and sends no
// heartbeats: on channel "" nobody hears its hand-off, as after a crash;
// on a channel the test listens to, it is heard but never taken, as when a
// gateway froze.
func (r *Redis) QueueGhost(ctx context.Context, key Key, req AcquireRequest, channel string) error {
	if channel == "" {
		channel = r.opts.Prefix + "gateway:gone"
	}
	cmd, _ := r.exec(ctx, acquireScript, newCallID(), "", r.lockKeys(key).all(),
		tokenHash(newToken()), req.TTL.Milliseconds(), "ghost", "ghost",
		r.opts.FenceRetention.Milliseconds(), "ghost-"+newToken(), channel,
		req.Wait.Milliseconds(), r.opts.WaiterLease.Milliseconds(), r.arg.checkHeard, 0,
	)
	return cmd.Err()
}

// Channel is the channel of r's waiters: a ghost queued on it is handed
// grants in full by r's releases, as one of r's own waiters would be.
func (r *Redis) Channel() string { return r.waiters.channel }

// PretendCluster makes r trust no PUBLISH receiver count, as on Redis
// Cluster, where it counts the receivers of one node only.
func (r *Redis) PretendCluster() { r.arg.checkHeard = "0" }

// WaitingIDs returns the ids of r's waiters on key.
func (r *Redis) WaitingIDs(key Key) []string {
	r.waiters.mu.Lock()
	defer r.waiters.mu.Unlock()
	var ids []string
	for id, w := range r.waiters.byID {
		if w.res.key == key {
			ids = append(ids, id)
		}
	}
	return ids
}

// RequeueGone queues again, on r's channel, waiter id of r that ended
// without the lock: what a call of it whose outcome was unknown does when
// it runs in Redis after the waiter's leave.
func (r *Redis) RequeueGone(ctx context.Context, key Key, id string, req AcquireRequest) error {
	r.waiters.mu.Lock()
	g, ok := r.waiters.gone[id]
	r.waiters.mu.Unlock()
	if !ok {
		return errors.New("not a waiter that ended without the lock: " + id)
	}
	cmd, _ := r.exec(ctx, acquireScript, newCallID(), "", r.lockKeys(key).all(),
		g.tokHash, req.TTL.Milliseconds(), "ghost", "ghost",
		r.opts.FenceRetention.Milliseconds(), id, r.waiters.channel,
		req.Wait.Milliseconds(), r.opts.WaiterLease.Milliseconds(), r.arg.checkHeard, 0,
	)
	return cmd.Err()
}

// LateHandOver does what r does with a release's reply that handed key's
// lock in full to its waiter id, arriving after that waiter ended, and
// returns once the clean-up it may start is done.
func (r *Redis) LateHandOver(ctx context.Context, key Key, id string) {
	r.handOver(ctx, resource{lockKind, key}, []any{id, int64(1), int64(60000), int64(0), int64(0)}, time.Now(), nil)
	r.cleanups.Wait() // and whatever it started in the background
}

// QueuePermitGhost queues a waiter for a permit of key's semaphore on a
// channel nobody listens on, as a gateway that froze would leave it, and
// returns its token: PickUpPermit then plays that gateway's late pick-up.
func (r *Redis) QueuePermitGhost(ctx context.Context, key Key, limit int, ttl time.Duration) (string, error) {
	token := newToken()
	return token, r.permitScript(ctx, key, token, limit, ttl)
}

// PickUpPermit runs the ghost's acquire script again, as its gateway would
// once it woke.
func (r *Redis) PickUpPermit(ctx context.Context, key Key, token string, limit int, ttl time.Duration) error {
	return r.permitScript(ctx, key, token, limit, ttl)
}

func (r *Redis) permitScript(ctx context.Context, key Key, token string, limit int, ttl time.Duration) error {
	res := resource{semaphoreKind, key}
	cmd, _ := r.exec(ctx, semAcquireScript, newCallID(), "", r.keysFor(res, tokenHash(token)),
		tokenHash(token), ttl.Milliseconds(), "ghost", "ghost", r.opts.FenceRetention.Milliseconds(),
		"ghost-"+token[:8], r.opts.Prefix+"gateway:gone", time.Minute.Milliseconds(),
		r.opts.WaiterLease.Milliseconds(), "0", 0, limit)
	return cmd.Err()
}

// QueueUnserved queues a waiter for key's lock, or for a permit of its
// semaphore of limit permits when limit > 0, that no gateway serves and
// whose hand-off is never dropped for want of a listener, and returns its
// id and token: LeaveAndPickUp then runs the leave of that waiter, which
// picks up what was handed to it meanwhile.
func (r *Redis) QueueUnserved(ctx context.Context, key Key, limit int) (id, token string, err error) {
	token = newToken()
	id = "unserved-" + token[:8]
	h := tokenHash(token)
	common := []any{h, time.Minute.Milliseconds(), "ghost", "ghost", r.opts.FenceRetention.Milliseconds(), id,
		r.opts.Prefix + "gateway:gone", time.Minute.Milliseconds(), time.Minute.Milliseconds(), "0", 0}
	var cmd interface{ Err() error }
	if limit > 0 {
		cmd, _ = r.exec(ctx, semAcquireScript, newCallID(), "", r.keysFor(resource{semaphoreKind, key}, h), append(common, limit)...)
	} else {
		cmd, _ = r.exec(ctx, acquireScript, newCallID(), "", r.keysFor(resource{lockKind, key}, h), append(common, "x", r.arg.opts)...)
	}
	return id, token, cmd.Err()
}

// LeaveAndPickUp runs the leave of a waiter QueueUnserved queued (see
// there), as its wait running out would.
func (r *Redis) LeaveAndPickUp(ctx context.Context, key Key, limit int, id, token string) error {
	res := resource{lockKind, key}
	if limit > 0 {
		res.kind = semaphoreKind
	}
	_, err := r.leave(ctx, res, id, token, false)
	return err
}
