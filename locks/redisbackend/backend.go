package redisbackend

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lockgate/lockgate/locks"

	"github.com/redis/go-redis/v9"
)

// Options configures the Redis backend. The zero value is usable.
type Options struct {
	// Prefix starts every key and channel name. Default "lockgate:".
	Prefix string
	// Timeout bounds each call to Redis; past it the call fails with
	// ErrUnavailable. Default 2s.
	Timeout time.Duration
	// FenceRetention is how long a lock's fencing counter outlives the last
	// acquisition. Losing it is safe (every token is at least the Redis
	// clock in microseconds); keeping it guards against the clock stepping
	// back. Default 24h.
	FenceRetention time.Duration
	// WaiterLease is how long a queued waiter counts as alive without a
	// heartbeat from its gateway (sent every third of it), and how long a
	// grant handed to a waiter waits for the waiter's gateway to pick it
	// up. A gateway that dies, freezes or is cut off delays the queue by at
	// most about twice this long. Default 3s.
	WaiterLease time.Duration
	// LockDelay keeps a lock whose lease ended without a release
	// unavailable for this long after (see the gateway's --lock-delay). A
	// release frees it at once. 0 (the default): no delay.
	LockDelay time.Duration
	// History is how many events of each lock the scripts keep (see
	// History); 0 (the default) keeps none.
	History int
	// MinReplicas, when above 0, is how many replicas must acknowledge
	// (WAIT) the writes of each grant, re-entry and renew before the
	// caller is told of it; with fewer, a grant is released again and the
	// call fails with a ReplicaError. 0 (the default): none are asked.
	MinReplicas int
	// ReplicaTimeout bounds each WAIT for MinReplicas. Default 100ms.
	ReplicaTimeout time.Duration
	// MaxSharedHolders is how many shared holders one lock may have at
	// once (see DefaultMaxSharedHolders, the default).
	MaxSharedHolders int
	// SessionMaxHolds is how many grants one session may hold at once
	// (see Sessions). Default DefaultSessionMaxHolds.
	SessionMaxHolds int
	// SessionsPerSubject is how many live sessions one subject may hold
	// at once (locks.SessionEngine.MaxPerSubject). Default
	// locks.DefaultSessionsPerSubject.
	SessionsPerSubject int
	// TicketLiveness is how long a ticket stays in its lock's queue after
	// each poll, and how long a grant handed to a ticket waits for a poll
	// to pick it up (see Tickets). Default locks.DefaultTicketLiveness.
	TicketLiveness time.Duration
	// PriorityAging is how long a waiter waits for each level its
	// priority rises (locks.AcquireRequest.Priority). Default
	// locks.DefaultPriorityAging.
	PriorityAging time.Duration
}

func (o Options) withDefaults() Options {
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
	if o.ReplicaTimeout <= 0 {
		o.ReplicaTimeout = 100 * time.Millisecond
	}
	if o.TicketLiveness <= 0 {
		o.TicketLiveness = locks.DefaultTicketLiveness
	}
	if o.PriorityAging <= 0 {
		o.PriorityAging = locks.DefaultPriorityAging
	}
	if o.MaxSharedHolders <= 0 {
		o.MaxSharedHolders = locks.DefaultMaxSharedHolders
	}
	if o.SessionMaxHolds <= 0 {
		o.SessionMaxHolds = locks.DefaultSessionMaxHolds
	}
	if o.SessionsPerSubject <= 0 {
		o.SessionsPerSubject = locks.DefaultSessionsPerSubject
	}
	return o
}

