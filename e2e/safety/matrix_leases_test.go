package safety

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/internal/redistest"
)

// The fault matrix's lease check (TestFaultMatrix): every answer that
// states a lease (an acquire's, a re-entry's, a renewal's, a ticket's
// grant, a lock set's and its renewal's, a session's grant and each grant
// a keep-alive lists as renewed, a semaphore's permit) is checked against
// Redis right after it came back: Redis must hold the answered grant (its
// owner token's hash, with its fencing token) until at least the answered
// expires_at, less leaseTolerance. Another client taking the lock inside
// that lease would show such a cut only by luck; this sees it every time.
//
// A lease may still end early, for a reason the answer could not know of:
//   - a break of the lock (the breaker row) that may have run after the
//     answer's call began: one answered before it began was seen by the
//     answer's script, which caps the lease at the break period's end
//     (lua/renew.lua), so it excuses nothing; one of unknown outcome may
//     run up to lateRun after its call (ranBy);
// Nothing else may end a grant before its lease: its holder makes no other
// call until the check has read Redis, and no one else's call can (gateway
// kills, lost replies, doubled commands, delays, pauses, slot migrations
// included). Not a failover either: with --redis-min-replicas every call
// that answers a lease (acquire, renew, a keep-alive's renewals) waits
// for the replica to acknowledge its write, and answers 503 when it does
// not, so the promoted replica holds every answered lease. What a failover
// loses (a release, a break, which are not acknowledged) only lengthens
// a lease; and Redis 7 replicates a lease as its absolute end (PEXPIREAT),
// so the replica ends it when the primary would have.

// leaseTolerance is how much earlier than an answered expires_at Redis's
// lease may end. Both clocks are this host's wall clock (the gateway's
// time.Now, Redis's gettimeofday), and the gateway takes the time it adds
// a lease to before it sends the script, which adds it to Redis's own
// later time; so the answer is never later, except by the rounding of
// the two: expires_at is truncated to the millisecond, and Redis keeps
// leases, and reports them (a score, PEXPIRETIME), in whole milliseconds.
// A few milliseconds cover that; anything more is a lease cut short. (The
// check reads only absolute ends: a PTTL counts from whenever Redis ran
// it, which a pause of Redis inside the check's transaction moves by up
// to the pause, see readHold.)
const leaseTolerance = 5 * time.Millisecond

// redisNodes are direct clients (no proxy, no faults) of the Redis nodes
// that hold the topology's data now: the one Redis; the current primary;
// every node of a Cluster, of which the one serving a name answers.
type redisNodes func() []*redis.Client

