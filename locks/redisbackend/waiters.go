package redisbackend

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/lockgate/lockgate/locks"

	"github.com/redis/go-redis/v9"
)

// waiters tracks this process's waiting acquirers for the Redis backend. One
// subscription, to this process's own channel, brings the wake-ups for all
// of them; one heartbeat loop keeps their queue entries alive and tells
// which of them to look again. Both start with the first waiter and stop at
// close.
//
// Nothing here decides what a waiter holds. A message, a new subscription,
// a heartbeat's answer or a failed heartbeat all mean the same: run the
// acquire script again, which alone says whether the lock is ours.
type waiters struct {
	client    redis.UniversalClient
	channel   string
	timeout   time.Duration
	lease     time.Duration // how long a waiter lives without a heartbeat
	pickUp    time.Duration // how long a grant handed to a ticket waits for its poll
	heartbeat func(ctx context.Context, byRes map[resource][]string) (wake []string)
	// hint takes a watch's hint (see watchHub.hint), and resubscribed is
	// told of every new subscription, after which hints may have gone
	// unheard; both nil without watches.
	hint         func(payload string)
	resubscribed func()

	mu   sync.Mutex
	byID map[string]*waiter
	// gone are waiters that ended without the lock, by id: the token hash
	// of each, and until when a full hand-off to it may still come back
	// (see handOver).
	gone map[string]goneWaiter
	// watches are the tickets opened here whose hand-off someone wants to
	// hear of (AcquireRequest.Handed), by ticket id: the message for a
	// ticket says nothing but that it was handed the lock.
	watches    map[string]*watch
	started    bool
	subscribed chan struct{} // closed once the first SUBSCRIBE is confirmed
	current    *redis.PubSub // the live subscription, closed to interrupt a read
	beatNow    chan struct{} // asks for a heartbeat round at once
	stop       context.CancelFunc
	done       chan struct{}
}

// waiter is one waiting Acquire.
type waiter struct {
	id      string
	res     resource
	tokHash string        // of its owner token
	wake    chan struct{} // something may have changed: run the script again
	// handed brings the grant a release on this gateway handed to it in
	// full, as the release script's reply said (see Redis.release).
	handed chan handed
	// arrival is the waiter's place in the queue, kept when it rejoins.
	// Only the Acquire that owns the waiter touches it.
	arrival int64
	// ticket marks the long-poll of a ticket: its queue entry is kept
	// alive by its polls, not by heartbeats, and is never handed a grant
	// in full (see lua/ticket.lua).
	ticket bool
}

// handed is a grant the release script handed in full to a waiter of this
// gateway: its reply, and when the release was sent.
type handed struct {
	rp    reply
	start time.Time
	err   error // the replicas did not acknowledge the grant (see Redis.handOver)
}

// goneWaiter is a waiter that ended without the lock.
type goneWaiter struct {
	tokHash string
	until   time.Time
}

func newWaiters(client redis.UniversalClient, channel string, timeout, lease time.Duration,
	heartbeat func(context.Context, map[resource][]string) []string) *waiters {
	return &waiters{
		client:     client,
		channel:    channel,
		timeout:    timeout,
		lease:      lease,
		heartbeat:  heartbeat,
		byID:       make(map[string]*waiter),
		gone:       make(map[string]goneWaiter),
		watches:    make(map[string]*watch),
		subscribed: make(chan struct{}),
		beatNow:    make(chan struct{}, 1),
	}
}

func (ws *waiters) register(res resource, tokHash string) *waiter {
	id := make([]byte, 12)
	rand.Read(id)
	return ws.add(&waiter{
		id:      base64.RawURLEncoding.EncodeToString(id),
		res:     res,
		tokHash: tokHash,
		wake:    make(chan struct{}, 1),
		handed:  make(chan handed, 1),
	})
}

