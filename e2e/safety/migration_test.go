package safety

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/internal/redistest"
)

// TestClusterSlotMigration: on a 3-master Cluster, two gateways (which
// follow no ASK or TRYAGAIN, and a MOVED once, in the backend's batcher:
// the gateway sets MaxRedirects -1), and
// the fault matrix's load (every primitive at once, matrix_prims_test.go),
// the slot of each of the round's names is moved to another node in turn,
// a few keys per MIGRATE, as a reshard of a busy slot goes. Nothing else
// is faulted. What must hold:
//
//   - every call answers its normal outcome or 503 backend_unavailable,
//     never another 5xx;
//   - the fault matrix's checks (TestFaultMatrix): no two exclusive
//     holders, nor an exclusive and a shared one, no more permits than the
//     limit, fencing tokens unique and in real-time order, answers that
//     agree with the grant's calls, no refusal when no call could hold the
//     name, and once the callers stop every name frees by the end of the
//     last lease any call may have made;
//   - each migration ran under load (calls on its name while the slot was
//     half moved) and moved keys;
//   - once a gateway has served a name from its new owner (answered a
//     call made after the migration closed, other than 503), none of its
//     later calls on the name answers 503 with an error from Redis, and
//     no call on a name that is not moving does; afterwards the name's
//     keys are all on the new owner and each gateway grants it there.
//
// All of it counts answers, not time: the load runs until every slot has
// moved (faulty.holdLoad), however long a busy machine takes, and a 503
// saying that Redis did not answer within the gateway's --redis-timeout
// (500 ms) is the machine's: a CPU-starved Redis or gateway, or a node
// held by a MIGRATE of another name's keys. Those are counted and logged,
// not findings; a 503 carrying an error from Redis (MOVED, ASK, TRYAGAIN)
// away from a migration is one.
//
// It logs what callers saw during each migration: the answers, by status,
// and the error replies Redis sent (counted by the proxies).
// LOCKGATE_FAULT_SEED=<seed> replays the order and the targets.
func TestClusterSlotMigration(t *testing.T) {
	t.Parallel() // long, and much of it waiting: it runs beside the other long ones
	seed := faultSeed(t)
	pc := startProxiedCluster(t, 3)
	// Six semaphore workers, not the row's three: only they call on the
	// round's two semaphores, and three, holding permits of one for up
	// to seconds, left the other without a call through a 408 ms
	// migration (seed 1290785061712330881). Not in TestFaultMatrix, whose
	// rounds the extra load starved of session grants.
	f := &faulty{name: "cluster", proxies: pc.proxies, rowWorkers: map[string]int{"semaphore": 6}}
	for range 2 {
		f.gateways = append(f.gateways, startSlot(t, pc.gatewayArgs()...))
	}
	var direct []*redis.Client // the lease check's (matrix_leases_test.go)
	for _, n := range pc.cluster.Nodes {
		direct = append(direct, directClient(t, n.Addr))
	}
	f.redis = func() []*redis.Client { return direct }

	var migs []nameMigration
	// The load runs until every name's slot has moved, and migrationReserve
	// after the last: on a busy machine the migrations take longer, and
	// so does the load, which a fixed round cut short ("only 2 of the
	// round's 6 slots migrated under load").
	f.holdLoad = make(chan struct{})
	inject := func(t *testing.T, seed uint64, done <-chan struct{}, _ string, names []string) ([]string, int) {
		rng := rand.New(rand.NewPCG(seed, 0))
		var did []string
		bit := 0
		defer func() { <-done }()
		defer close(f.holdLoad)
		time.Sleep(migrationWarmUp) // the load takes the names, queues on them
		var semClosed time.Time
		for _, i := range rng.Perm(len(names)) {
			name := names[i]
			sem := strings.Contains(name, "/sem-")
			if sem {
				// Only the semaphore row calls on the semaphores, and a
				// migration leaves its semaphore full for a while after it
				// closes: an acquire that answered 503 may have taken a
				// permit, which its lease ends. Meanwhile the row's
				// workers queue there, and a semaphore moved sooner after
				// the other found no call on it in one run in thirty ("no
				// call while slot 6997 was half moved: not under load",
				// seeds 309548165751070337 and 12357602195498212249; the
				// first success came up to 2.3 s after the close).
				time.Sleep(time.Until(semClosed.Add(migrationSettle + maxLease)))
			}
			slot := pc.cluster.KeySlot(t, hashTag(name))
			from := pc.cluster.Owner(t, slot)
			// The warm-up is a time, and on a busy machine the load may not
			// have taken the name by then ("the migration of slot 6685
			// moved no key", load 15, the gateways' first calls not sent
			// in time): the slot moves once it holds a key, or after
			// migrationKeysWait, when the check below says so.
			for wait := time.Now().Add(migrationKeysWait); pc.cluster.CountKeysInSlot(t, from, slot) == 0 && time.Now().Before(wait); {
				time.Sleep(20 * time.Millisecond) // poll interval, not synchronisation
			}
			batch := max(10, pc.cluster.CountKeysInSlot(t, from, slot)/migrationSteps)
			// The slot stays half moved until a call on the name
			// answered meanwhile: "no call while slot 6997 was half
			// moved" came of a migration that its callers, all elsewhere
			// for its 222 ms, never met.
			met := func(opened time.Time) bool { return f.live.answeredSince(name, opened) }
			m := pc.cluster.MigrateSlotPaced(t, slot, otherNode(rng, len(pc.cluster.Nodes), from), batch, migrationGap, met)
			migs = append(migs, nameMigration{name: name, Migration: m})
			if sem {
				semClosed = m.Closed
			}
			did = append(did, fmt.Sprintf("%s: slot %d, %d keys, node %d to %d, open %v",
				name, m.Slot, m.Keys, m.From, m.To, m.Closed.Sub(m.Opened).Round(time.Millisecond)))
			if m.Keys > 0 {
				bit++
			}
			time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond) // between two slots of the reshard
		}
		time.Sleep(migrationReserve) // the load goes on after the last, for the calls after it
		return did, bit
	}
	for _, p := range f.proxies {
		p.replyErrors() // count from the round on
	}
	out := f.round(t, seed, "mig", migrationRound, inject)
	var errs map[string]int
	for _, p := range f.proxies {
		for k, n := range p.replyErrors() {
			if errs == nil {
				errs = make(map[string]int)
			}
			errs[k] += n
		}
	}

	var problems []string
	for _, fd := range out.findings {
		problems = append(problems, fd.msg)
	}
	if len(migs) < 6 {
		problems = append(problems, fmt.Sprintf("only %d of the round's 6 slots migrated", len(migs)))
	}
	ops := append(append([]op(nil), out.locks.ops...), out.sems.ops...)
	v := newMigrationView(ops, migs, out.gatewayOf)
	total503 := 0
	for _, m := range migs {
		s := v.seen(m)
		total503 += s.unavailable
		t.Logf("%s: slot %d, %d keys from node %d to %d in %v: %d calls during it, answered %v; after it, %d answered 503 (%d Redis timeouts), the last %v after it closed; first success %v after",
			m.name, m.Slot, m.Keys, m.From, m.To, m.Closed.Sub(m.Opened).Round(time.Millisecond),
			s.during, s.byStatus, s.after503, s.timeouts, s.last503.Round(time.Millisecond), s.firstOK.Round(time.Millisecond))
		switch {
		case m.Keys == 0:
			problems = append(problems, fmt.Sprintf("%s: the migration of slot %d moved no key", m.name, m.Slot))
		case s.during == 0:
			problems = append(problems, fmt.Sprintf("%s: no call while slot %d was half moved: not under load", m.name, m.Slot))
		case len(s.settled503) > 0:
			problems = append(problems, fmt.Sprintf("%s: %d calls answered 503 with an error from Redis after their gateway had served the name from its new owner (slot %d):%s",
				m.name, len(s.settled503), m.Slot, describe503s(s.settled503, migs)))
		}
		problems = append(problems, f.onNewOwner(t, pc.cluster, m)...)
	}
	outside, timeouts := v.outside503()
	t.Logf("%d calls, %d answered 503 during a migration or before their gateway followed it, %d away from every migration (%d of them Redis timeouts: a busy machine); Redis's error replies to the gateways: %v",
		len(ops), total503, len(outside)+len(timeouts), len(timeouts), errs)
	if len(timeouts) > 0 {
		t.Logf("503s away from every migration that said Redis did not answer in time (not findings):%s", describe503s(timeouts, migs))
	}
	if len(outside) > 0 {
		problems = append(problems, fmt.Sprintf("%d calls answered 503 with an error from Redis away from every migration, with nothing else faulted:%s",
			len(outside), describe503s(outside, migs)))
	}
	if len(problems) > 0 {
		t.Errorf("%d problems:\n%s\nthe gateways' failed requests that were not Redis timeouts:%s",
			len(problems), strings.Join(problems[:min(len(problems), 20)], "\n"), failedRequests(f))
	}
}