// Backend is the production backend: a lock is a hash in Redis whose expiry is
// the lease, changed only by the scripts in package lua, so that every
// check-then-act is atomic on the Redis side. Waiters queue in Redis; a
// release hands the lock to the first of them inside the release script,
// as a provisional grant, and publishes one wake-up to that waiter's
// gateway, whose next run of the acquire script picks the grant up; or, when
// that waiter waits on the releasing gateway, as a full grant that the
// script's reply carries to it.
//
// Every call of a script that changes state carries a call id, and Redis
// keeps its reply for a while (lua/once.lua): a call delivered twice has
// one effect, and its second delivery answers what the first did. So that
// nothing relies on that bound alone, NewRedis also refuses a client that
// re-sends commands on its own (see checkClient).
type Backend struct {
	client redis.UniversalClient
	opts   Options
	// lockOpts is the start of the lock scripts' options argument:
	// "delay:history:keep:readers:index" (see scriptOpts).
	lockOpts string
	// inlineIndex: the lock scripts keep the namespaces' index of held
	// locks themselves (see inlineIndex).
	inlineIndex bool
	waiters     *waiters
	watches     *watchHub
	// semPolls are the reads that watches of a semaphore share.
	semPolls *semPolls
	// arg are the script arguments that every call sends alike, boxed once
	// (an interface that holds a string or a large integer allocates):
	// retention is FenceRetention and lease WaiterLease in ms, channel the
	// waiters' channel, opts scriptOpts, checkHeard "1" when PUBLISH's
	// count of receivers is exact (a single Redis), so that a hand-off
	// nobody hears can skip a dead gateway at once, else "0", and callTTL
	// how long Redis keeps a call's reply, ms (see exec).
	arg struct{ retention, lease, channel, opts, checkHeard, callTTL any }

	// batch sends the script calls of acquire, leave, release, renew and
	// inspect, grouping those that arrive together (see batcher).
	batch *batcher

	// cleanups are abandon calls still running; Close waits for them, and
	// none starts after it.
	mu       sync.Mutex
	closed   bool
	cleanups sync.WaitGroup

	*locks.SessionEngine
	*locks.SetEngine
}

var _ locks.Backend = (*Backend)(nil)

// New returns a backend on client. Close it to stop its subscription;
// the client stays the caller's to close. It refuses a client set up to
// re-send commands or to ignore deadlines (see checkClient).
func New(client redis.UniversalClient, opts Options) (*Backend, error) {
	if err := checkClient(client); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	id := make([]byte, 8)
	rand.Read(id)
	r := &Backend{client: client, opts: opts, batch: newBatcher(client, batchSenders, batchMax),
		lockOpts: fmt.Sprintf("%d:%d:%d:%d:%d", opts.LockDelay.Milliseconds(), max(opts.History, 0), opts.FenceRetention.Milliseconds(), opts.MaxSharedHolders, inlineIndex(client))}
	r.arg.retention, r.arg.lease, r.arg.checkHeard, r.arg.callTTL =
		opts.FenceRetention.Milliseconds(), opts.WaiterLease.Milliseconds(), "1",
		callRecordTTL(opts.Timeout).Milliseconds()
	if _, cluster := client.(*redis.ClusterClient); cluster {
		r.arg.checkHeard = "0"
	}
	r.inlineIndex = inlineIndex(client) == 1
	if opts.MinReplicas > 0 {
		r.batch.replicas, r.batch.replicaTimeout = opts.MinReplicas, opts.ReplicaTimeout
	}
	r.waiters = newWaiters(client, opts.Prefix+"gateway:"+hex.EncodeToString(id), opts.Timeout, opts.WaiterLease, r.heartbeat)
	r.waiters.pickUp = opts.TicketLiveness
	r.arg.channel = r.waiters.channel
	r.arg.opts = r.scriptOpts()
	// An acquire in a session runs its wait and, around it, a few calls
	// of up to Timeout each: readiness, the last script run, a leave.
	r.SessionEngine = &locks.SessionEngine{Store: redisSessions{r}, Grants: r, MaxHolds: opts.SessionMaxHolds,
		Counter: redisSessionCount{r}, MaxPerSubject: opts.SessionsPerSubject,
		PendingSlack: 3 * opts.Timeout}
	if r.inlineIndex {
		// A session and its locks are on one Redis: one script can take a
		// lock and note it in its session (on Cluster they live on
		// different slots).
		r.SessionEngine.AtOnce = r
		// and opening, keeping and ending a session move the subject's
		// count of sessions in the same call
		r.SessionEngine.StoreCounts = opts.SessionsPerSubject > 0
	}
	r.SetEngine = &locks.SetEngine{Grants: r, All: r}
	r.watches = newWatchHub(r)
	r.semPolls = newSemPolls(semWatchPoll, func(key locks.Key) (locks.SemaphoreWatch, error) {
		return r.readSemaphore(context.Background(), key)
	})
	r.waiters.hint, r.waiters.resubscribed = r.watches.hint, r.watches.resubscribed
	return r, nil
}