// registerTicket registers the long-poll of the ticket id: hand-off
// messages for the ticket wake it while it lasts.
func (ws *waiters) registerTicket(res resource, id string) *waiter {
	return ws.add(&waiter{id: id, res: res, ticket: true, wake: make(chan struct{}, 1), handed: make(chan handed, 1)})
}

func (ws *waiters) add(w *waiter) *waiter {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.startLocked()
	ws.byID[w.id] = w
	return w
}

// start starts the subscription, for the watches, if no waiter has.
func (ws *waiters) start() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.startLocked()
}

// startLocked starts the subscription and the heartbeats, once. ws.mu
// must be held.
func (ws *waiters) startLocked() {
	if !ws.started {
		ws.started = true
		ctx, cancel := context.WithCancel(context.Background())
		ws.stop, ws.done = cancel, make(chan struct{})
		go ws.run(ctx)
	}
}

// watch is one ticket's Handed, until the ticket's wait is over.
type watch struct {
	handed func(locks.TicketHanded)
	timer  *time.Timer
}

// watchTicket calls handed, once, when a hand-off message for ticket id
// comes within d, with the pick-up time the ticket's grant has from then. It ends earlier with unwatchTicket.
func (ws *waiters) watchTicket(id string, handed func(locks.TicketHanded), d time.Duration) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.startLocked()
	wt := &watch{handed: handed}
	wt.timer = time.AfterFunc(d, func() { ws.endWatch(id, wt) })
	ws.watches[id] = wt
}

// unwatchTicket ends the watch of ticket id, if any.
func (ws *waiters) unwatchTicket(id string) {
	ws.mu.Lock()
	wt := ws.watches[id]
	ws.mu.Unlock()
	if wt != nil {
		ws.endWatch(id, wt)
	}
}

// endWatch removes wt, if it still watches ticket id, and reports whether
// it did: whoever removes it owns its one call.
func (ws *waiters) endWatch(id string, wt *watch) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.watches[id] != wt {
		return false
	}
	delete(ws.watches, id)
	wt.timer.Stop()
	return true
}

// unregister ends w's wait. A waiter that ends without the lock is
// remembered for a while: a release may still hand it the lock in full (one
// that ran before w's last script call, whose reply comes late, or one
// that found w queued again by a call whose outcome was unknown), and that
// grant must then be released, since nobody will take it.
func (ws *waiters) unregister(w *waiter, granted bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.byID[w.id] != w {
		return // a ticket's concurrent long-poll replaced it
	}
	delete(ws.byID, w.id)
	if !granted && !w.ticket {
		ws.gone[w.id] = goneWaiter{tokHash: w.tokHash, until: time.Now().Add(ws.timeout + 2*ws.lease)}
	}
}

// handOver gives h to the waiter id names, and returns false, when it
// still waits; when it gave up without the lock, it returns its token hash
// and true: the grant is the caller's to release. A waiter that got the
// lock (its own script picked h's grant up first) or is unknown needs
// nothing.
func (ws *waiters) handOver(id string, h handed) (tokHash string, release bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w := ws.byID[id]; w != nil {
		select {
		case w.handed <- h:
		default: // one grant per waiter: a second is the same one
		}
		return "", false
	}
	if g, ok := ws.gone[id]; ok {
		delete(ws.gone, id)
		return g.tokHash, true
	}
	return "", false
}

// forget drops the gone waiters past their time.
func (ws *waiters) forget(now time.Time) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for id, g := range ws.gone {
		if now.After(g.until) {
			delete(ws.gone, id)
		}
	}
}