// failedRequests returns the gateways' log lines of requests that failed
// with an error other than a Redis timeout: the error from Redis behind a
// 503 "the lock backend failed", which the answer does not carry.
func failedRequests(f *faulty) string {
	var b strings.Builder
	for i, s := range f.gateways {
		for line := range strings.Lines(s.gateway().logs.String()) {
			if strings.Contains(line, "request failed") && !strings.Contains(line, "i/o timeout") &&
				!strings.Contains(line, "context deadline exceeded") {
				fmt.Fprintf(&b, "\n  gateway %d: %s", i, strings.TrimSpace(line))
			}
		}
	}
	return b.String()
}

const (
	// migrationRound is how long the load runs at least; it runs on
	// until the six migrations are done (faulty.holdLoad), and
	// migrationReserve after the last.
	migrationRound  = 5 * time.Second
	migrationWarmUp = time.Second
	// migrationKeysWait: how long a name's slot may wait for its first key
	// before it moves anyway (and the round fails: it moved no key).
	migrationKeysWait = 30 * time.Second
	migrationReserve  = 3 * time.Second
	// A slot's keys go over in migrationSteps MIGRATEs (of 10 keys at
	// least), the reshard waiting migrationGap after each, so that a slot
	// stays half moved for half a second or so, whatever its keys: a busy
	// name's slot holds hundreds to thousands (each call leaves its record
	// for 10 s).
	migrationSteps = 20
	migrationGap   = 20 * time.Millisecond
	// migrationSettle is how long after a semaphore's migration closed
	// the other's waits to begin, besides a lease (see the injector).
	migrationSettle = time.Second
)

