package safety

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The fault matrix's watch row (TestFaultMatrix): watchers of the round's
// locks, through event streams that they drop and resume (Last-Event-ID)
// on any gateway, or long-polls that pass on the index they got. A watch
// is a view of the history the other rows make, so it is checked against
// what their clients saw (P20):
//   - in a stream, each event's id is one more than the one before it (or
//     than the Last-Event-ID it resumed from): no duplicate, no gap, but
//     after a state event that says missed; a stream opened fresh begins
//     with a state event, a resumed one never sends one that does not say
//     missed;
//   - a long-poll's index never goes back, and a long-poll does not answer
//     its own index before its wait ran out, but for index 0, which
//     answers at once;
//   - no event contradicts a grant's own calls: an acquired or handed_over
//     event of a grant not after its 201, no event of a grant's lease
//     after a 204 freed it, no released, expired or broken event while the
//     grant was certainly held (see grantRec.end, which breaks cut); and no
//     state shows a holder that a 204 freed watchLag before the watch was
//     called.
//
// A failover may lose events, and the numbers go on from an older index:
// what a watcher saw around one is excused (faulty.calm).

// watchLag is how far behind the lock a watch's state may be. A gateway
// answers its watchers from its last read of the lock, which a hint (or a
// lease's end) makes it take: a new watch of a lock the gateway watches
// already gets that read at once, which the hint of a later change, or the
// read it makes, may not have reached yet. The proxies delay each by up to
// 900 ms, Redis may be paused (600 ms), and a failed read is tried again
// after a second (watchRetry).
const watchLag = 2*900*time.Millisecond + 600*time.Millisecond + time.Second

// clockSlack covers the history's timestamps (Redis's clock, whole
// milliseconds) against the test's clock on the same host.
const clockSlack = 5 * time.Millisecond

// watchLog is what a round's watchers saw.
type watchLog struct {
	mu     sync.Mutex
	conns  []*watchConn
	polls  [][]watchPoll // one sequence per watcher's cycle
	events int
}

// watchConn is one event stream.
type watchConn struct {
	lock    string
	gateway int    // the index of the round's gateway it called
	base    string // that gateway's URL then (a restarted one has another)
	after   int64  // the Last-Event-ID it sent; -1: none
	call    time.Time
	status  int
	events  []watchEvent
}

// before describes the events c got before its i-th (from 0), the last
// few of them.
func (c *watchConn) before(i int) string {
	if i == 0 {
		return "nothing"
	}
	var out []string
	for _, e := range c.events[max(0, i-4):i] {
		out = append(out, fmt.Sprintf("%s %d (%s)", e.kind, e.id, stamp(e.recv)))
	}
	if i > 4 {
		return fmt.Sprintf("%d events, the last %s", i, strings.Join(out, ", "))
	}
	return strings.Join(out, ", ")
}

// watchEvent is one server-sent event, as received.
type watchEvent struct {
	kind string
	id   int64
	recv time.Time
	data watchData
}

// watchData is a LockEvent, or a state event's data.
type watchData struct {
	At           time.Time `json:"at"`
	FencingToken int64     `json:"fencing_token"`
	Index        int64     `json:"index"`
	Missed       bool      `json:"missed"`
	Held         bool      `json:"held"`
	Lock         *holders  `json:"lock"`
}

// holders is what a LockInfo says of its holders.
type holders struct {
	Holders []struct {
		FencingToken int64     `json:"fencing_token"`
		ExpiresAt    time.Time `json:"expires_at"`
		TTLMs        int64     `json:"ttl_ms"`
	} `json:"holders"`
}

// lease says what h says of the lease of the grant of fence: when a
// watcher's state was read, if it came from a read before that lease's
// end (its TTL counted down to 0 since).
func (h *holders) lease(fence int64) string {
	if h == nil {
		return "no holders"
	}
	for _, x := range h.Holders {
		if x.FencingToken == fence {
			return fmt.Sprintf("a lease to %s (ttl_ms %d)", stamp(x.ExpiresAt), x.TTLMs)
		}
	}
	return "no such holder"
}

func (h *holders) fences() []int64 {
	if h == nil {
		return nil
	}
	var fs []int64
	for _, x := range h.Holders {
		fs = append(fs, x.FencingToken)
	}
	return fs
}