// LoadFunctions loads every script's function library on every master,
// as the first call of each script would, so that no call has to: a
// gateway does it as it starts, where the first calls of a new Redis, all
// at once, loaded the same libraries side by side and ran past their
// timeout (503) on a busy machine. A node that lacks them later (restarted
// without persistence, flushed, newly promoted) still gets them from its
// first call. An error leaves that to the calls too.
func (r *Backend) LoadFunctions(ctx context.Context) error {
	var libs []string
	for _, s := range wrapped {
		if !slices.Contains(libs, s.library) {
			libs = append(libs, s.library)
		}
	}
	return r.batch.loadLibraries(ctx, libs)
}

// checkClient refuses a client that could deliver a command twice on its
// own, or wait past a call's deadline. A ClusterClient re-sends a pipeline
// whose connection broke (io.EOF, a reset, a read timeout) up to
// MaxRedirects times, and a Client up to MaxRetries times; either re-send
// may run a script again after it ran (once.lua makes that harmless within
// its bound, and this makes it not happen at all).
func checkClient(client redis.UniversalClient) error {
	switch c := client.(type) {
	case *redis.Client:
		o := c.Options()
		if o.MaxRetries > 0 {
			return fmt.Errorf("locks: the Redis client re-sends commands (MaxRetries %d): set MaxRetries to -1", o.MaxRetries)
		}
		if !o.ContextTimeoutEnabled {
			return errors.New("locks: the Redis client ignores call deadlines: set ContextTimeoutEnabled")
		}
	case *redis.ClusterClient:
		o := c.Options()
		if o.MaxRedirects > 0 {
			return fmt.Errorf("locks: the Redis Cluster client re-sends commands (MaxRedirects %d): set MaxRedirects to -1", o.MaxRedirects)
		}
		if o.MaxRetries > 0 {
			return fmt.Errorf("locks: the Redis Cluster client re-sends commands (MaxRetries %d): set MaxRetries to -1", o.MaxRetries)
		}
		if !o.ContextTimeoutEnabled {
			return errors.New("locks: the Redis Cluster client ignores call deadlines: set ContextTimeoutEnabled")
		}
	default:
		return fmt.Errorf("locks: a Redis client of type %T is not supported: use a *redis.Client or a *redis.ClusterClient", client)
	}
	return nil
}

// Senders and pipeline length of the batcher: a few pipelines in flight
// keep a lone call from waiting behind another, and let calls that arrive
// while all are busy share the next write.
const (
	batchSenders = 2
	batchMax     = 128
)

// exec runs one call of script, with call id id, through the batcher,
// bounded by the configured timeout and detached from the caller's
// cancellation: a call cut off half way leaves an unknown outcome (did the
// grant happen?), one that runs to the end does not. It is the one way the
// engine runs a script.
//
// A script that changes state gets once.lua's arguments: the call id, the
// id of an earlier call to fence off (fence, or ”), and how long Redis
// keeps the call's reply. A re-send of the same id (by the engine, to learn
// an outcome it lost) answers what the first run did. A keyed script
// keeps no record: a re-sent call finds its own effect by the ids it
// carries (lua.Script.Keyed).
//
// It is also the one replica barrier. A script that must be acknowledged
// (script.acked: every reply that can tell of a grant, and renewals) is
// followed by a WAIT for RedisOptions.MinReplicas, and ackErr says when
// fewer replicas acknowledged it; the caller must not answer a grant then.
// once.lua writes the call's record last, and replication is one ordered
// stream, so that WAIT covers every write the script saw, whichever
// connection made it: a grant handed over earlier, picked up or replayed
// now, included.
func (r *Backend) exec(ctx context.Context, script *script, id, fence string, keys []string, args ...any) (cmd *redis.Cmd, ackErr error) {
	if script.keyed {
		args = r.keyedArgs(args, id, fence)
	} else if script.once {
		args = r.onceArgs(args, id, fence)
	}
	if !script.writes {
		return r.batch.run(ctx, r.opts.Timeout, script, true, keys, args...), nil
	}
	if script.acked {
		cmd, ackErr = r.batch.runAck(ctx, r.opts.Timeout, script, keys, args...)
	} else {
		cmd = r.batch.run(ctx, r.opts.Timeout, script, false, keys, args...)
	}
	if !r.inlineIndex {
		r.indexDue(ctx, cmd)
	}
	return cmd, ackErr
}