// directClient is a client of addr for the lease check: no retries, and a
// read timeout past a Redis pause (up to 600 ms).
func directClient(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

// leaseAnswer is an answer that stated a lease.
type leaseAnswer struct {
	what  string // the call: "acquire", "renew", "keep-alive", ...
	name  string
	kind  holdKind
	token string // the grant's owner token
	fence int64
	// call is when the call was made (a ticket's grant: when the ticket
	// was opened), ret when it answered.
	call, ret time.Time
	expires   time.Time
}

// leaseShort is an answered lease Redis ended earlier, read at read.
type leaseShort struct {
	a    leaseAnswer
	prim string
	h    redisHold
	read time.Time // when the read came back, on this host's clock
}

// leaseLog is the round's lease checks.
type leaseLog struct {
	mu      sync.Mutex
	checked int // answers read back from Redis
	unread  int // answers whose read failed (a paused, dead or moving node)
	shorts  []leaseShort
	// byBreak counts the shorts excused (leaseFindings).
	byBreak int
}

// checkLease reads a from Redis at once and records it if Redis's lease
// ends earlier than the answer said (see leaseFindings).
func (w *worker) checkLease(ctx context.Context, a leaseAnswer) {
	rs := w.round
	if rs.redis == nil || a.expires.IsZero() || a.token == "" {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	h, err := readHoldOn(rctx, rs.redis(), a.kind, a.name, tokenHash(a.token))
	read := time.Now()
	l := &rs.leases
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.unread++
		return
	}
	l.checked++
	if short(a, h) {
		l.shorts = append(l.shorts, leaseShort{a: a, prim: w.prim, h: h, read: read})
	}
}

// short reports whether Redis, as read in h, ends a's lease more than
// leaseTolerance before a's expires_at: it no longer holds a's grant
// (another token or fencing token, or none), or holds it until earlier.
func short(a leaseAnswer, h redisHold) bool {
	due := a.expires.Add(-leaseTolerance)
	if !h.after.Before(due) {
		return false // the lease may have run out as answered during the read: nothing to hold
	}
	if !h.held || h.fence != a.fence {
		return true
	}
	return h.end.Before(due)
}

// readHoldOn reads from the first of nodes that serves name (on a Cluster
// the others answer MOVED, and a node in the middle of a slot migration
// may answer ASK: no read, then).
func readHoldOn(ctx context.Context, nodes []*redis.Client, kind holdKind, name, tokHash string) (redisHold, error) {
	err := errors.New("no Redis to read (a failover)")
	for _, c := range nodes {
		var h redisHold
		if h, err = readHold(ctx, c, kind, name, tokHash); err == nil {
			return h, nil
		}
	}
	return redisHold{}, err
}

// leaseFindings are the leases answered longer than Redis held them, but
// those a break may have cut (see above).
func (rs *roundState) leaseFindings() []finding {
	var fs []finding
	rs.leases.mu.Lock()
	defer rs.leases.mu.Unlock()
	for _, s := range rs.leases.shorts {
		a := s.a
		if a.kind != permitHold && rs.locks.mayCut(a.name, a.call, s.read) {
			rs.leases.byBreak++
			continue
		}
		period := rs.locks.breakPeriodEnding(a.name, a.call, s.h)
		held := fmt.Sprintf("held it until %s (%v short)", stamp(s.h.end), a.expires.Sub(s.h.end).Round(time.Millisecond))
		switch {
		case !s.h.held:
			held = "no longer held it: " + s.h.other
		case s.h.fence != a.fence:
			held = fmt.Sprintf("held the token with fencing token %d", s.h.fence)
		case s.h.provisional:
			held += ", a hand-off not picked up yet"
		}
		if period != nil {
			held += fmt.Sprintf(", the end of the period of a break called at %s, answered %d at %s, before the call", stamp(period.call), period.status, stamp(period.ret))
		}
		fs = append(fs, finding{kind: endedEarly, lock: a.name, prim: s.prim, msg: fmt.Sprintf(
			"%s: %s %s (fencing token %d) called at %s answered at %s a lease until %s; Redis, read at %s, %s, and no break could have cut it since the call (Redis had: %s)",
			a.name, s.prim, a.what, a.fence, stamp(a.call), stamp(a.ret), stamp(a.expires), stamp(s.h.at), held, s.h.raw)})
	}
	return fs
}

// mayCut reports whether a break of lock may have run after from and
// before to: a break that certainly ran before from was seen by a call
// made at from.
func (h *history) mayCut(lock string, from, to time.Time) bool {
	for _, b := range h.breaksOf()[lock] {
		if mayHaveRun(b) && b.call.Before(to) && ranBy(b).After(from) {
			return true
		}
	}
	return false
}

// breakPeriodEnding is a break of lock with a period, called before
// from, whose period's end is where Redis's lease of h ends: the break
// ran before the call at from, and its answer had to say so; or nil.
func (h *history) breakPeriodEnding(lock string, from time.Time, held redisHold) *op {
	for _, b := range h.breaksOf()[lock] {
		if mayHaveRun(b) && b.ttl > 0 && b.call.Before(from) &&
			!held.end.Before(b.call.Add(b.ttl-leaseTolerance)) && !held.end.After(ranBy(b).Add(b.ttl+leaseTolerance)) {
			return &b
		}
	}
	return nil
}

// counts are the round's lease checks, for its log line.
func (l *leaseLog) counts() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("%d answered leases read back from Redis (%d unread): %d shorter there, of which %d after a break that may have cut them",
		l.checked, l.unread, len(l.shorts), l.byBreak)
}