// ready waits until the subscription is in place, so that no hand-off to a
// waiter queued after it can go unheard, for at most the Redis timeout.
func (ws *waiters) ready(ctx context.Context) error {
	t := time.NewTimer(ws.timeout)
	defer t.Stop()
	select {
	case <-ws.subscribed:
		return nil
	case <-t.C:
		return fmt.Errorf("subscribe to hand-offs: %w", locks.ErrNotSent)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// healthCheck is how long the subscription may stay silent before it is
// pinged; a connection silent for two of these is replaced.
const healthCheck = 15 * time.Second

// run keeps one subscription alive until ctx ends, replacing it whenever it
// fails, and sends the heartbeats.
func (ws *waiters) run(ctx context.Context) {
	defer close(ws.done)
	var beats sync.WaitGroup
	beats.Go(func() { ws.beat(ctx) })
	defer beats.Wait()
	var once sync.Once
	for {
		ws.subscribe(ctx, func() { once.Do(func() { close(ws.subscribed) }) })
		select { // Redis is down or the connection died: try again soon
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// subscribe serves one subscription until it fails or ctx ends.
func (ws *waiters) subscribe(ctx context.Context, confirmed func()) {
	ps := ws.client.Subscribe(ctx, ws.channel)
	defer ps.Close()
	ws.mu.Lock()
	ws.current = ps
	ws.mu.Unlock()
	if ctx.Err() != nil { // closed before the subscription was published
		return
	}
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(ctx, healthCheck)
		if err != nil {
			var timeout interface{ Timeout() bool }
			if pinged || !errors.As(err, &timeout) || !timeout.Timeout() {
				return
			}
			pinged = true
			ps.Ping(ctx) // an answer proves the connection is alive
			continue
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Subscription:
			confirmed()
			// Wake-ups may have gone unheard while there was no
			// subscription. One heartbeat round finds the waiters they
			// were for, instead of every waiter running its script.
			ws.requestBeat()
			if ws.resubscribed != nil {
				ws.resubscribed()
			}
		case *redis.Message:
			if ws.hint != nil && strings.HasPrefix(m.Payload, watchHint+" ") {
				ws.hint(m.Payload)
				continue
			}
			ws.wakeUp(m.Payload)
		}
	}
}

// wakeUp wakes the waiter a message names. The message's first word is the
// waiter id; whatever else it says is ignored (gateways of older versions
// send more), since the waiter's script run finds out what happened.
func (ws *waiters) wakeUp(payload string) {
	id, _, _ := strings.Cut(payload, " ")
	ws.mu.Lock()
	w, wt := ws.byID[id], ws.watches[id]
	ws.mu.Unlock()
	if w != nil {
		w.poke()
	}
	if wt != nil && ws.endWatch(id, wt) {
		go wt.handed(locks.TicketHanded{ID: id, PickUpBy: time.Now().Add(ws.pickUp)})
	}
}

// poke asks w to run its script again; wake-ups that pile up count as one.
func (w *waiter) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (ws *waiters) requestBeat() {
	select {
	case ws.beatNow <- struct{}{}:
	default:
	}
}

// beat sends a heartbeat round every third of the waiter lease, or at once
// when asked, and wakes the waiters it names.
func (ws *waiters) beat(ctx context.Context) {
	t := time.NewTicker(ws.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			ws.forget(now)
		case <-ws.beatNow:
		}
		byRes := make(map[resource][]string)
		ws.mu.Lock()
		for id, w := range ws.byID {
			if !w.ticket { // its polls keep it alive
				byRes[w.res] = append(byRes[w.res], id)
			}
		}
		ws.mu.Unlock()
		if len(byRes) == 0 {
			continue
		}
		wake := ws.heartbeat(ctx, byRes)
		ws.mu.Lock()
		for _, id := range wake {
			if w := ws.byID[id]; w != nil {
				w.poke()
			}
		}
		ws.mu.Unlock()
	}
}

func (ws *waiters) close() {
	ws.mu.Lock()
	stop, done, current := ws.stop, ws.done, ws.current
	ws.started = true // no new subscription after close
	ws.mu.Unlock()
	if stop == nil {
		return
	}
	stop()
	if current != nil {
		current.Close() // a blocked read does not watch ctx
	}
	<-done
}