// onceArgs appends once.lua's arguments to args: the call id, the id of an
// earlier call to fence off, and how long Redis keeps the call's reply.
func (r *Backend) onceArgs(args []any, id, fence string) []any {
	return append(args, id, fence, r.arg.callTTL)
}

// keyedArgs appends once.lua's argument of a keyed script (which keeps no
// record, so needs no record's lifetime) to args: the call id alone, or,
// to fence off an earlier call, the call id, that call's id and the
// fence's lifetime, with a space between (call ids have none). Each
// argument costs Redis about 1 400 instructions, and an acquire or a
// release fences nothing off.
func (r *Backend) keyedArgs(args []any, id, fence string) []any {
	if fence == "" {
		return append(args, id)
	}
	return append(args, fmt.Sprintf("%s %s %v", id, fence, r.arg.callTTL))
}

// scriptOpts is the lock scripts' options argument (lua/lib_keys.lua
// lock_keys): lockOpts, then what this gateway's calls send alike, the
// retention, the waiter lease, checkHeard and the waiters' channel.
func (r *Backend) scriptOpts() string {
	return fmt.Sprintf("%s:%v:%v:%v:%v", r.lockOpts, r.arg.retention, r.arg.lease, r.arg.checkHeard, r.arg.channel)
}

// run is exec of a new call.
func (r *Backend) run(ctx context.Context, script *script, keys []string, args ...any) (*redis.Cmd, error) {
	return r.exec(ctx, script, newCallID(), "", keys, args...)
}

// Acquire implements Locker.
func (r *Backend) Acquire(ctx context.Context, key locks.Key, req locks.AcquireRequest) (locks.Grant, error) {
	if err := req.Validate(); err != nil {
		return locks.Grant{}, err
	}
	return r.acquire(ctx, resource{lockKind, key}, req, 0)
}

// acquire takes res, or waits for it: the protocol locks and semaphores
// share. limit is a semaphore's (0 for a lock).
func (r *Backend) acquire(ctx context.Context, res resource, req locks.AcquireRequest, limit int) (locks.Grant, error) {
	token := req.OwnerToken
	if token == "" {
		token = locks.NewToken()
	}
	if req.Wait == 0 {
		start := time.Now()
		rp, err := r.runAcquire(ctx, res, req, limit, token, nil, 0)
		if err != nil {
			return locks.Grant{}, err
		}
		if !rp.granted {
			return locks.Grant{}, res.kind.held(rp)
		}
		return r.deliver(ctx, res, token, rp.lease(start, req.MaxHold), 0, req.Keep)
	}

	w := r.waiters.register(res, locks.TokenHash(token))
	var granted bool
	defer func() { r.waiters.unregister(w, granted) }()
	if err := r.waiters.ready(ctx); err != nil {
		return locks.Grant{}, locks.Unavailable("acquire", res, err)
	}
	deadline := time.Now().Add(req.Wait)
	timeUp := time.NewTimer(req.Wait)
	defer timeUp.Stop()
	holderEnds := time.NewTimer(time.Hour)
	holderEnds.Stop()
	defer holderEnds.Stop()
	for {
		// The deadline comes first: select picks at random among ready
		// cases, and each further script run may take a Redis timeout.
		if !time.Now().Before(deadline) {
			g, err := r.giveUp(ctx, res, w, token, req)
			granted = err == nil
			return g, err
		}
		// Whatever woke us, the answer is the same: ask the script. It
		// grants, picks up a grant handed to us, or (re)queues us in our
		// place.
		start := time.Now()
		rp, err := r.runAcquire(ctx, res, req, limit, token, w, time.Until(deadline))
		if err != nil {
			return locks.Grant{}, err
		}
		if rp.granted {
			g, err := r.deliver(ctx, res, token, rp.lease(start, req.MaxHold), rp.handoffDelay(start), req.Keep)
			granted = err == nil
			return g, err
		}
		asked := time.Now() // the script ran before this
		w.arrival = rp.arrival
		// The end of a lease publishes nothing: the first in line looks
		// again when the (soonest) holder's lease ends. Failing that, the
		// heartbeats of every gateway with waiters hand it on.
		if rp.rank == 0 {
			holderEnds.Reset(max(rp.ttl, time.Millisecond))
		} else {
			holderEnds.Stop()
		}
		select {
		case h := <-w.handed:
			// A release on this gateway handed us the lock in full: its
			// script's reply said so, as our own script would have.
			if h.err != nil { // and the replicas did not acknowledge it
				r.abandon(ctx, res, w.id, locks.TokenHash(token), "")
				return locks.Grant{}, locks.Unavailable("acquire", res, h.err)
			}
			// Unless our script answered before that release was sent, it
			// may have run after it, found the grant ended already (a
			// break ends a full grant at once) and queued us again: taking
			// the grant would leave that place in the queue to our token,
			// for a later hand-off to give it a grant nobody was told of.
			// Only the script can say: ask it again.
			if !asked.Before(h.start) {
				continue
			}
			g, err := r.deliver(ctx, res, token, h.rp.lease(h.start, req.MaxHold), time.Since(h.start), req.Keep)
			granted = err == nil
			return g, err
		case <-w.wake:
		case <-holderEnds.C:
		case <-timeUp.C: // the check above gives up
		case <-ctx.Done():
			r.leave(ctx, res, w.id, token, true) // and release what was handed to us
			return locks.Grant{}, fmt.Errorf("acquire %s: %w", res, ctx.Err())
		}
	}
}

