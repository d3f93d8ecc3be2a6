package redisbackend

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// The watches of the Redis backend cost Redis one read (lua/watch.lua) per
// change of a watched lock per gateway, however many watchers it has:
//
//   - A gateway notes in the lock's watch registry that it watches the
//     lock (lua/watching.lua), before its first read, and renews that
//     while it does.
//   - Every script that records an event sends each gateway in the
//     registry one hint on its own channel (lua/lib_history.lua
//     push_events): the new index, nothing more.
//   - A hint for an index the gateway has not seen makes it read the
//     events after the one it has, and the lock's holders, once; hints
//     that come during that read make one more read after it. Every
//     watcher of the lock is answered from that read.
//   - A lease that ends publishes nothing until a script records that it
//     expired: the gateway reads at the soonest lease's end, and its read
//     records it, and hints the other gateways.
//   - A new subscription (after an outage) may have missed hints: every
//     watched lock is read again then.
//
// Nothing here decides anything: a hint, a timer or a new subscription
// only makes the gateway read again.
const (
	// watchKeep is how long the registry counts a gateway as watching
	// after its last renewal, sent every third of it: a gateway that dies
	// is sent hints for at most that long.
	watchKeep = 30 * time.Second
	// watchLinger is how long a watched lock stays watched after its last
	// watcher left: a long-poll asks again right after its answer, and
	// finds the lock's state here, with no read.
	watchLinger = 10 * time.Second
	// watchRetry is how soon a read that failed is tried again.
	watchRetry = time.Second
)

// watchHub holds the locks this gateway's watchers watch.
type watchHub struct {
	r     *Backend
	reads atomic.Uint64 // runs of watch.lua

	mu      sync.Mutex
	locks   map[string]*watchedLock // by the lock's key in Redis
	started bool
	closed  bool
	stop    context.CancelFunc
	done    chan struct{}
	again   chan struct{} // renew every registration now: Redis may have lost them
	running sync.WaitGroup
}

// watchedLock is one watched lock: what the last read of it said, shared by
// all its watchers. Its fields are guarded by the hub's mu.
type watchedLock struct {
	key   locks.Key
	rkey  string
	users int       // watchers now
	idle  time.Time // when the last of them left

	read   bool // a read has answered
	index  int64
	kept   []locks.Event // the last events, oldest first, as many as the history keeps
	first  bool          // kept begins with the history's first event (see locks.ChangeAfter)
	held   bool
	info   locks.Info
	err    error         // the last read failed
	change chan struct{} // closed, and replaced, when a read changes the index
	// readAt is when the last read that answered was sent; merged is
	// closed, and replaced, when a read ends, whatever it found or
	// whether it failed: a watcher ahead of this gateway waits for a read
	// sent after it came.
	readAt time.Time
	merged chan struct{}

	// reading: a read runs; again: read once more after it, whatever it
	// finds; hinted: the highest index a hint named, read after it unless
	// it found that index.
	reading, again bool
	hinted         int64
	readFrom       time.Time   // when the running read was sent
	errFrom        time.Time   // when the read that failed, err, was sent
	leaseEnd       time.Time   // of the soonest lease, when held
	timer          *time.Timer // reads again at leaseEnd, or after a failed read
	gone           bool        // dropped from the hub
}

func newWatchHub(r *Backend) *watchHub {
	return &watchHub{r: r, locks: make(map[string]*watchedLock), again: make(chan struct{}, 1)}
}

