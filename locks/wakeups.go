package locks

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// wakeups wakes waiting acquirers when a release anywhere publishes the name
// of their lock. One subscription per process serves every waiter: it starts
// with the first waiter and lives until Close.
type wakeups struct {
	client  redis.UniversalClient
	channel string
	timeout time.Duration

	mu         sync.Mutex
	waiters    map[string]map[chan struct{}]struct{} // lock name -> waiters
	started    bool
	current    *redis.PubSub // the live subscription, closed to interrupt a read
	subscribed chan struct{} // closed once the first SUBSCRIBE is confirmed
	stop       context.CancelFunc
	done       chan struct{}
}

func newWakeups(client redis.UniversalClient, channel string, timeout time.Duration) *wakeups {
	return &wakeups{
		client:     client,
		channel:    channel,
		timeout:    timeout,
		waiters:    make(map[string]map[chan struct{}]struct{}),
		subscribed: make(chan struct{}),
	}
}

// register returns a channel that receives a value whenever lock may have
// been released, and a function to stop listening.
func (w *wakeups) register(lock string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started {
		w.started = true
		ctx, cancel := context.WithCancel(context.Background())
		w.stop, w.done = cancel, make(chan struct{})
		go w.run(ctx)
	}
	if w.waiters[lock] == nil {
		w.waiters[lock] = make(map[chan struct{}]struct{})
	}
	w.waiters[lock][ch] = struct{}{}
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.waiters[lock], ch)
		if len(w.waiters[lock]) == 0 {
			delete(w.waiters, lock)
		}
	}
}

// ready waits until the subscription is in place, so that no release after
// it can go unnoticed, for at most the Redis timeout.
func (w *wakeups) ready(ctx context.Context) error {
	t := time.NewTimer(w.timeout)
	defer t.Stop()
	select {
	case <-w.subscribed:
		return nil
	case <-t.C:
		return errors.New("subscribe to wake-ups: timed out")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// healthCheck is how long the subscription may stay silent before it is
// pinged; a connection silent for two of these is replaced.
const healthCheck = 15 * time.Second

// run keeps one subscription alive until ctx ends, replacing it whenever it
// fails. Each new subscription wakes every waiter, because releases may have
// gone unheard while there was none.
func (w *wakeups) run(ctx context.Context) {
	defer close(w.done)
	var once sync.Once
	for {
		w.subscribe(ctx, func() { once.Do(func() { close(w.subscribed) }) })
		select { // Redis is down or the connection died: try again soon
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// subscribe serves one subscription until it fails or ctx ends.
func (w *wakeups) subscribe(ctx context.Context, confirmed func()) {
	ps := w.client.Subscribe(ctx, w.channel)
	defer ps.Close()
	w.mu.Lock()
	w.current = ps
	w.mu.Unlock()
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
			w.wakeAll()
		case *redis.Message:
			w.wake(m.Payload)
		}
	}
}

func (w *wakeups) wake(lock string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.waiters[lock] {
		notify(ch)
	}
}

func (w *wakeups) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, chans := range w.waiters {
		for ch := range chans {
			notify(ch)
		}
	}
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default: // already has a wake-up pending
	}
}

func (w *wakeups) close() {
	w.mu.Lock()
	stop, done, current := w.stop, w.done, w.current
	w.started = true // no new subscription after Close
	w.mu.Unlock()
	if stop == nil {
		return
	}
	stop()
	if current != nil {
		current.Close() // a blocked read does not watch ctx
	}
	<-done
}
