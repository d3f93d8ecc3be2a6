package locks

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// waiters tracks this process's waiting acquirers for the Redis backend. One
// subscription, to this process's own channel, brings the hand-off messages
// for all of them; one heartbeat loop keeps their queue entries alive. Both
// start with the first waiter and stop at close.
type waiters struct {
	client    redis.UniversalClient
	channel   string
	timeout   time.Duration
	lease     time.Duration // how long a waiter lives without a heartbeat
	heartbeat func(ctx context.Context, key Key, ids []string)

	mu         sync.Mutex
	byID       map[string]*waiter
	started    bool
	subscribed chan struct{} // closed once the first SUBSCRIBE is confirmed
	current    *redis.PubSub // the live subscription, closed to interrupt a read
	stop       context.CancelFunc
	done       chan struct{}
}

// waiter is one waiting Acquire.
type waiter struct {
	id     string
	key    Key
	handed chan handoff  // the lock was handed to this waiter
	woken  chan struct{} // hand-offs may have been missed: look again
}

// handoff is the message a release publishes to the waiter's gateway.
type handoff struct {
	fence int64
	ttl   int64 // ms
	now   int64 // ms on the Redis clock, when the lease began
}

func newWaiters(client redis.UniversalClient, channel string, timeout, lease time.Duration,
	heartbeat func(context.Context, Key, []string)) *waiters {
	return &waiters{
		client:     client,
		channel:    channel,
		timeout:    timeout,
		lease:      lease,
		heartbeat:  heartbeat,
		byID:       make(map[string]*waiter),
		subscribed: make(chan struct{}),
	}
}

func (ws *waiters) register(key Key) *waiter {
	id := make([]byte, 12)
	rand.Read(id)
	w := &waiter{
		id:     base64.RawURLEncoding.EncodeToString(id),
		key:    key,
		handed: make(chan handoff, 1),
		woken:  make(chan struct{}, 1),
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if !ws.started {
		ws.started = true
		ctx, cancel := context.WithCancel(context.Background())
		ws.stop, ws.done = cancel, make(chan struct{})
		go ws.run(ctx)
	}
	ws.byID[w.id] = w
	return w
}

func (ws *waiters) unregister(w *waiter) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	delete(ws.byID, w.id)
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
		return errors.New("subscribe to hand-offs: timed out")
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

// subscribe serves one subscription until it fails or ctx ends. Each new
// subscription wakes every waiter: hand-offs may have gone unheard while
// there was none.
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
			ws.wakeAll()
		case *redis.Message:
			ws.deliver(m.Payload)
		}
	}
}

// deliver passes a hand-off message "<waiter id> <fence> <ttl ms> <now ms>"
// to its waiter. A message for a waiter that already left is dropped: the
// waiter's leave found the grant, or will.
func (ws *waiters) deliver(payload string) {
	f := strings.Fields(payload)
	if len(f) != 4 {
		return
	}
	var h handoff
	var errs [3]error
	h.fence, errs[0] = strconv.ParseInt(f[1], 10, 64)
	h.ttl, errs[1] = strconv.ParseInt(f[2], 10, 64)
	h.now, errs[2] = strconv.ParseInt(f[3], 10, 64)
	if errors.Join(errs[:]...) != nil {
		return
	}
	ws.mu.Lock()
	w := ws.byID[f[0]]
	ws.mu.Unlock()
	if w != nil {
		select {
		case w.handed <- h:
		default: // one hand-off per waiter: a second cannot happen
		}
	}
}

func (ws *waiters) wakeAll() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, w := range ws.byID {
		select {
		case w.woken <- struct{}{}:
		default: // already has a wake-up pending
		}
	}
}

// beat sends, every third of the waiter lease, one heartbeat per lock that
// has waiters in this process.
func (ws *waiters) beat(ctx context.Context) {
	t := time.NewTicker(ws.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		byKey := make(map[Key][]string)
		ws.mu.Lock()
		for id, w := range ws.byID {
			byKey[w.key] = append(byKey[w.key], id)
		}
		ws.mu.Unlock()
		for key, ids := range byKey {
			ws.heartbeat(ctx, key, ids)
		}
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