// Watch implements Watcher.
func (r *Backend) Watch(ctx context.Context, key locks.Key, after int64) (locks.Change, error) {
	if r.opts.History <= 0 {
		return locks.Change{}, locks.ErrWatchesOff
	}
	h := r.watches
	w, err := h.join(ctx, key)
	if err != nil {
		return locks.Change{}, locks.Unavailable("watch", resource{lockKind, key}, err)
	}
	defer h.leave(w)
	called := time.Now()
	for {
		h.mu.Lock()
		if !w.read && w.err != nil {
			err := w.err
			h.mu.Unlock()
			return locks.Change{}, locks.Unavailable("watch", resource{lockKind, key}, err)
		}
		// A watcher that has seen an index this gateway has not (another
		// gateway's answer, a plain GET's Lockgate-Index), or that comes
		// after the soonest lease the gateway knows of has ended, is
		// answered from a read sent after it came, not from an older one:
		// the hint of the change may not have reached this gateway yet, or
		// been lost, and the read at the lease's end may have failed (a
		// stream showed a lease that had ended 5 s before, held, with a
		// Redis paused and replies lost meanwhile).
		ahead := w.read && !w.readAt.After(called) && ctx.Err() == nil && !w.gone &&
			(after > w.index || !w.leaseEnd.IsZero() && called.After(w.leaseEnd))
		if ahead && w.err != nil && !w.errFrom.Before(called) {
			// The read sent for it failed: what it knows is older than it,
			// and it is answered that the state is unknown, not that
			// (TestRedisWatchAfterTheLeaseEndIsNotAnsweredByAFailedRead).
			err := w.err
			h.mu.Unlock()
			return locks.Change{}, locks.Unavailable("watch", resource{lockKind, key}, err)
		}
		if ahead && !(w.reading && !w.readFrom.Before(called)) {
			w.again = true // a read sent after the watcher came
			h.readLocked(w)
		}
		if !ahead && w.read && (w.index != after || after < 0 || ctx.Err() != nil || w.gone) {
			err := ctx.Err()
			if err == nil && w.gone && w.index == after {
				err = locks.Unavailable("watch", resource{lockKind, key}, errors.New("the backend is closing"))
			}
			c := locks.ChangeAfter(after, w.index, w.kept, w.first, w.held, aged(w.info, time.Now()))
			c.Events = slices.Clone(c.Events)
			h.mu.Unlock()
			return c, err
		}
		change, merged := w.change, w.merged
		h.mu.Unlock()
		if !ahead {
			merged = nil // any read, for a watcher ahead; a change, for the others
		}
		select {
		case <-change:
		case <-merged:
		case <-ctx.Done():
			h.mu.Lock() // w's fields are h.mu's
			read := w.read
			h.mu.Unlock()
			if !read {
				// No read answered: nothing is known of the lock, not
				// even its state at after.
				return locks.Change{}, locks.Unavailable("watch", resource{lockKind, key}, ctx.Err())
			}
		}
	}
}

// aged is info with its leases counted down to now.
func aged(info locks.Info, now time.Time) locks.Info {
	if len(info.Holders) == 0 {
		return info
	}
	info.Holders = slices.Clone(info.Holders)
	for i := range info.Holders {
		info.Holders[i].TTL = max(info.Holders[i].ExpiresAt.Sub(now), 0)
	}
	info.Describe()
	return info
}

// Join adds a watcher of key: the lock is watched, registered and read,
// if it was not yet. Joining a watched lock needs no call: a watcher whose
// ctx has ended (a long-poll's wait of a millisecond) still gets the state
// the hub knows.
func (h *watchHub) join(ctx context.Context, key locks.Key) (*watchedLock, error) {
	if err := h.start(); err != nil {
		return nil, err
	}
	rkey := h.r.lockKeys(key).lock
	if w := h.joinWatched(rkey); w != nil {
		return w, nil
	}
	if err := h.r.waiters.ready(ctx); err != nil {
		return nil, err
	}
	h.mu.Lock()
	if w := h.locks[rkey]; w != nil { // another joined it meanwhile
		w.users++
		h.mu.Unlock()
		return w, nil
	}
	w := &watchedLock{key: key, rkey: rkey, users: 1, change: make(chan struct{}), merged: make(chan struct{})}
	h.locks[rkey] = w
	h.mu.Unlock()
	// Registered before the first read: an event after that read sends
	// its hint here.
	if err := h.r.callWatching(ctx, key, watchKeep); err != nil {
		h.mu.Lock()
		w.err = err
		h.dropLocked(w)
		h.mu.Unlock()
		return nil, err
	}
	h.refresh(w)
	return w, nil
}