// watchPoll is one long-poll.
type watchPoll struct {
	lock      string
	index     int64 // the index it sent
	wait      time.Duration
	call, ret time.Time
	status    int
	got       int64 // Lockgate-Index
	held      []int64
}

func watchCycle(ctx context.Context, w *worker, lock string) {
	until := time.Now().Add(time.Duration(1000+w.rng.IntN(2000)) * time.Millisecond)
	if w.rng.IntN(3) == 0 {
		w.longPolls(ctx, lock, until)
		return
	}
	last := int64(-1)
	for time.Now().Before(until) && ctx.Err() == nil {
		gi := w.rng.IntN(len(w.round.clients))
		c := w.round.clients[gi]() // resumes anywhere
		conn := c.stream(ctx, lock, last, time.Duration(200+w.rng.IntN(1000))*time.Millisecond)
		conn.gateway, conn.base = gi, c.base
		w.round.watches.mu.Lock()
		w.round.watches.conns = append(w.round.watches.conns, conn)
		w.round.watches.events += len(conn.events)
		w.round.watches.mu.Unlock()
		if n := len(conn.events); n > 0 {
			last = conn.events[n-1].id
		}
		if conn.status != http.StatusOK {
			time.Sleep(time.Duration(20+w.rng.IntN(80)) * time.Millisecond) // a client backs off
		}
	}
}

// stream reads lock's event stream, resuming after last unless it is -1,
// for at most d.
func (c *client) stream(ctx context.Context, lock string, last int64, d time.Duration) *watchConn {
	conn := &watchConn{lock: lock, after: last, call: time.Now()}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/locks/"+lock, nil)
	if err != nil {
		return conn
	}
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("Accept", "text/event-stream")
	if last >= 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return conn
	}
	defer resp.Body.Close()
	conn.status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		return conn
	}
	sc := bufio.NewScanner(resp.Body)
	var e watchEvent
	var data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if e.kind != "" {
				e.recv = time.Now()
				if err := json.Unmarshal([]byte(data), &e.data); err == nil {
					conn.events = append(conn.events, e)
				}
			}
			e, data = watchEvent{}, ""
		case strings.HasPrefix(line, "event: "):
			e.kind = line[len("event: "):]
		case strings.HasPrefix(line, "id: "):
			e.id, _ = strconv.ParseInt(line[len("id: "):], 10, 64)
		case strings.HasPrefix(line, "data: "):
			data = line[len("data: "):]
		}
	}
	return conn
}

// longPolls long-polls lock until until, passing on the index each answer
// gives.
func (w *worker) longPolls(ctx context.Context, lock string, until time.Time) {
	var seq []watchPoll
	defer func() {
		w.round.watches.mu.Lock()
		w.round.watches.polls = append(w.round.watches.polls, seq)
		w.round.watches.events += len(seq)
		w.round.watches.mu.Unlock()
	}()
	index := int64(0)
	for time.Now().Before(until) && ctx.Err() == nil {
		p := watchPoll{lock: lock, index: index, wait: time.Duration(100+w.rng.IntN(700)) * time.Millisecond, call: time.Now()}
		r := w.client().do(ctx, "GET", fmt.Sprintf("/locks/%s?index=%d&wait=%dms", lock, index, p.wait.Milliseconds()), "")
		p.ret, p.status = time.Now(), r.status
		got, err := strconv.ParseInt(r.header.Get("Lockgate-Index"), 10, 64)
		if r.err != nil || err != nil || (r.status != http.StatusOK && r.status != http.StatusNotFound) {
			time.Sleep(time.Duration(20+w.rng.IntN(80)) * time.Millisecond) // a client backs off
			continue
		}
		p.got = got
		if r.status == http.StatusOK {
			var h holders
			json.Unmarshal(r.body, &h)
			p.held = h.fences()
		}
		seq = append(seq, p)
		index = got
	}
}

