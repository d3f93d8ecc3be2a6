package redisbackend

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockgate/lockgate/locks"

	"github.com/redis/go-redis/v9"
)

// batcher sends the script calls that arrive together in one pipeline: one
// write and one read for many calls, where each call on its own costs the
// gateway and Redis a write and a read (the write syscall to
// Redis alone was a sixth of the gateway's CPU).
//
// At most senders pipelines are in flight, one per lane. A call that
// finds a lane free and no call queued sends itself, from its caller's
// goroutine: a lone call waits for nobody, and costs no hand-over to
// another goroutine and back, which on a machine of few cores meant
// waking a sleeping thread twice per call. While every lane is busy,
// calls queue, and a sender goroutine takes all of them into the next
// pipeline as soon as a lane is free; it waits for its lane ahead of any
// caller, so a queued call is never overtaken by one that came later. Each call keeps its own bound: it carries the deadline of its
// Redis timeout, a sender drops (without sending) what has passed its
// deadline by the time it is taken, and a pipeline is bounded by the
// earliest deadline in it. Calls queue behind pipelines sent before them,
// whose deadlines come no later than theirs, so no call waits much longer
// than its own timeout. A call cut off by its deadline, or by an error,
// may have run: the caller treats it as it treated any failed call, with a
// 503 and a clean-up. Nothing is retried here but a call whose error says
// that it did not run (see notRun), which is sent again.
//
// A call is an FCALL of the script's function (FCALL_RO for one that does
// not write): Redis defined the libraries the scripts share once, when it
// loaded the function, where an EVALSHA defines them again on every call.
// A node that lacks the function (new, restarted without persistence,
// flushed, or a replica promoted before the library reached it) answers
// that it has none, and did not run the call: the batcher loads the
// function's library on every master and sends the call again, and what
// still finds no function goes as EVAL, which needs nothing loaded. A
// Redis that refuses functions (older than 7, or an ACL that denies FCALL
// or FUNCTION LOAD) gets EVALSHA from then on, with EVAL on NOSCRIPT.
//
// With replicas set (the gateway's --redis-min-replicas), a pipeline that
// holds a call sent with ack ends with one WAIT: it covers every write sent
// before it on the pipeline's connection, so one answer serves every such
// call in the pipeline (see acked). On Redis Cluster a keyless WAIT would go
// to any master, so there the calls are grouped by their key's master and
// each group goes down that node's connection, its WAIT after it: a call
// whose slot moved meanwhile gets its MOVED reply (the script did not run),
// and goes once more to the node it names (see followMoved).
//
// go-redis's AutoPipeliner (v9.23, experimental) does the same grouping,
// but a command's context no longer bounds it once queued, it has retry
// paths of its own, and it is tens of thousands of lines: the rules above
// are easier to keep, and to read, in this file.
type batcher struct {
	client  redis.UniversalClient
	senders int
	max     int // calls in one pipeline, at most
	// replicas, when above 0, is how many replicas must acknowledge the
	// writes of a call sent with ack, within replicaTimeout.
	replicas       int
	replicaTimeout time.Duration

	// noFunctions: Redis refused a function call or load, and calls go
	// as EVALSHA (see notRun).
	noFunctions atomic.Bool

	mu      sync.RWMutex
	started bool
	closed  bool
	queue   chan *call
	lanes   chan struct{} // a token per pipeline in flight
	done    sync.WaitGroup
}