// joinWatched adds a watcher of the lock rkey names, if it is watched.
func (h *watchHub) joinWatched(rkey string) *watchedLock {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.locks[rkey]
	if w != nil {
		w.users++
	}
	return w
}

// leave ends a watcher of w.
func (h *watchHub) leave(w *watchedLock) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.users--; w.users == 0 {
		w.idle = time.Now()
		if w.err != nil && !w.read {
			h.dropLocked(w) // never read: nothing to keep
		}
	}
}

// dropLocked forgets w, and wakes whoever still waits on it. h.mu must be
// held.
func (h *watchHub) dropLocked(w *watchedLock) {
	if h.locks[w.rkey] == w {
		delete(h.locks, w.rkey)
	}
	w.gone = true
	if w.timer != nil {
		w.timer.Stop()
	}
	close(w.change)
	w.change = make(chan struct{})
}

// refresh reads w again, now or, when a read is running, once more after
// it: hints that come during a read cost one read between them.
func (h *watchHub) refresh(w *watchedLock) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w.again = true
	h.readLocked(w)
}

// hinted reads w again for a hint of index: after a running read only
// if that read did not find it.
func (h *watchHub) hinted(w *watchedLock, index int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if index < w.index {
		w.again = true // the history began again
	}
	w.hinted = max(w.hinted, index)
	h.readLocked(w)
}

// readLocked starts a read of w unless one runs. h.mu must be held.
func (h *watchHub) readLocked(w *watchedLock) {
	if w.gone || h.closed || w.reading {
		return
	}
	w.reading = true
	h.running.Go(func() { h.readLoop(w) })
}

func (h *watchHub) readLoop(w *watchedLock) {
	for {
		h.mu.Lock()
		after := w.index
		if !w.read {
			after = 0
		}
		w.again = false
		start := time.Now()
		w.readFrom = start
		h.mu.Unlock()
		rp, err := h.r.callWatch(context.Background(), w.key, after, start)
		took := time.Since(start)
		h.reads.Add(1)
		h.mu.Lock()
		h.merge(w, rp, err, took)
		if w.gone || h.closed || !w.again && (w.hinted <= w.index || w.err != nil) {
			w.reading = false
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
	}
}

// merge takes in a read of w, which took took: the events after the index
// it had, the holders now. h.mu must be held.
func (h *watchHub) merge(w *watchedLock, rp watchReply, err error, took time.Duration) {
	if w.timer != nil {
		w.timer.Stop()
	}
	close(w.merged)
	w.merged = make(chan struct{})
	if err != nil {
		// Not a read: readAt stays the last that answered, and a watcher
		// that came before this one was sent learns it failed (Watch).
		w.err, w.errFrom = err, w.readFrom
		if !w.read {
			close(w.change) // its watchers learn of the failure
			w.change = make(chan struct{})
		}
		w.timer = time.AfterFunc(watchRetry, func() { h.refresh(w) })
		return
	}
	w.err, w.readAt = nil, w.readFrom
	if !w.read || rp.index < w.index || (len(rp.events) > 0 && rp.events[0].Index != w.index+1) {
		// The first read, a history begun again (its index below, or its
		// events above the next), or more events than it keeps.
		w.kept = rp.events
	} else {
		w.kept = append(w.kept, rp.events...)
	}
	if n := h.r.opts.History; len(w.kept) > n {
		w.kept = slices.Clone(w.kept[len(w.kept)-n:])
	}
	changed := !w.read || rp.index != w.index
	// Redis kept the same last events as w.kept now: whether the oldest
	// is the first is its to say.
	w.read, w.index, w.first, w.held, w.info = true, rp.index, rp.first, rp.held, rp.info
	w.leaseEnd = time.Time{}
	if rp.held {
		// The soonest lease's end: a read then records its expiry, and
		// hints the other gateways that watch.
		// ExpiresAt counts from the read's start, so it is the earliest the
		// lease can end; the timer waits for the latest, a read's round
		// trip later: a read before the lease ended at Redis would find it
		// held, and cost a second read (both gateways of TestWatchStreams
		// read 9 times for 8 changes now and then).
		w.leaseEnd = rp.info.Holders[0].ExpiresAt.Add(took)
		w.timer = time.AfterFunc(time.Until(w.leaseEnd)+2*time.Millisecond, func() { h.leaseEnded(w) })
	}
	if changed {
		close(w.change)
		w.change = make(chan struct{})
	}
}

// leaseEnded reads w at its soonest lease's end, unless a read since has
// found that lease renewed or ended already, or one sent after that end
// runs: it records the expiry, or finds it recorded (a hint from the
// gateway whose timer fired first often starts it).
func (h *watchHub) leaseEnded(w *watchedLock) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.leaseEnd.IsZero() || time.Now().Before(w.leaseEnd) || w.reading && !w.readFrom.Before(w.leaseEnd) {
		return
	}
	w.again = true
	h.readLocked(w)
}