// giveUp ends a wait whose time is up: it leaves the queue, and takes the
// grant if one was handed over as the wait ran out (keep: see deliver).
func (r *Backend) giveUp(ctx context.Context, res resource, w *waiter, token string, req locks.AcquireRequest) (locks.Grant, error) {
	start := time.Now()
	rp, err := r.leave(ctx, res, w.id, token, false)
	if err != nil {
		return locks.Grant{}, err
	}
	if rp.granted {
		return r.deliver(ctx, res, token, rp.lease(start, req.MaxHold), rp.handoffDelay(start), req.Keep)
	}
	return locks.Grant{}, res.kind.held(rp)
}

// runAcquire runs the kind's acquire script; w is nil for an acquire that
// does not wait, and wait is how much longer it waits.
func (r *Backend) runAcquire(ctx context.Context, res resource, req locks.AcquireRequest, limit int, token string, w *waiter, wait time.Duration) (reply, error) {
	a := acquireArgs{tokHash: locks.TokenHash(token), ttl: req.TTL, subject: req.Subject, owner: req.Owner, mode: req.Mode, value: req.Value, minHold: req.MinHold, maxHold: req.MaxHold, limit: limit, priority: req.Priority}
	if w != nil {
		a.waiterID, a.arrival, a.wait = w.id, w.arrival, max(wait, time.Millisecond)
	}
	rp, ackErr, err := r.callAcquire(ctx, res, newCallID(), a)
	return r.acquired(ctx, res, a.waiterID, a.tokHash, rp, ackErr, err)
}

// acquired is the outcome of an acquire script's call (rp, ackErr and err
// as callAcquire returns them) of the token whose hash is tokHash, waiting
// as waiterID ("" for none): its reply, or the error to answer.
func (r *Backend) acquired(ctx context.Context, res resource, waiterID, tokHash string, rp reply, ackErr, err error) (reply, error) {
	if err != nil {
		// The script may have run. An acquire is keyed by its token, which
		// the leave fences off.
		r.abandon(ctx, res, waiterID, tokHash, "")
		return reply{}, locks.Unavailable("acquire", res, err)
	}
	if rp.refused != nil { // nothing changed
		return reply{}, fmt.Errorf("acquire %s: %w", res, rp.refused)
	}
	if rp.granted && ackErr != nil {
		r.abandon(ctx, res, waiterID, tokHash, "") // as for an unknown outcome: leave, release
		return reply{}, locks.Unavailable("acquire", res, ackErr)
	}
	return rp, nil
}

// leave takes a waiter out of the queue. A grant its token holds by then is
// released when release is set, and otherwise picked up and returned. An
// empty waiterID leaves no queue, and only releases.
func (r *Backend) leave(ctx context.Context, res resource, waiterID, token string, release bool) (reply, error) {
	a := leaveArgs{waiterID: waiterID, tokHash: locks.TokenHash(token), release: release}
	id := newCallID()
	rp, ackErr, err := res.kind.callLeave(ctx, r, res.key, id, "", a)
	if err != nil {
		r.abandon(ctx, res, waiterID, a.tokHash, id) // a hand-off may have got there first
		return reply{}, locks.Unavailable("acquire", res, err)
	}
	if rp.granted && ackErr != nil {
		r.abandon(ctx, res, waiterID, a.tokHash, "")
		return reply{}, locks.Unavailable("acquire", res, ackErr)
	}
	return rp, nil
}