// TestLeaseCheckSeesAShortLease: the lease check finds a lease that Redis
// holds for less than the answer said, for each way a grant holds (an
// exclusive lock, a lock set's lock, a shared hold, a permit), and
// nothing while Redis holds what was answered, nor when a break called
// after the answer's call may have cut it.
func TestLeaseCheckSeesAShortLease(t *testing.T) {
	rs := redistest.Start(t)
	c := newClient(t, startGateway(t, "--redis-url", rs.URL()))
	direct := []*redis.Client{directClient(t, rs.Addr)}
	ctx := t.Context()
	const ttl = time.Minute
	type answered struct {
		a leaseAnswer
		r result
	}
	for name, take := range map[string]func(name string) answered{
		"exclusive": func(n string) answered {
			call := time.Now()
			g, r := c.acquire(ctx, n, ttl, 0)
			return answered{leaseAnswer{what: "acquire", name: n, kind: exclusiveHold, token: g.Token, fence: g.FencingToken, call: call, ret: time.Now(), expires: g.ExpiresAt}, r}
		},
		"shared": func(n string) answered {
			call := time.Now()
			g, r := c.acquireShared(ctx, n, ttl, 0)
			return answered{leaseAnswer{what: "acquire", name: n, kind: sharedHold, token: g.Token, fence: g.FencingToken, call: call, ret: time.Now(), expires: g.ExpiresAt}, r}
		},
		"permit": func(n string) answered {
			call := time.Now()
			g, r := c.acquireAny(ctx, semLimit, n, ttl, 0)
			return answered{leaseAnswer{what: "acquire", name: n, kind: permitHold, token: g.Token, fence: g.FencingToken, call: call, ret: time.Now(), expires: g.ExpiresAt}, r}
		},
		"lock set": func(n string) answered {
			call := time.Now()
			s, r := c.acquireSet(ctx, []string{n, n + "-2"}, ttl, 0)
			if len(s.Locks) != 2 {
				return answered{r: r}
			}
			l := s.Locks[0]
			return answered{leaseAnswer{what: "set acquire", name: n, kind: exclusiveHold, token: setOwnerToken(s.Token, n), fence: l.FencingToken, call: call, ret: time.Now(), expires: l.ExpiresAt}, r}
		},
	} {
		t.Run(name, func(t *testing.T) {
			for _, broken := range []bool{false, true} {
				lock := fmt.Sprintf("lease/%s-%t", strings.ReplaceAll(name, " ", "-"), broken)
				got := take(lock)
				if got.r.status != http.StatusCreated || got.a.expires.IsZero() {
					t.Fatalf("acquire %s: got %s, want 201", lock, got.r)
				}
				round := &roundState{redis: func() []*redis.Client { return direct }, locks: &history{}}
				w := &worker{prim: name, round: round}
				w.checkLease(ctx, got.a)
				if l := &round.leases; l.checked != 1 || l.unread != 0 || len(l.shorts) != 0 {
					t.Fatalf("as answered: got %d checked, %d unread, %d short, want 1, 0, 0", l.checked, l.unread, len(l.shorts))
				}
				if err := shortenHold(ctx, direct[0], got.a.kind, lock, tokenHash(got.a.token), ttl/2); err != nil {
					t.Fatal(err)
				}
				if broken { // an administrator's break, called after the answer's call
					round.locks.ops = append(round.locks.ops, op{lock: lock, kind: opBreak, call: got.a.ret, ret: time.Now(), status: http.StatusOK})
				}
				w.checkLease(ctx, got.a)
				fs := round.leaseFindings()
				want := 1
				if broken && got.a.kind != permitHold {
					want = 0
				}
				if len(fs) != want {
					t.Fatalf("a lease cut to %v of %v answered (break: %t): got %d findings %v, want %d", ttl/2, ttl, broken, len(fs), fs, want)
				}
				if want > 0 {
					t.Logf("found: %s", fs[0].msg)
				}
			}
		})
	}
}

// stallAfterTime is a go-redis hook that makes Redis stall inside the
// lease check's transaction, right after its TIME: a Lua loop queued
// there keeps Redis busy (about a tenth of a second, more on a busy
// machine) before the transaction's reads run, as a Redis stopped
// (SIGSTOP, the matrix's pauses) or taken off the CPU at that moment does.
type stallAfterTime struct{}

func (stallAfterTime) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (stallAfterTime) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (stallAfterTime) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for i, c := range cmds {
			if c.Name() == "time" {
				busy := redis.NewCmd(ctx, "eval", "local x = 0 for i = 1, 10000000 do x = x + i end return 0", 0)
				cmds = append(cmds[:i+1], append([]redis.Cmder{busy}, cmds[i+1:]...)...)
				break
			}
		}
		return next(ctx, cmds)
	}
}

// TestLeaseCheckSurvivesAStalledRead: a lease Redis holds as answered is
// not found short when Redis stalls in the middle of the check's read (the
// finding "Redis held until 32.006 (600 ms short)": a Redis pause landed
// between the read's TIME and its PTTLs, and the check added the PTTLs,
// counted from after the pause, to the TIME from before it).
func TestLeaseCheckSurvivesAStalledRead(t *testing.T) {
	rs := redistest.Start(t)
	c := newClient(t, startGateway(t, "--redis-url", rs.URL()))
	stalled := directClient(t, rs.Addr)
	stalled.AddHook(stallAfterTime{})
	ctx := t.Context()
	const ttl = time.Minute
	for name, take := range map[string]func(name string) (grant, holdKind, result){
		"exclusive": func(n string) (grant, holdKind, result) {
			g, r := c.acquire(ctx, n, ttl, 0)
			return g, exclusiveHold, r
		},
		"shared": func(n string) (grant, holdKind, result) {
			g, r := c.acquireShared(ctx, n, ttl, 0)
			return g, sharedHold, r
		},
		"permit": func(n string) (grant, holdKind, result) {
			g, r := c.acquireAny(ctx, semLimit, n, ttl, 0)
			return g, permitHold, r
		},
	} {
		t.Run(name, func(t *testing.T) {
			lock := "stall/" + name
			call := time.Now()
			g, kind, r := take(lock)
			if r.status != http.StatusCreated {
				t.Fatalf("acquire %s: got %s, want 201", lock, r)
			}
			round := &roundState{redis: func() []*redis.Client { return []*redis.Client{stalled} }, locks: &history{}}
			w := &worker{prim: name, round: round}
			w.checkLease(ctx, leaseAnswer{what: "acquire", name: lock, kind: kind, token: g.Token, fence: g.FencingToken, call: call, ret: time.Now(), expires: g.ExpiresAt})
			if l := &round.leases; l.checked != 1 || l.unread != 0 || len(l.shorts) != 0 {
				t.Fatalf("as answered, read with a stall: got %d checked, %d unread, %d short %v, want 1, 0, 0", l.checked, l.unread, len(l.shorts), round.leaseFindings())
			}
		})
	}
}