// hint takes a hint, "watch <lock key> <index>": a watched lock whose
// index this gateway has not seen is read again.
func (h *watchHub) hint(payload string) {
	rest := strings.TrimPrefix(payload, watchHint+" ")
	sp := strings.LastIndexByte(rest, ' ')
	if sp < 0 {
		return
	}
	index, err := strconv.ParseInt(rest[sp+1:], 10, 64)
	if err != nil {
		return
	}
	h.mu.Lock()
	w := h.locks[rest[:sp]]
	seen := w == nil || w.read && w.err == nil && w.index == index
	h.mu.Unlock()
	if !seen {
		h.hinted(w, index)
	}
}

// resubscribed follows a new subscription: hints may have gone unheard
// meanwhile, and Redis may have lost the registrations.
func (h *watchHub) resubscribed() {
	select {
	case h.again <- struct{}{}:
	default:
	}
}

// start starts the subscription and the renewals of the registrations.
func (h *watchHub) start() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return errors.New("the backend is closed")
	}
	if !h.started {
		h.started = true
		ctx, cancel := context.WithCancel(context.Background())
		h.stop, h.done = cancel, make(chan struct{})
		go h.run(ctx)
	}
	h.r.waiters.start()
	return nil
}

// run renews the registrations every third of watchKeep, drops the locks
// nobody watched for watchLinger, and after a new subscription reads every
// watched lock again.
func (h *watchHub) run(ctx context.Context) {
	defer close(h.done)
	t := time.NewTicker(watchKeep / 3)
	defer t.Stop()
	for {
		readAll := false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.again:
			readAll = true
		}
		now := time.Now()
		var renew, drop []*watchedLock
		h.mu.Lock()
		for _, w := range h.locks {
			if w.users == 0 && now.Sub(w.idle) > watchLinger {
				h.dropLocked(w)
				drop = append(drop, w)
			} else if w.read || w.err != nil {
				renew = append(renew, w)
			}
		}
		h.mu.Unlock()
		for _, w := range drop {
			h.r.callWatching(ctx, w.key, 0)
		}
		for _, w := range renew {
			h.r.callWatching(ctx, w.key, watchKeep)
			if readAll {
				h.refresh(w)
			}
		}
	}
}

// close stops the hub: watchers waiting get the state they have.
func (h *watchHub) close() {
	h.mu.Lock()
	h.closed = true
	stop, done := h.stop, h.done
	for _, w := range h.locks {
		h.dropLocked(w)
	}
	h.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	h.running.Wait()
}

// WatchReads returns how many times this backend has read a watched lock
// (lua/watch.lua): once per change per watched lock, whatever the number
// of watchers.
func (r *Backend) WatchReads() uint64 { return r.watches.reads.Load() }
