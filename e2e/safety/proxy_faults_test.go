package safety

import (
	"bytes"
	"sync"
	"sync/atomic"
)

// faultKind is what the proxy does to a command that a fault matches.
type faultKind int

const (
	// loseReply delivers the command to Redis, which runs it, and cuts the
	// connection (both sides) where its reply would reach the gateway: the
	// replies before it arrive, it and those after it never do.
	loseReply faultKind = iota
	// sendTwice delivers the command to Redis twice in a row, and only the
	// first reply to the gateway, as a network or client that re-sends a
	// command does.
	sendTwice
)

func (k faultKind) String() string { return [...]string{"lose reply", "send twice"}[k] }

// fault is one armed fault of a proxy: it applies to the next commands
// (on connections other than subscriptions) that match accepts, as many
// times as it has left.
type fault struct {
	kind  faultKind
	match matcher
	mu    sync.Mutex // guards left, which the proxy's lock also guards but for giveBack
	left  int        // matches still to fault; below 0: no limit
	fired atomic.Int64
}

// giveBack undoes one application of f, to a command that did not run.
func (f *fault) giveBack() {
	f.mu.Lock()
	if f.left >= 0 {
		f.left++
	}
	f.mu.Unlock()
	f.fired.Add(-1)
}

// count is how many commands the fault has applied to so far.
func (f *fault) count() int { return int(f.fired.Load()) }

// addFault arms a fault for the next n commands that match accepts (n < 0:
// all of them, until removed).
func (p *proxy) addFault(kind faultKind, match matcher, n int) *fault {
	f := &fault{kind: kind, match: match, left: n}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = append(p.faults, f)
	return f
}

// faultFor returns the fault that applies to the command with args, and
// counts it; nil when none does.
func (p *proxy) faultFor(v []byte) *fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.faults) == 0 {
		return nil
	}
	args := commandArgs(v)
	if args == nil {
		return nil
	}
	for _, f := range p.faults {
		f.mu.Lock()
		apply := f.left != 0 && f.match(args)
		if apply && f.left > 0 {
			f.left--
		}
		f.mu.Unlock()
		if apply {
			f.fired.Add(1)
			return f
		}
	}
	return nil
}

// replies is the bookkeeping that lets the two directions of one
// connection agree on which reply answers which command: commands are
// counted as they go to Redis, replies as they come back.
type replies struct {
	mu      sync.Mutex
	sent    int            // commands delivered to Redis so far
	faulted map[int]*fault // the first reply of each faulted command
	swallow map[int]bool   // replies not to deliver (of a duplicated command)
}

// deliver records one command on its way to Redis, faulted as f says (f
// may be nil), and returns how many times to send it.
func (q *replies) deliver(f *fault) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	times := 1
	if f != nil {
		if q.faulted == nil {
			q.faulted, q.swallow = make(map[int]*fault), make(map[int]bool)
		}
		q.faulted[q.sent] = f
		if f.kind == sendTwice {
			q.swallow[q.sent+1] = true
			times = 2
		}
	}
	q.sent += times
	return times
}

// noScript and noFunction start the reply to a script call that did not
// run: Redis did not have the script, or the function, and the client
// sends it again once it is loaded, or with its source.
var noScript, noFunction = []byte("-NOSCRIPT"), []byte("-ERR Function not found")

// reply says what to do with reply number n, v: cut the connection, or
// swallow it (false, false: deliver it). A fault whose command did not run
// (NOSCRIPT, no such function) is given back, for the command that follows
// it.
func (q *replies) reply(n int, v []byte) (cut, swallow bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if f := q.faulted[n]; f != nil {
		delete(q.faulted, n)
		if bytes.HasPrefix(v, noScript) || bytes.HasPrefix(v, noFunction) {
			f.giveBack()
			return false, false
		}
		return f.kind == loseReply, false
	}
	if q.swallow[n] {
		delete(q.swallow, n)
		return false, true
	}
	return false, false
}

// removeFaults disarms every fault.
func (p *proxy) removeFaults() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = nil
}