// abandon undoes, in the background, what a call whose outcome is unknown
// may have done: it fences off that call (failed, its id), should Redis
// receive it only later, takes the waiter out of the queue, if there is
// one, and releases the grant, if there is one, so that nobody holds a lock
// that no caller knows about. The caller has its answer (503) within the
// Redis timeout meanwhile. If Redis does not answer this either, the
// waiter's heartbeat lapses and the grant's lease ends on their own.
func (r *Backend) abandon(ctx context.Context, res resource, waiterID, tokHash, failed string) {
	r.background(ctx, func(ctx context.Context) {
		res.kind.callLeave(ctx, r, res.key, newCallID(), failed, leaveArgs{waiterID: waiterID, tokHash: tokHash, release: true})
	})
}

// background runs a clean-up that the caller does not wait for; Close
// waits for it. After Close it does not run: the leases and the
// heartbeats' end settle what it would have.
func (r *Backend) background(ctx context.Context, cleanup func(context.Context)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	ctx = context.WithoutCancel(ctx)
	r.cleanups.Go(func() { cleanup(ctx) })
}

// deliver returns the grant, unless the caller has left: then nobody would
// ever release it, so it is released at once; with keep (a call with an
// idempotency key) it is returned even so, for the retry the key's record
// leads to it.
func (r *Backend) deliver(ctx context.Context, res resource, token string, lease locks.Lease, handoffDelay time.Duration, keep bool) (locks.Grant, error) {
	if ctx.Err() != nil && !keep {
		r.release(ctx, res, token, "")
		return locks.Grant{}, fmt.Errorf("acquire %s: %w", res, ctx.Err())
	}
	return locks.Grant{Token: token, Lease: lease, HandoffDelay: handoffDelay, Holds: 1}, nil
}

// heartbeat tells Redis that this process's waiters are alive, in one
// pipeline (one round trip per Redis node, however many locks), and
// returns the ids of the waiters that must run their script again: those
// no longer queued (handed the lock, or dropped), and all those of a lock
// whose heartbeat failed, so that they learn of an outage.
func (r *Backend) heartbeat(ctx context.Context, byRes map[resource][]string) (wake []string) {
	var (
		scripts []*script
		keys    [][]string
		args    [][]any
		ids     [][]string
	)
	for res, resIDs := range byRes {
		b := res.kind.beat(r, res.key, resIDs)
		scripts, keys, args, ids = append(scripts, b.script), append(keys, b.keys), append(args, b.args), append(ids, resIDs)
	}
	for i, cmd := range r.batch.runAll(ctx, r.opts.Timeout, scripts, keys, args) {
		queued, err := cmd.Int64Slice()
		if err != nil || len(queued) != len(ids[i]) {
			wake = append(wake, ids[i]...)
			continue
		}
		for j, q := range queued {
			if q == 0 {
				wake = append(wake, ids[i][j])
			}
		}
	}
	return wake
}

// release runs the kind's release script, and returns what it did.
//
// The script hands the lock on. When the next waiter waits on this gateway,
// the grant is a full one and the reply says so: the waiter gets it from
// here, with no message and no pick-up. When the reply is lost, a heartbeat
// round makes such a waiter ask its own script instead.
func (r *Backend) release(ctx context.Context, res resource, token, hold string) (locks.Released, error) {
	return r.releaseFor(ctx, res, token, hold, "")
}