// call is one script call on its way through the batcher.
type call struct {
	ctx      context.Context // values only: the caller's cancellation does not reach here
	script   *script
	ro       bool // EVALSHA_RO / EVAL_RO
	ack      bool // WAIT for replicas after it
	keys     []string
	args     []any
	deadline time.Time
	cmd      *redis.Cmd
	acks     *redis.IntCmd // the WAIT that followed it, for a call with ack
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
func (b *batcher) run(ctx context.Context, timeout time.Duration, script *script, ro bool, keys []string, args ...any) *redis.Cmd {
	return b.do(ctx, timeout, script, ro, false, keys, args).result(ctx)
}

// runAck is run for a call whose writes the replicas must acknowledge (a
// grant): the error says when fewer did than asked, and is nil when the
// batcher asks for none. The script ran either way: the caller decides
// what its reply is worth.
func (b *batcher) runAck(ctx context.Context, timeout time.Duration, script *script, keys []string, args ...any) (*redis.Cmd, error) {
	c := b.do(ctx, timeout, script, false, b.replicas > 0, keys, args)
	return c.result(ctx), b.acked(c)
}

func (b *batcher) do(ctx context.Context, timeout time.Duration, script *script, ro, ack bool, keys []string, args []any) *call {
	c := &call{ctx: context.WithoutCancel(ctx), script: script, ro: ro, ack: ack, keys: keys, args: args,
		deadline: time.Now().Add(timeout), done: make(chan struct{})}
	inline, err := b.submit(c)
	switch {
	case err != nil:
		c.err = err
	case inline: // a lane of its own: send it from here
		b.exec([]*call{c})
		<-b.lanes
		b.done.Done()
	default:
		<-c.done
	}
	return c
}

// runAll sends script calls, each with its keys and args, in one pipeline
// of their own, past the queue and the lanes (the heartbeat's, which must
// not wait behind the calls it keeps alive), and returns their commands in
// order. They are sent as exec sends any, and sent again as it does when
// Redis did not run them.
func (b *batcher) runAll(ctx context.Context, timeout time.Duration, scripts []*script, keys [][]string, args [][]any) []*redis.Cmd {
	deadline := time.Now().Add(timeout)
	calls := make([]*call, len(scripts))
	for i, s := range scripts {
		calls[i] = &call{ctx: context.WithoutCancel(ctx), script: s, keys: keys[i], args: args[i], deadline: deadline, done: make(chan struct{})}
	}
	b.exec(calls)
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = c.result(ctx)
	}
	return cmds
}

// result is the call's command, or one that carries why it was not sent.
func (c *call) result(ctx context.Context) *redis.Cmd {
	if c.err != nil {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(c.err)
		return cmd
	}
	return c.cmd
}

// acked says whether replicas acknowledged the writes of c, sent with ack.
func (b *batcher) acked(c *call) error {
	if !c.ack {
		return nil
	}
	if c.acks == nil { // never sent, or no node to send it to
		return &locks.ReplicaError{Want: b.replicas, Err: errNotSent}
	}
	n, err := c.acks.Result()
	if err != nil {
		return &locks.ReplicaError{Want: b.replicas, Err: err}
	}
	if n < int64(b.replicas) {
		return &locks.ReplicaError{Acked: int(n), Want: b.replicas}
	}
	return nil
}

// wait queues WAIT replicas replicaTimeout on pipe (go-redis's Pipeliner
// has no Wait method).
func (b *batcher) wait(ctx context.Context, pipe redis.Pipeliner) *redis.IntCmd {
	cmd := redis.NewIntCmd(ctx, "wait", b.replicas, b.replicaTimeout.Milliseconds())
	pipe.Process(ctx, cmd) // queues it: errors come with Exec
	return cmd
}

// errNotSent is why a call's WAIT has no answer when the call was never sent.
var errNotSent = errors.New("not sent")