// nameMigration is the migration of the slot of one of the round's names.
type nameMigration struct {
	name string
	redistest.Migration
}

// migrationSeen is what the calls on a name saw of its migration.
type migrationSeen struct {
	during      int         // calls in flight while the slot was half moved
	byStatus    map[int]int // their answers (0: none read)
	unavailable int         // 503s during it, or before the call's gateway followed it
	after503    int         // 503s of calls made after it closed
	timeouts    int         // of those, Redis timeouts (see timedOut)
	// settled503 are the 503s with an error from Redis of calls made
	// after their gateway had served the name from its new owner.
	settled503 []op
	last503    time.Duration
	firstOK    time.Duration // from the close to the first 2xx of a call made after it
}

// migrationView is a round's calls, its migrations, and when each gateway
// followed each migration.
type migrationView struct {
	ops       []op
	migs      []nameMigration
	gatewayOf map[int]int // by op.client
	// followed is, per migration (its index in migs) and gateway, when
	// the gateway first answered a call on the migration's name, made
	// after it closed, other than 503: the call reached the new owner,
	// so from then on the gateway knows where the slot is.
	followed map[[2]int]time.Time
}

func newMigrationView(ops []op, migs []nameMigration, gatewayOf map[int]int) *migrationView {
	v := &migrationView{ops: ops, migs: migs, gatewayOf: gatewayOf, followed: make(map[[2]int]time.Time)}
	for i, m := range migs {
		for _, o := range ops {
			if o.lock != m.name || !o.call.After(m.Closed) || o.status == 0 || o.status == http.StatusServiceUnavailable {
				continue
			}
			k := [2]int{i, gatewayOf[o.client]}
			if at, ok := v.followed[k]; !ok || o.ret.Before(at) {
				v.followed[k] = o.ret
			}
		}
	}
	return v
}