// releaseFor is release, by the end of the session session when set.
func (r *Backend) releaseFor(ctx context.Context, res resource, token, hold, session string) (locks.Released, error) {
	start := time.Now()
	h := locks.TokenHash(token)
	// The release script may hand the lock in full to a waiter of this
	// gateway, which exec's barrier covers like any grant.
	rp, ackErr, err := res.kind.callRelease(ctx, r, res.key, newCallID(), "", releaseArgs{tokHash: h, hold: hold, session: session,
		member: r.SessionEngine.AtOnce != nil && session == "" && locks.IsSessionGrant(token)})
	if err != nil || rp.repeated {
		// The lock may have gone in full to a waiter here, told in a reply
		// this call did not get: a heartbeat round makes it look.
		r.waiters.requestBeat()
	}
	if err != nil {
		return locks.Released{}, locks.Unavailable("release", res, err)
	}
	if rp.notHolder != nil {
		return locks.Released{}, fmt.Errorf("release %s: %w", res, rp.notHolder)
	}
	rel := locks.Released{Holds: rp.holds}
	if rp.ended {
		rel = locks.EndedAfter(rp.held)
	}
	if rp.near != nil {
		r.handOver(ctx, res, *rp.near, start, ackErr)
	}
	return rel, nil
}

// handOver gives a grant that the release script handed in full to a waiter
// of this gateway to that waiter. A waiter that gave up without the lock
// will never take it: it is released. A waiter that has the lock already
// (its own script picked the grant up first) needs nothing. ackErr says the
// replicas did not acknowledge the release script's writes: the waiter gets
// that instead, and releases the grant.
func (r *Backend) handOver(ctx context.Context, res resource, g nearGrant, start time.Time, ackErr error) {
	if gone, ok := r.waiters.handOver(g.waiterID, handed{rp: g.rp, start: start, err: ackErr}); ok {
		r.abandon(ctx, res, g.waiterID, gone, "")
	}
}

// Release implements Locker.
func (r *Backend) Release(ctx context.Context, key locks.Key, token string) (locks.Released, error) {
	return r.release(ctx, resource{lockKind, key}, token, "")
}

// ReleaseHold implements Locker.
func (r *Backend) ReleaseHold(ctx context.Context, key locks.Key, token, hold string) (locks.Released, error) {
	if err := locks.ValidHold(hold); err != nil {
		return locks.Released{}, err
	}
	return r.release(ctx, resource{lockKind, key}, token, hold)
}

// Reenter implements Locker.
func (r *Backend) Reenter(ctx context.Context, key locks.Key, token string, ttl time.Duration, mode locks.Mode) (locks.Grant, error) {
	if ttl < time.Millisecond {
		return locks.Grant{}, fmt.Errorf("%w: ttl must be at least 1ms", locks.ErrInvalid)
	}
	if locks.IsSessionGrant(token) {
		ttl = time.Millisecond // a hold more, never a lease past the session's
	}
	res := resource{lockKind, key}
	start := time.Now()
	h := locks.TokenHash(token)
	hold, id := locks.NewHoldID(), newCallID()
	rp, ackErr, err := r.callReenter(ctx, key, id, reenterArgs{tokHash: h, ttl: ttl, mode: mode, hold: hold})
	giveBack := func(ctx context.Context) {
		lockKind.callRelease(ctx, r, key, newCallID(), id, releaseArgs{tokHash: h, hold: hold})
	}
	if err != nil {
		// The hold may have been taken: end it, and fence the call off
		// should Redis receive it only now, as an acquire's grant is.
		r.background(ctx, giveBack)
		return locks.Grant{}, locks.Unavailable("re-enter", res, err)
	}
	if rp.granted && ackErr != nil { // taken, and not on the replicas: end it
		giveBack(context.WithoutCancel(ctx))
		return locks.Grant{}, locks.Unavailable("re-enter", res, ackErr)
	}
	switch {
	case rp.otherMode:
		return locks.Grant{}, fmt.Errorf("re-enter %s %s: held in the other mode: %w", res, mode, &locks.HeldError{RetryAfter: rp.retry})
	case rp.notHolder != nil:
		return locks.Grant{}, fmt.Errorf("re-enter %s: %w", res, rp.notHolder)
	}
	return locks.Grant{Token: token, Holds: rp.holds, Hold: hold,
		Lease: locks.Lease{FencingToken: rp.fence, TTL: rp.ttl, ExpiresAt: start.Add(rp.ttl), HoldUntil: holdUntil(start, rp.capLeft)}.WithinHold()}, nil
}

// holdUntil is when a grant's hard cap ends it, capLeft after start (see
// locks.Lease.HoldUntil); zero for a grant without one (capLeft -1).
func holdUntil(start time.Time, capLeft time.Duration) time.Time {
	if capLeft < 0 {
		return time.Time{}
	}
	return start.Add(capLeft)
}

