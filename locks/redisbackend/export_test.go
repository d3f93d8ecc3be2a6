package redisbackend

import (
	"context"
	"errors"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// QueueGhost queues a waiter that never takes the lock and sends no
// heartbeats: on channel "" nobody hears its hand-off, as after a crash;
// on a channel the test listens to, it is heard but never taken, as when a
// gateway froze.
func (r *Backend) QueueGhost(ctx context.Context, key locks.Key, req locks.AcquireRequest, channel string) error {
	return r.QueueGhostAlive(ctx, key, req, channel, time.Duration(r.arg.lease.(int64))*time.Millisecond)
}

// QueueGhostAlive is QueueGhost for a ghost that counts as alive, and
// whose grant waits for its pick-up, for alive (r's waiter lease for
// QueueGhost): a test whose ghost must be alive when the lock frees,
// however busy the machine, gives it longer than its own waiters.
func (r *Backend) QueueGhostAlive(ctx context.Context, key locks.Key, req locks.AcquireRequest, channel string, alive time.Duration) error {
	if channel == "" {
		channel = r.opts.Prefix + "gateway:gone"
	}
	_, _, err := r.elsewhere(channel, alive.Milliseconds(), r.arg.checkHeard).callAcquire(ctx, resource{lockKind, key}, newCallID(), acquireArgs{
		tokHash: locks.TokenHash(locks.NewToken()), ttl: req.TTL, subject: "ghost", owner: "ghost", waiterID: "ghost-" + locks.NewToken(), wait: req.Wait})
	return err
}

// elsewhere is r as another gateway, whose waiters wait on channel, count
// as alive for lease without a heartbeat, and whose hand-offs drop a waiter
// nobody hears when checkHeard is "1": it sends what that gateway's calls
// would.
func (r *Backend) elsewhere(channel string, lease, checkHeard any) *Backend {
	o := &Backend{client: r.client, opts: r.opts, lockOpts: r.lockOpts, inlineIndex: r.inlineIndex, waiters: r.waiters, arg: r.arg, batch: r.batch}
	o.arg.channel, o.arg.lease, o.arg.checkHeard = channel, lease, checkHeard
	o.arg.opts = o.scriptOpts()
	return o
}

// Channel is the channel of r's waiters: a ghost queued on it is handed
// grants in full by r's releases, as one of r's own waiters would be.
func (r *Backend) Channel() string { return r.waiters.channel }

// PretendCluster makes r trust no PUBLISH receiver count, as on Redis
// Cluster, where it counts the receivers of one node only.
func (r *Backend) PretendCluster() { r.arg.checkHeard = "0"; r.arg.opts = r.scriptOpts() }

// WaitingIDs returns the ids of r's waiters on key.
func (r *Backend) WaitingIDs(key locks.Key) []string {
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
// ErrFencedOff is errFencedOff.
var ErrFencedOff = errFencedOff

func (r *Backend) RequeueGone(ctx context.Context, key locks.Key, id string, req locks.AcquireRequest) error {
	r.waiters.mu.Lock()
	g, ok := r.waiters.gone[id]
	r.waiters.mu.Unlock()
	if !ok {
		return errors.New("not a waiter that ended without the lock: " + id)
	}
	_, _, err := r.callAcquire(ctx, resource{lockKind, key}, newCallID(), acquireArgs{
		tokHash: g.tokHash, ttl: req.TTL, subject: "ghost", owner: "ghost", waiterID: id, wait: req.Wait})
	return err
}

// LateHandOver does what r does with a release's reply that handed key's
// lock in full to its waiter id, arriving after that waiter ended, and
// returns once the clean-up it may start is done.
func (r *Backend) LateHandOver(ctx context.Context, key locks.Key, id string) {
	r.handOver(ctx, resource{lockKind, key}, nearGrant{waiterID: id,
		rp: reply{granted: true, fence: 1, ttl: time.Minute, handed: true, rank: -1}}, time.Now(), nil)
	r.cleanups.Wait() // and whatever it started in the background
}

// ReleaseSlowly releases key's grant of token as r does, but keeps back
// what the release script handed in full to a waiter of r until deliver is
// called, as a reply that comes late would.
func (r *Backend) ReleaseSlowly(ctx context.Context, key locks.Key, token string) (deliver func(), err error) {
	start := time.Now()
	rp, _, err := lockKind.callRelease(ctx, r, key, newCallID(), "", releaseArgs{tokHash: locks.TokenHash(token)})
	if err != nil {
		return nil, err
	}
	if rp.near == nil {
		return nil, errors.New("the release handed nothing in full to a waiter of r")
	}
	near := *rp.near
	return func() { r.handOver(ctx, resource{lockKind, key}, near, start, nil) }, nil
}

// WakeWaiters has r's waiters on key run their script again, as a
// heartbeat that found them no longer queued does.
func (r *Backend) WakeWaiters(key locks.Key) {
	r.waiters.mu.Lock()
	defer r.waiters.mu.Unlock()
	for _, w := range r.waiters.byID {
		if w.res.key == key {
			w.poke()
		}
	}
}

// QueuePermitGhost queues a waiter for a permit of key's semaphore on a
// channel nobody listens on, as a gateway that froze would leave it, and
// returns its token: PickUpPermit then plays that gateway's late pick-up.
func (r *Backend) QueuePermitGhost(ctx context.Context, key locks.Key, limit int, ttl time.Duration) (string, error) {
	token := locks.NewToken()
	return token, r.permitScript(ctx, key, token, limit, ttl)
}

// PickUpPermit runs the ghost's acquire script again, as its gateway would
// once it woke.
func (r *Backend) PickUpPermit(ctx context.Context, key locks.Key, token string, limit int, ttl time.Duration) error {
	return r.permitScript(ctx, key, token, limit, ttl)
}

func (r *Backend) permitScript(ctx context.Context, key locks.Key, token string, limit int, ttl time.Duration) error {
	_, _, err := r.elsewhere(r.opts.Prefix+"gateway:gone", r.arg.lease, "0").callAcquire(ctx, resource{semaphoreKind, key}, newCallID(), acquireArgs{
		tokHash: locks.TokenHash(token), ttl: ttl, subject: "ghost", owner: "ghost", waiterID: "ghost-" + token[:8], wait: time.Minute, limit: limit})
	return err
}

// QueueUnserved queues a waiter for key's lock, or for a permit of its
// semaphore of limit permits when limit > 0, that no gateway serves and
// whose hand-off is never dropped for want of a listener, and returns its
// id and token: LeaveAndPickUp then runs the leave of that waiter, which
// picks up what was handed to it meanwhile.
func (r *Backend) QueueUnserved(ctx context.Context, key locks.Key, limit int) (id, token string, err error) {
	token = locks.NewToken()
	id = "unserved-" + token[:8]
	res := resource{lockKind, key}
	if limit > 0 {
		res.kind = semaphoreKind
	}
	_, _, err = r.elsewhere(r.opts.Prefix+"gateway:gone", time.Minute.Milliseconds(), "0").callAcquire(ctx, res, newCallID(), acquireArgs{
		tokHash: locks.TokenHash(token), ttl: time.Minute, subject: "ghost", owner: "ghost", waiterID: id, wait: time.Minute, limit: limit})
	return id, token, err
}

// LeaveAndPickUp runs the leave of a waiter QueueUnserved queued (see
// there), as its wait running out would.
func (r *Backend) LeaveAndPickUp(ctx context.Context, key locks.Key, limit int, id, token string) error {
	res := resource{lockKind, key}
	if limit > 0 {
		res.kind = semaphoreKind
	}
	_, err := r.leave(ctx, res, id, token, false)
	return err
}

// Heartbeat runs one heartbeat of r now for waiter ids on key's lock, or
// on key's semaphore when semaphore is set, and returns the ids it would
// wake: those no longer queued, or all of them when the script failed.
func (r *Backend) Heartbeat(ctx context.Context, key locks.Key, semaphore bool, ids []string) []string {
	res := resource{lockKind, key}
	if semaphore {
		res.kind = semaphoreKind
	}
	return r.heartbeat(ctx, map[resource][]string{res: ids})
}

// DropNameRecord deletes key's name record, as its expiry after the
// retention, or a Redis restarted empty, would: its fencing counter, its
// history and its index.
func (r *Backend) DropNameRecord(ctx context.Context, key locks.Key) error {
	return r.client.Del(ctx, r.lockKeys(key).fence).Err()
}

// SessionStore hands out r's session store to the conformance suite
// (locktest.SessionStores).
func (r *Backend) SessionStore() locks.SessionStore { return r.SessionEngine.Store }

// OnSemaphoreRead sets f to see each read that watches of a semaphore
// share, before it is sent, with how many watches wait on it. Set it
// before any watch.
func (r *Backend) OnSemaphoreRead(f func(key locks.Key, watches int)) { r.semPolls.onRound = f }