// timedOut says that o's 503 said Redis did not answer within the
// gateway's --redis-timeout (and not that Redis answered an error).
func timedOut(o op) bool { return strings.Contains(o.detail, "did not answer in time") }

// moving says whether a name o's call acted on, other than except, was
// moving while it ran, or had moved and o's gateway had not followed yet
// when o was called.
func (v *migrationView) moving(o op, except string) bool {
	for i, m := range v.migs {
		if m.name == except || !slices.Contains(o.names(), m.name) || !o.ret.After(m.Opened) {
			continue
		}
		at, ok := v.followed[[2]int{i, v.gatewayOf[o.client]}]
		if o.call.Before(m.Closed) || !ok || o.call.Before(at) {
			return true
		}
	}
	return false
}

func (v *migrationView) seen(m nameMigration) migrationSeen {
	s := migrationSeen{byStatus: make(map[int]int), firstOK: -1}
	for _, o := range v.ops {
		if o.lock != m.name {
			continue
		}
		if o.call.Before(m.Closed) && o.ret.After(m.Opened) {
			s.during++
			s.byStatus[o.status]++
			if o.status == http.StatusServiceUnavailable {
				s.unavailable++
			}
			continue
		}
		if !o.call.After(m.Closed) {
			continue
		}
		since := o.ret.Sub(m.Closed)
		if o.status == http.StatusServiceUnavailable && v.moving(o, m.name) {
			// A call on several names (a session's keep-alive) is
			// unavailable while any of them moves: not this one's fault.
			continue
		}
		switch {
		case o.status == http.StatusServiceUnavailable:
			s.after503++
			s.last503 = max(s.last503, since)
			switch {
			case v.moving(o, ""):
				s.unavailable++
			case timedOut(o):
				s.timeouts++
			default:
				s.settled503 = append(s.settled503, o)
			}
		case o.status >= 200 && o.status < 300 && (s.firstOK < 0 || since < s.firstOK):
			s.firstOK = since
		}
	}
	return s
}

// outside503 returns the calls answered 503 on names that were not
// moving then (see moving): with an error from Redis, and Redis timeouts.
func (v *migrationView) outside503() (errs, timeouts []op) {
	for _, o := range v.ops {
		if o.status != http.StatusServiceUnavailable || v.moving(o, "") {
			continue
		}
		if timedOut(o) {
			timeouts = append(timeouts, o)
		} else {
			errs = append(errs, o)
		}
	}
	return errs, timeouts
}

// describe503s says who made each of the first calls in os, on what, when,
// and with what code and detail, and where the round's migrations were
// then: what a failure needs to be chased.
func describe503s(os []op, migs []nameMigration) string {
	var b strings.Builder
	for _, o := range os[:min(len(os), 8)] {
		fmt.Fprintf(&b, "\n  %s %v of %v by worker %d (%s: %s), called %s, answered %s in %v",
			o.prim, o.kind, o.names(), o.client, o.code, o.detail, stamp(o.call), stamp(o.ret), o.ret.Sub(o.call).Round(time.Millisecond))
	}
	for _, m := range migs {
		fmt.Fprintf(&b, "\n  migration of %s: %s to %s", m.name, stamp(m.Opened), stamp(m.Closed))
	}
	return b.String()
}