// Renew implements Locker.
func (r *Backend) Renew(ctx context.Context, key locks.Key, token string, ttl time.Duration) (locks.Lease, error) {
	if locks.IsSessionGrant(token) {
		return locks.Lease{}, fmt.Errorf("renew %s: %w", key, locks.ErrSessionGrantRenew)
	}
	return r.renew(ctx, key, token, ttl)
}

// renew is Renew, for a session's grant too (RenewMember).
func (r *Backend) renew(ctx context.Context, key locks.Key, token string, ttl time.Duration) (locks.Lease, error) {
	if err := locks.ValidateRenewTTL(ttl); err != nil {
		return locks.Lease{}, err
	}
	start := time.Now()
	h := locks.TokenHash(token)
	rp, ackErr, err := r.renewFencing(ctx, key, renewArgs{tokHash: h, ttl: ttl}, r.callRenew)
	if err != nil {
		return locks.Lease{}, locks.Unavailable("renew", resource{lockKind, key}, err)
	}
	if rp.notHolder != nil {
		return locks.Lease{}, fmt.Errorf("renew %s: %w", key, rp.notHolder)
	}
	if ackErr != nil {
		return locks.Lease{}, locks.Unavailable("renew", resource{lockKind, key}, locks.Renewed(ackErr))
	}
	return locks.Lease{FencingToken: rp.fence, TTL: rp.ttl, ExpiresAt: start.Add(rp.ttl), Mode: rp.mode, HoldUntil: holdUntil(start, rp.capLeft)}.WithinHold(), nil
}

// renewFencing runs a renew (call), and when Redis's answer is lost, runs
// it once more as a new call that fences the first off (lua/once.lua): a
// renew that reached Redis only after a later renew of the grant was
// answered would cut that answered lease short (#36, finding 5). So a
// renew has either run before its caller is answered, or never runs. Only
// when the second answer is lost too is the caller told that the outcome
// is unknown; then either call may still arrive late (docs/SAFETY.md).
func (r *Backend) renewFencing(ctx context.Context, key locks.Key, a renewArgs,
	call func(context.Context, locks.Key, renewArgs) (renewReply, error, error)) (renewReply, error, error) {
	a.callID = newCallID()
	rp, ackErr, err := call(ctx, key, a)
	if err == nil {
		return rp, ackErr, nil
	}
	a.fence, a.callID = a.callID, newCallID()
	return call(context.WithoutCancel(ctx), key, a)
}

// SetValue implements Valuer.
func (r *Backend) SetValue(ctx context.Context, key locks.Key, token, value string) (int64, error) {
	if err := locks.ValidateValue(value, locks.Exclusive); err != nil {
		return 0, err
	}
	rp, err := r.callValue(ctx, key, locks.TokenHash(token), value)
	switch {
	case err != nil:
		return 0, locks.Unavailable("set the value of", resource{lockKind, key}, err)
	case rp.shared:
		return 0, fmt.Errorf("set the value of %s: %w", key, locks.ErrSharedValue)
	case rp.notHolder != nil:
		return 0, fmt.Errorf("set the value of %s: %w", key, rp.notHolder)
	}
	return rp.fence, nil
}

// Inspect implements Locker.
func (r *Backend) Inspect(ctx context.Context, key locks.Key) (locks.Info, error) {
	info, held, freeAt, err := r.callInspect(ctx, key, time.Now())
	if err != nil {
		return locks.Info{}, locks.Unavailable("inspect", resource{lockKind, key}, err)
	}
	if !held {
		return locks.Info{}, &locks.NotHeldError{Key: key, Index: info.Index, FreeAt: freeAt}
	}
	info.Describe()
	return info, nil
}

// Check implements Backend: every Redis node answers, and none may evict
// keys (see CheckEviction).
func (r *Backend) Check(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	if err := r.client.Ping(cctx).Err(); err != nil {
		return fmt.Errorf("%w: %w", locks.ErrUnavailable, err)
	}
	return r.checkPolicy(cctx)
}

// Close implements Backend: it stops the subscription and the heartbeats,
// and waits for the clean-ups of calls that failed. Waiters still queued
// are dropped by the next hand-off.
func (r *Backend) Close() error {
	r.watches.close()
	r.semPolls.close()
	r.waiters.close()
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cleanups.Wait()
	r.batch.close()
	return nil
}

func millis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