// submit queues c, or reports that c has a lane of its own (inline), which
// the caller must give back once it has sent c (see do).
func (b *batcher) submit(c *call) (inline bool, err error) {
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return false, errClosed
	}
	if !b.started {
		b.mu.RUnlock()
		b.start()
		b.mu.RLock()
		if b.closed {
			b.mu.RUnlock()
			return false, errClosed
		}
	}
	defer b.mu.RUnlock()
	if len(b.queue) == 0 {
		select {
		case b.lanes <- struct{}{}:
			b.done.Add(1) // close waits for it as for a sender
			return true, nil
		default:
		}
	}
	select {
	case b.queue <- c:
		return false, nil
	default:
	}
	// Full: every sender is busy and thousands wait. Wait for room, not
	// past the call's deadline.
	t := time.NewTimer(time.Until(c.deadline))
	defer t.Stop()
	select {
	case b.queue <- c:
		return false, nil
	case <-t.C:
		return false, context.DeadlineExceeded
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
	b.lanes = make(chan struct{}, b.senders)
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
		b.lanes <- struct{}{} // ahead of any caller: see batcher
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
		<-b.lanes
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
	how := viaFunction
	if b.noFunctions.Load() {
		how = viaSHA
	}
	b.pipeline(ctx, live, how)
	todo := b.notRun(live, how)
	if len(todo) > 0 && how == viaFunction && b.loadFunctions(ctx, todo) {
		b.pipeline(ctx, todo, viaFunction)
		todo = b.notRun(todo, viaFunction)
	}
	if len(todo) > 0 { // EVAL, which needs nothing loaded, and loads the script
		b.pipeline(ctx, todo, viaSource)
	}
	for _, c := range live {
		close(c.done)
	}
}

// via is how a call names its script to Redis.
type via int

const (
	viaFunction via = iota // FCALL, FCALL_RO
	viaSHA                 // EVALSHA, EVALSHA_RO
	viaSource              // EVAL, EVAL_RO
)

// notRun returns the calls, sent how, whose error says that Redis did not
// run them, so that sending them again cannot run a script twice: it had
// no such function or script, or refused the command before it ran (an
// older Redis does not know FCALL, an ACL may deny it). A refusal turns
// functions off.
func (b *batcher) notRun(calls []*call, how via) []*call {
	var todo []*call
	for _, c := range calls {
		err := c.cmd.Err()
		switch {
		case err == nil:
		case how == viaSHA && redis.HasErrorPrefix(err, "NOSCRIPT"):
			todo = append(todo, c)
		case how == viaFunction && redis.HasErrorPrefix(err, "Function not found"):
			todo = append(todo, c)
		case how == viaFunction && refused(err):
			b.noFunctions.Store(true)
			todo = append(todo, c)
		}
	}
	return todo
}

// refused says that Redis refused a function command before running it:
// it does not know it (older than 7), or an ACL denies it. (HasErrorPrefix
// looks past an "ERR ".)
func refused(err error) bool {
	return redis.HasErrorPrefix(err, "unknown command") || redis.HasErrorPrefix(err, "NOPERM")
}

// loadFunctions loads the libraries of the calls' scripts on every master,
// and says whether they are there now. A refusal turns functions off.
func (b *batcher) loadFunctions(ctx context.Context, calls []*call) bool {
	var libs []string
	for _, c := range calls {
		if !slices.Contains(libs, c.script.library) {
			libs = append(libs, c.script.library)
		}
	}
	return b.loadLibraries(ctx, libs) == nil
}

// loadLibraries loads libs on every master. A refusal turns functions off.
func (b *batcher) loadLibraries(ctx context.Context, libs []string) error {
	if b.noFunctions.Load() {
		return errFunctionsOff
	}
	load := func(ctx context.Context, node redis.Cmdable) error {
		pipe := node.Pipeline()
		cmds := make([]*redis.StringCmd, len(libs))
		for i, lib := range libs {
			cmds[i] = pipe.FunctionLoad(ctx, lib)
		}
		pipe.Exec(ctx) // errors are read per command
		for _, cmd := range cmds {
			if err := cmd.Err(); err != nil && !strings.HasSuffix(err.Error(), "already exists") {
				return err
			}
		}
		return nil
	}
	var err error
	if cc, ok := b.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return load(ctx, node) })
	} else {
		err = load(ctx, b.client)
	}
	if err != nil && refused(err) {
		b.noFunctions.Store(true)
	}
	return err
}

// errFunctionsOff: Redis refused functions before, and calls go as EVALSHA.
var errFunctionsOff = errors.New("functions refused by Redis: scripts go as EVALSHA")