// watchFindings returns what the watchers saw that contradicts the
// round's history; add excuses what it should (see roundState.findings).
func (rs *roundState) watchFindings(f *faulty, add func(roundNote)) {
	grants := make(map[string]map[int64]*grantRec)
	for _, g := range rs.locks.grants {
		if grants[g.lock] == nil {
			grants[g.lock] = make(map[int64]*grantRec)
		}
		grants[g.lock][g.fence] = g
	}
	// freedBefore reports whether a 204 freed the grant of fence before t.
	freedBefore := func(lock string, fence int64, t time.Time) (*grantRec, bool) {
		g := grants[lock][fence]
		return g, g != nil && !g.freed.IsZero() && f.trusted(g.freed) && g.freed.Before(t)
	}
	watchNote := func(lock string, from, to time.Time, format string, args ...any) {
		add(roundNote{f: finding{kind: answerWrong, lock: lock, prim: "watch", from: from, to: to, msg: lock + ": " + fmt.Sprintf(format, args...)}, unlessLost: true})
	}
	for _, c := range rs.watches.conns {
		prev := c.after
		for i, e := range c.events {
			if e.kind == "state" {
				switch {
				case e.id != e.data.Index:
					watchNote(c.lock, c.call, e.recv, "a state event of a stream called at %s has id %d and index %d", stamp(c.call), e.id, e.data.Index)
				case !e.data.Missed && (c.after >= 0 || i > 0):
					watchNote(c.lock, c.call, e.recv, "a stream called at %s (Last-Event-ID %d) sent, after id %d, a state event %d that does not say missed", stamp(c.call), c.after, prev, e.id)
				}
				for _, fence := range e.data.Lock.fences() {
					if g, ok := freedBefore(c.lock, fence, c.call.Add(-watchLag)); ok {
						// What explains it, next time: where the state
						// came from (a gateway's read before the lease's
						// end shows that lease, its TTL counted down to
						// 0), what the stream got before it, and the
						// faults since the 204.
						watchNote(c.lock, g.freed, e.recv, "a stream called at %s showed grant %d held (state %d), which a 204 freed at %s, more than %v before; "+
							"the stream (gateway %d at %s, Last-Event-ID %d) got it as its event %d of %d, at %s, after %s; it gave the grant %s; "+
							"the grant (%s) was answered 201 at %s, its release called at %s; faults from 2 s before the 204 to the event: %s",
							stamp(c.call), fence, e.id, stamp(g.freed), watchLag,
							c.gateway, c.base, c.after, i+1, len(c.events), stamp(e.recv), c.before(i), e.data.Lock.lease(fence),
							g.prim, stamp(g.acquired.ret), stamp(g.releaseCall), f.faultsBetween(g.freed.Add(-2*time.Second), e.recv))
					}
				}
				prev = e.id
				continue
			}
			switch {
			case prev < 0:
				watchNote(c.lock, c.call, e.recv, "a stream called at %s without Last-Event-ID began with event %s %d, not a state event", stamp(c.call), e.kind, e.id)
			case e.id <= prev:
				watchNote(c.lock, c.call, e.recv, "a stream called at %s (Last-Event-ID %d) sent event %s %d after id %d: a duplicate", stamp(c.call), c.after, e.kind, e.id, prev)
			case e.id > prev+1 && prev != 0:
				// After 0 (no event seen), a history's first event is
				// numbered from the clock (see locks.Watcher): the
				// gateway says whether events came before it.
				watchNote(c.lock, c.call, e.recv, "a stream called at %s (Last-Event-ID %d) sent event %s %d after id %d: a gap, and no missed state", stamp(c.call), c.after, e.kind, e.id, prev)
			}
			prev = e.id
			fence, at := e.data.FencingToken, e.data.At
			g := grants[c.lock][fence]
			if fence == 0 || g == nil {
				continue // a waiter's, or a grant no client was told of
			}
			switch e.kind {
			case "acquired", "handed_over":
				if at.After(g.acquired.ret.Add(clockSlack)) {
					watchNote(c.lock, at, e.recv, "event %s %d says grant %d (%s) was made at %s, after its 201 answered at %s", e.kind, e.id, fence, g.prim, stamp(at), stamp(g.acquired.ret))
				}
			case "released", "expired", "broken":
				if at.After(g.acquired.ret.Add(clockSlack)) && at.Before(g.end().Add(-clockSlack)) {
					watchNote(c.lock, at, e.recv, "event %s %d says grant %d (%s) ended at %s, while it was certainly held [%s, %s]", e.kind, e.id, fence, g.prim, stamp(at), stamp(g.acquired.ret), stamp(g.end()))
				}
				continue
			}
			if _, ok := freedBefore(c.lock, fence, at.Add(-clockSlack)); ok {
				watchNote(c.lock, g.freed, e.recv, "event %s %d of grant %d (%s) at %s, after a 204 freed it at %s", e.kind, e.id, fence, g.prim, stamp(at), stamp(g.freed))
			}
		}
	}
	for _, seq := range rs.watches.polls {
		for i, p := range seq {
			if i > 0 && p.got < seq[i-1].got {
				watchNote(p.lock, seq[i-1].call, p.ret, "a long-poll called at %s answered index %d, below the %d of the one before it", stamp(p.call), p.got, seq[i-1].got)
			}
			// Index 0 ("nothing seen yet") answers at once, even for a lock
			// no event was recorded for yet, whose index is 0 too (the
			// spec; #38): the round's first polls of a lock nobody has
			// taken yet found it so ("a long-poll with index 0 ... answered
			// that index ..., before its wait ran out", 13 in a row).
			if p.got == p.index && p.index != 0 && p.ret.Before(p.call.Add(p.wait-10*time.Millisecond)) {
				watchNote(p.lock, p.call, p.ret, "a long-poll with index %d called at %s answered that index at %s, before its wait (%v) ran out", p.index, stamp(p.call), stamp(p.ret), p.wait)
			}
			for _, fence := range p.held {
				if g, ok := freedBefore(p.lock, fence, p.call.Add(-watchLag)); ok {
					watchNote(p.lock, g.freed, p.ret, "a long-poll called at %s showed grant %d held, which a 204 freed at %s, more than %v before", stamp(p.call), fence, stamp(g.freed), watchLag)
				}
			}
		}
	}
}

