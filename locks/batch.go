package locks

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// batcher sends the script calls that arrive together in one pipeline: one
// write and one read for many calls, where each call on its own costs the
// gateway and Redis a write and a read (issue 10: the write syscall to
// Redis alone was a sixth of the gateway's CPU).
//
// A few senders take calls from one queue. An idle sender takes the first
// call at once, so a lone call waits for nobody; while every sender has a
// pipeline in flight, calls queue, and the next free sender takes all of
// them. Each call keeps its own bound: it carries the deadline of its
// Redis timeout, a sender drops (without sending) what has passed its
// deadline by the time it is taken, and a pipeline is bounded by the
// earliest deadline in it. Calls queue behind pipelines sent before them,
// whose deadlines come no later than theirs, so no call waits much longer
// than its own timeout. A call cut off by its deadline, or by an error,
// may have run: the caller treats it as it treated any failed call, with a
// 503 and a clean-up. Nothing is retried here, but a NOSCRIPT error, which
// says the script did not run: those calls are sent again, as EVAL.
//
// go-redis's AutoPipeliner (v9.23, experimental) does the same grouping,
// but a command's context no longer bounds it once queued, it has retry
// paths of its own, and it is tens of thousands of lines: the rules above
// are easier to keep, and to read, in this file.
type batcher struct {
	client  redis.UniversalClient
	senders int
	max     int // calls in one pipeline, at most

	mu      sync.RWMutex
	started bool
	closed  bool
	queue   chan *call
	done    sync.WaitGroup
}

// call is one script call on its way through the batcher.
type call struct {
	ctx      context.Context // values only: the caller's cancellation does not reach here
	script   *redis.Script
	ro       bool // EVALSHA_RO / EVAL_RO
	keys     []string
	args     []any
	deadline time.Time
	cmd      *redis.Cmd
	err      error         // set instead of cmd when the call was never sent
	done     chan struct{} // closed when cmd or err is set
}

// errClosed answers calls made after Close.
var errClosed = errors.New("backend closed")

func newBatcher(client redis.UniversalClient, senders, max int) *batcher {
	return &batcher{client: client, senders: senders, max: max}
}

// run sends one call of script and waits for its answer, at most until
// timeout has passed (and the little it takes a sender to see that).
func (b *batcher) run(ctx context.Context, timeout time.Duration, script *redis.Script, ro bool, keys []string, args ...any) *redis.Cmd {
	c := &call{ctx: context.WithoutCancel(ctx), script: script, ro: ro, keys: keys, args: args,
		deadline: time.Now().Add(timeout), done: make(chan struct{})}
	if err := b.submit(c); err != nil {
		c.err = err
	} else {
		<-c.done
	}
	if c.err != nil {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(c.err)
		return cmd
	}
	return c.cmd
}

func (b *batcher) submit(c *call) error {
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return errClosed
	}
	if !b.started {
		b.mu.RUnlock()
		b.start()
		b.mu.RLock()
		if b.closed {
			b.mu.RUnlock()
			return errClosed
		}
	}
	defer b.mu.RUnlock()
	select {
	case b.queue <- c:
		return nil
	default:
	}
	// Full: every sender is busy and thousands wait. Wait for room, not
	// past the call's deadline.
	t := time.NewTimer(time.Until(c.deadline))
	defer t.Stop()
	select {
	case b.queue <- c:
		return nil
	case <-t.C:
		return context.DeadlineExceeded
	}
}

// start starts the senders with the first call, so that a backend never
// used runs none.
func (b *batcher) start() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started || b.closed {
		return
	}
	b.started = true
	b.queue = make(chan *call, 64*b.max)
	for range b.senders {
		b.done.Go(b.send)
	}
}

// close stops the senders once the calls queued are answered. Calls made
// after it fail at once.
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	if b.started {
		close(b.queue)
	}
	b.mu.Unlock()
	b.done.Wait()
}

// send is one sender: it takes whatever has queued, and sends it.
func (b *batcher) send() {
	batch := make([]*call, 0, b.max)
	for first := range b.queue {
		batch = append(batch[:0], first)
	more:
		for len(batch) < b.max {
			select {
			case c, ok := <-b.queue:
				if !ok {
					break more
				}
				batch = append(batch, c)
			default:
				break more
			}
		}
		b.exec(batch)
		clear(batch)
	}
}

// exec sends batch in one pipeline, bounded by the earliest deadline in it.
func (b *batcher) exec(batch []*call) {
	now := time.Now()
	live := batch[:0:0]
	var earliest time.Time
	for _, c := range batch {
		if !c.deadline.After(now) { // waited its whole timeout in the queue: never sent
			c.err = context.DeadlineExceeded
			close(c.done)
			continue
		}
		if live == nil {
			live = make([]*call, 0, len(batch))
		}
		live = append(live, c)
		if earliest.IsZero() || c.deadline.Before(earliest) {
			earliest = c.deadline
		}
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithDeadline(live[0].ctx, earliest)
	defer cancel()
	b.pipeline(ctx, live, false)
	var noScript []*call
	for _, c := range live {
		if redis.HasErrorPrefix(c.cmd.Err(), "NOSCRIPT") {
			noScript = append(noScript, c)
		}
	}
	if len(noScript) > 0 { // Redis lost its script cache: EVAL, which loads it
		b.pipeline(ctx, noScript, true)
	}
	for _, c := range live {
		close(c.done)
	}
}

// pipeline sends calls in one pipeline, as EVALSHA or, with source, EVAL.
// Errors stay with each call's command.
func (b *batcher) pipeline(ctx context.Context, calls []*call, source bool) {
	pipe := b.client.Pipeline()
	for _, c := range calls {
		switch {
		case source && c.ro:
			c.cmd = c.script.EvalRO(ctx, pipe, c.keys, c.args...)
		case source:
			c.cmd = c.script.Eval(ctx, pipe, c.keys, c.args...)
		case c.ro:
			c.cmd = c.script.EvalShaRO(ctx, pipe, c.keys, c.args...)
		default:
			c.cmd = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
		}
	}
	pipe.Exec(ctx) // errors are read per command
}