// pipeline sends calls in one pipeline, how says as what, and a WAIT
// after them when one has ack. Errors stay with each call's command.
func (b *batcher) pipeline(ctx context.Context, calls []*call, how via) {
	cc, cluster := b.client.(*redis.ClusterClient)
	if cluster && b.replicas > 0 {
		b.pipelineByNode(ctx, cc, calls, how)
	} else {
		b.pipelineOn(ctx, b.client, calls, how)
	}
	if cluster {
		b.followMoved(ctx, cc, calls, how)
	}
}

// followMoved sends each call that Redis answered MOVED once more, to the
// node the reply names. A node answers MOVED before it runs anything (the
// slot is not its own), so this is the script's first run, never its
// second. It spares callers a 503 while the client's slot map is behind
// the cluster's after a reshard: go-redis reloads the map from one node,
// which may not have heard of the move yet, and then waits 200 ms before
// it reloads again. An ASK is not followed: the slot is half moved, and a
// script, which names the lock's other keys itself, may find some on each
// side (it stops before it writes, and the caller gets a 503).
func (b *batcher) followMoved(ctx context.Context, cc *redis.ClusterClient, calls []*call, how via) {
	var byAddr map[string][]*call
	for _, c := range calls {
		if addr, moved := redis.IsMovedError(c.cmd.Err()); moved {
			if byAddr == nil {
				byAddr = make(map[string][]*call)
			}
			byAddr[addr] = append(byAddr[addr], c)
		}
	}
	if byAddr == nil {
		return
	}
	var mu sync.Mutex
	nodes := make(map[string]*redis.Client, len(byAddr))
	// The node named is one of the masters the client knows: only the
	// slot's owner changed.
	_ = cc.ForEachMaster(ctx, func(_ context.Context, node *redis.Client) error {
		if addr := node.Options().Addr; byAddr[addr] != nil {
			mu.Lock()
			nodes[addr] = node
			mu.Unlock()
		}
		return nil
	})
	for addr, group := range byAddr {
		if node := nodes[addr]; node != nil {
			b.pipelineOn(ctx, node, group, how)
		}
	}
}

// pipelineByNode sends each master's calls down that master's connection
// (see batcher).
func (b *batcher) pipelineByNode(ctx context.Context, cc *redis.ClusterClient, calls []*call, how via) {
	groups := make(map[*redis.Client][]*call)
	for _, c := range calls {
		node, err := cc.MasterForKey(ctx, c.keys[0])
		if err != nil {
			c.cmd = redis.NewCmd(ctx)
			c.cmd.SetErr(err)
			continue
		}
		groups[node] = append(groups[node], c)
	}
	var wg sync.WaitGroup
	for node, group := range groups {
		wg.Go(func() { b.pipelineOn(ctx, node, group, how) })
	}
	wg.Wait()
	for _, c := range calls {
		err := c.cmd.Err()
		_, moved := redis.IsMovedError(err)
		_, ask := redis.IsAskError(err)
		if moved || ask {
			cc.ReloadState(ctx)
			return
		}
	}
}

func (b *batcher) pipelineOn(ctx context.Context, client redis.Cmdable, calls []*call, how via) {
	pipe := client.Pipeline()
	for _, c := range calls {
		switch {
		case how == viaFunction && c.ro:
			c.cmd = pipe.FCallRO(ctx, c.script.function, c.keys, c.args...)
		case how == viaFunction:
			c.cmd = pipe.FCall(ctx, c.script.function, c.keys, c.args...)
		case how == viaSource && c.ro:
			c.cmd = c.script.EvalRO(ctx, pipe, c.keys, c.args...)
		case how == viaSource:
			c.cmd = c.script.Eval(ctx, pipe, c.keys, c.args...)
		case c.ro:
			c.cmd = c.script.EvalShaRO(ctx, pipe, c.keys, c.args...)
		default:
			c.cmd = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
		}
	}
	var wait *redis.IntCmd
	for _, c := range calls {
		if c.ack {
			if wait == nil {
				wait = b.wait(ctx, pipe)
			}
			c.acks = wait
		}
	}
	pipe.Exec(ctx) // errors are read per command
}