// TestWatchFindingSaysWhereTheStateCameFrom: the finding of a state that
// shows a grant a 204 freed long before says what explains it: the
// stream's gateway, what it got before, the lease the state gave the
// grant (a gateway's read from before that lease's end shows it counted
// down to 0) and the faults since the 204.
func TestWatchFindingSaysWhereTheStateCameFrom(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 20, 17, 41, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	g := &grantRec{lock: "m0/lock-a", fence: 7, prim: "exclusive", acquired: op{ret: at(450)}, releaseCall: at(1000), freed: at(1030)}
	rs := &roundState{locks: &history{grants: []*grantRec{g}}}
	var state watchData
	if err := json.Unmarshal([]byte(`{"index":5,"missed":false,"held":true,"lock":{"holders":[{"fencing_token":7,"expires_at":"2026-12-06T20:17:42.500Z","ttl_ms":0}]}}`), &state); err != nil {
		t.Fatal(err)
	}
	call := at(4790)
	rs.watches.conns = []*watchConn{{lock: g.lock, gateway: 2, base: "http://127.0.0.1:1", after: -1, call: call, status: http.StatusOK,
		events: []watchEvent{{kind: "state", id: 5, recv: at(4800), data: state}}}}
	f := &faulty{}
	f.timeline = []faultNote{
		{from: at(-5000), to: at(-5000), what: "long before"},
		{from: at(1100), to: at(1600), what: "migrated the slot of m0/lock-a"},
	}
	var got []string
	rs.watchFindings(f, func(n roundNote) { got = append(got, n.f.msg) })
	if len(got) != 1 {
		t.Fatalf("got %d findings %q, want 1", len(got), got)
	}
	for _, want := range []string{
		"showed grant 7 held (state 5), which a 204 freed at 20:17:42.030000",
		"gateway 2 at http://127.0.0.1:1",
		"its event 1 of 1",
		"after nothing",
		"a lease to 20:17:42.500000 (ttl_ms 0)",
		"the grant (exclusive) was answered 201 at 20:17:41.450000",
		"20:17:42.100000-20:17:42.600000 migrated the slot of m0/lock-a",
	} {
		if !strings.Contains(got[0], want) {
			t.Errorf("got finding %q, want it to say %q", got[0], want)
		}
	}
	if strings.Contains(got[0], "long before") {
		t.Errorf("got finding %q, want no fault from before the 204's 2 s", got[0])
	}
}