// onNewOwner checks, once the round is over (every name free), that m's
// slot and all its keys are on the new owner, and that each gateway grants
// the name there; it returns what is wrong.
func (f *faulty) onNewOwner(t *testing.T, c *redistest.Cluster, m nameMigration) []string {
	t.Helper()
	var wrong []string
	if owner := c.Owner(t, m.Slot); owner != m.To {
		wrong = append(wrong, fmt.Sprintf("%s: slot %d is on node %d, want %d", m.name, m.Slot, owner, m.To))
	}
	if n := c.CountKeysInSlot(t, m.From, m.Slot); n > 0 {
		wrong = append(wrong, fmt.Sprintf("%s: node %d still holds %d keys of slot %d, which moved to node %d", m.name, m.From, n, m.Slot, m.To))
	}
	sem := strings.Contains(m.name, "/sem-")
	for i, s := range f.gateways {
		c0 := s.client()
		var g grant
		var r result
		if sem {
			g, r = c0.acquireAny(t.Context(), semLimit, m.name, time.Second, 0)
		} else {
			g, r = c0.acquire(t.Context(), m.name, time.Second, 0)
		}
		if r.status != http.StatusCreated {
			wrong = append(wrong, fmt.Sprintf("%s: gateway %d, after the migration: got %s, want 201", m.name, i, r))
			continue
		}
		if n := c.CountKeysInSlot(t, m.To, m.Slot); n == 0 {
			wrong = append(wrong, fmt.Sprintf("%s: granted by gateway %d, yet node %d, the slot's owner, holds no key of it", m.name, i, m.To))
		}
		if sem {
			r = c0.releaseAny(t.Context(), semLimit, m.name, g.Token)
		} else {
			r = c0.release(t.Context(), m.name, g.Token)
		}
		if r.status != http.StatusNoContent {
			wrong = append(wrong, fmt.Sprintf("%s: gateway %d, release after the migration: got %s, want 204", m.name, i, r))
		}
	}
	return wrong
}

// TestMigrationView503s: a 503 on a moving name, or before its gateway
// followed the move, is the migration's; one with an error from Redis
// after the gateway followed, or on a name that is not moving, is a
// finding; a Redis timeout is the machine's, wherever it is.
func TestMigrationView503s(t *testing.T) {
	at := func(ms int) time.Time { return time.UnixMilli(int64(1e12 + ms)) }
	const failed, late = "the lock backend failed; the outcome of the call is unknown", "the lock backend did not answer in time; the outcome of the call is unknown"
	m := nameMigration{name: "mig/a", Migration: redistest.Migration{Opened: at(0), Closed: at(500)}}
	call := func(client int, name string, call, ret, status int, detail string) op {
		return op{client: client, lock: name, call: at(call), ret: at(ret), status: status, detail: detail}
	}
	gatewayOf := map[int]int{1: 0, 2: 1}
	followed := call(1, "mig/a", 600, 610, http.StatusOK, "") // gateway 0 follows at 610; gateway 1 never does
	for name, tc := range map[string]struct {
		o                      op
		unavailable, settled   int
		outside, outsideLate   int
		timeouts, after503Want int
	}{
		"during the migration":                   {o: call(1, "mig/a", 100, 200, 503, failed), unavailable: 1},
		"after it, before its gateway followed":  {o: call(1, "mig/a", 550, 560, 503, failed), unavailable: 1, after503Want: 1},
		"after it, its gateway never followed":   {o: call(2, "mig/a", 900, 910, 503, failed), unavailable: 1, after503Want: 1},
		"after its gateway followed":             {o: call(1, "mig/a", 700, 710, 503, failed), settled: 1, outside: 1, after503Want: 1},
		"a timeout after its gateway followed":   {o: call(1, "mig/a", 700, 1300, 503, late), timeouts: 1, outsideLate: 1, after503Want: 1},
		"on a name that is not moving":           {o: call(1, "mig/b", 100, 200, 503, failed), outside: 1},
		"a timeout on a name that is not moving": {o: call(1, "mig/b", 100, 700, 503, late), outsideLate: 1},
		"a refusal after its gateway followed":   {o: call(1, "mig/a", 700, 710, 409, "")},
	} {
		t.Run(name, func(t *testing.T) {
			v := newMigrationView([]op{followed, tc.o}, []nameMigration{m}, gatewayOf)
			s := v.seen(m)
			errs, timeouts := v.outside503()
			got := [6]int{s.unavailable, len(s.settled503), len(errs), len(timeouts), s.timeouts, s.after503}
			want := [6]int{tc.unavailable, tc.settled, tc.outside, tc.outsideLate, tc.timeouts, tc.after503Want}
			if got != want {
				t.Fatalf("got unavailable, settled, outside, outside timeouts, timeouts, after %v, want %v", got, want)
			}
		})
	}
}
