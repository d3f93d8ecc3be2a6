package safety

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
)

// TestSentinelFailover: a primary, a replica and three sentinels; two
// gateways follow them, one in this process with a redis+sentinel:// URL,
// one a separate process with --redis-sentinel. Contended clients on both
// take turns on a few locks with short TTLs and waits, some holders
// writing to the resource for most of their lease. The replica is made to
// miss the primary's last writes (its link is cut lagBeforeKill before, as
// with an asynchronous replica that fell behind), then the primary is killed
// (SIGKILL) and the sentinels promote the replica. One grant of that last
// stretch is planted: its holder writes all along, and after the failover
// gateway 2 grants its lock to another client, who writes too.
//
// What must hold:
//   - each gateway grants again within recoverySlack of the sentinels'
//     switch, with no restart, and its /readyz said 503 during the outage
//     and 200 after;
//   - fencing tokens never repeat or go back, in real-time order, across
//     the failover (P2 under A2);
//   - grants made on the old primary and lost with it may overlap later
//     grants (A1 does not hold across an asynchronous failover): the test
//     lists them, and every write a lost holder made after the new holder
//     wrote was refused by the resource, which checks tokens; the planted
//     grant is among them. Any other broken promise fails the test, as in
//     TestHistoryTwoGateways;
//   - no acquire is answered more than answerSlack after its wait.
//
// LOCKGATE_FAULT_SEED=<seed> replays the clients' choices.
func TestSentinelFailover(t *testing.T) {
	t.Parallel() // long, and much of it waiting: it runs beside the other long ones
	seed := rand.Uint64()
	if s := os.Getenv("LOCKGATE_FAULT_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("LOCKGATE_FAULT_SEED: %v", err)
		}
	}
	t.Logf("seed %d", seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay with LOCKGATE_FAULT_SEED=%d", seed)
		}
	})
	const (
		redisTimeout  = 500 * time.Millisecond
		lagBeforeKill = time.Second
		// recoverySlack is how long after the sentinels' switch each
		// gateway may take to grant again: the switch reaches the
		// sentinel a gateway asks within a hello period (2 s); then its
		// next dial finds the new master.
		recoverySlack = 5 * time.Second
		// answerSlack is how late an acquire may be answered past its
		// wait: no call hangs. Measured: 0.4-0.7 s, and once 2.3 s (1 run
		// in 26, -race, in a load spike that made the sentinels miss their
		// 500 ms and the failover take 4.1 s); TestRandomFaults holds the
		// engine to 4 Redis timeouts without a failover.
		answerSlack = 5 * time.Second
		// loadTime is how long the load runs before the kill, and after
		// both gateways grant again.
		loadTime = 3 * time.Second
		// plantedLock is the lock of the planted lost grant, outside the
		// load's; its lease outlasts any failover (a split vote makes one
		// take 2 failover timeouts more), and its holder stops once it has
		// written after the new holder.
		plantedLock = "sent/planted"
		plantedTTL  = 30 * time.Second
	)

	ss := redistest.StartSentinels(t)
	addrs := ss.Addrs()
	gateways := []*gateway{
		startGateway(t, "--redis-url", ss.URL(), "--redis-timeout", redisTimeout.String()),
		startGatewayProcess(t, "--redis-sentinel", redistest.SentinelMaster,
			"--redis-url", "redis://"+addrs[0]+"?addr="+addrs[1]+"&addr="+addrs[2],
			"--redis-timeout", redisTimeout.String()),
	}
	var clients []*client
	var ready []*readiness
	for _, g := range gateways {
		clients = append(clients, newClient(t, g))
		ready = append(ready, watchReadiness(t, g))
	}
	for i, r := range ready {
		eventually(t, 10*time.Second, fmt.Sprintf("gateway %d ready", i+1), func() bool { return r.last() == http.StatusOK })
	}

	locks := []string{"sent/a", "sent/b", "sent/c", "sent/d", "sent/e", "sent/f", "sent/g", "sent/h"}
	res := newResource()
	h := &history{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stopping atomic.Bool
	var wg sync.WaitGroup
	stopLoad := func() { stopping.Store(true); wg.Wait() }
	defer stopLoad()
	for i := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(100+i)))
			c := clients[i%len(clients)]
			for !stopping.Load() && ctx.Err() == nil {
				ttl := time.Duration(500+rng.IntN(4000)) * time.Millisecond
				wait := time.Duration(0)
				if rng.IntN(10) >= 3 {
					wait = time.Duration(100+rng.IntN(1900)) * time.Millisecond
				}
				w := workload{res: res}
				if rng.IntN(3) == 0 {
					w.hold = time.Duration(rng.Int64N(int64(ttl)))
				}
				w.cycle(ctx, h, c, i, locks[rng.IntN(len(locks))], ttl, wait, rng.IntN(2) == 0, false)
			}
		})
	}
	began := time.Now()
	eventually(t, 30*time.Second, "load before the failover", func() bool {
		return time.Since(began) > loadTime && h.granted(time.Time{}) >= 30
	})

	from := ss.Primary.Addr
	cutReplication(t, ss.Primary, ss.Replica)
	cut := time.Now()
	// Besides the load's, one grant certainly lost: taken now through
	// gateway 1, its holder writes for its whole lease; after the
	// failover gateway 2 grants the same lock to another client.
	plantedCtx, stopPlanted := context.WithCancel(ctx)
	defer stopPlanted()
	wg.Go(func() {
		workload{res: res, hold: plantedTTL}.cycle(plantedCtx, h, clients[0], 100, plantedLock, plantedTTL, 0, false, false)
	})
	// The primary dies once the planted grant is made, however long a
	// busy machine takes (it took over 1 s at load 25), and no sooner
	// than lagBeforeKill after the cut: grants made meanwhile are lost
	// with it.
	eventually(t, 30*time.Second, "the planted grant", func() bool { return h.grantsOf(plantedLock) == 1 })
	time.Sleep(time.Until(cut.Add(lagBeforeKill)))
	killed := ss.KillPrimary(t)
	to, switched := ss.WaitFailover(t, from, 30*time.Second)
	if to != ss.Replica.Addr {
		t.Fatalf("the sentinels chose %s, want the replica %s", to, ss.Replica.Addr)
	}
	recovered := make([]time.Time, len(clients))
	var pg sync.WaitGroup
	for i, c := range clients {
		pg.Go(func() {
			recovered[i] = firstGrant(ctx, c, fmt.Sprintf("sent-probe/%d", i), switched.Add(recoverySlack))
		})
	}
	pg.Wait()
	for i, at := range recovered {
		if at.IsZero() {
			t.Fatalf("gateway %d granted nothing within %v of the switch; logs:\n%s", i+1, recoverySlack, gateways[i].logs)
		}
	}
	wg.Go(func() {
		for h.grantsOf(plantedLock) < 2 && !stopping.Load() && ctx.Err() == nil {
			workload{res: res, hold: time.Second}.cycle(ctx, h, clients[1], 101, plantedLock, 2*time.Second, 0, false, false)
		}
	})
	eventually(t, 20*time.Second, "the planted holder writing after the new holder", func() bool {
		late, _ := res.writesAfter(plantedLock, h.fenceOf(100, plantedLock), h.fenceOf(101, plantedLock))
		return late >= 3
	})
	stopPlanted() // its lease would last long after the test
	after := latest(recovered)
	eventually(t, 30*time.Second, "load after the recovery", func() bool {
		return time.Since(after) > loadTime && h.granted(after) >= 30
	})
	stopLoad()
	for i, r := range ready {
		eventually(t, 10*time.Second, fmt.Sprintf("gateway %d ready again", i+1), func() bool { return r.last() == http.StatusOK })
		r.stop()
	}

	t.Logf("replication cut at %s, primary killed %v later; the sentinels switched to the replica %v after the kill",
		stamp(cut), killed.Sub(cut).Round(time.Millisecond), switched.Sub(killed).Round(time.Millisecond))
	for i, r := range ready {
		t.Logf("gateway %d: granted again %v after the switch; /readyz %s",
			i+1, recovered[i].Sub(switched).Round(time.Millisecond), r.describe(killed, switched))
		if !r.said(http.StatusServiceUnavailable, killed, recovered[i]) {
			t.Errorf("gateway %d: /readyz never said 503 between the kill and the recovery", i+1)
		}
	}

	// Every acquire answered by its deadline, give or take answerSlack.
	var over time.Duration
	var late []string
	for _, o := range h.ops {
		if o.kind != opAcquire {
			continue
		}
		d := o.ret.Sub(o.call) - o.wait
		over = max(over, d)
		if d > answerSlack && len(late) < 10 {
			late = append(late, fmt.Sprintf("%s (wait %v) through gateway %d called at kill%+v answered %d at kill%+v, %v after its deadline",
				o.lock, o.wait, o.client%len(clients)+1, o.call.Sub(killed).Round(time.Millisecond), o.status,
				o.ret.Sub(killed).Round(time.Millisecond), d.Round(time.Millisecond)))
		}
	}
	if len(late) > 0 {
		t.Errorf("acquires answered more than %v after their deadline:\n%s", answerSlack, strings.Join(late, "\n"))
	}
	// Waiters parked at the kill: the engine answers them 503 once a
	// heartbeat fails, rather than keep them through the failover.
	parked := make(map[int]int)
	var lastParked time.Duration
	for _, o := range h.ops {
		if o.kind == opAcquire && o.wait > 0 && o.call.Before(killed) && o.ret.After(killed) {
			parked[o.status]++
			lastParked = max(lastParked, o.ret.Sub(killed))
		}
	}
	t.Logf("acquires waiting at the kill, by answer: %v; the last answered %v after the kill", parked, lastParked.Round(time.Millisecond))

	rep := h.acrossFailover(t, res, cut, killed)
	t.Logf("%d calls, %d grants (%d on the old primary, %d of them after the cut: lost); latest answer %v past its deadline",
		len(h.ops), len(h.grants), rep.old, rep.afterCut, over.Round(time.Millisecond))
	t.Logf("lost with the old primary: %d grants seen overlapping, ended early or overwritten:%s", len(rep.lost), rep.lostList())
	t.Logf("fencing: %d overlaps of a lost grant with a later one; %d writes by lost holders after the new holder wrote, all refused",
		rep.overlaps, rep.lateRefused)
	var planted *grantRec
	for g := range rep.lost {
		if g.lock == plantedLock && g.acquired.client == 100 {
			planted = g
		}
	}
	switch {
	case planted == nil:
		t.Errorf("the planted grant on %s was not seen lost: it must overlap the grant gateway 2 made after the failover", plantedLock)
	case rep.lost[planted]["overlapped a later grant"] == 0:
		t.Errorf("the planted grant on %s: seen lost (%v), but overlapping no later grant", plantedLock, rep.lost[planted])
	case rep.lateRefused == 0:
		t.Errorf("no write of a lost holder came after the new holder's, though the planted holder wrote every %v", holdStep)
	}
	if len(rep.unexpected) > 0 {
		t.Fatalf("the history breaks promises a failover does not excuse:\n%s", strings.Join(rep.unexpected, "\n"))
	}
}

// failoverReport is what the checker saw across a failover.
type failoverReport struct {
	old         int                          // grants made on the old primary
	afterCut    int                          // of them, made after the replica's link was cut
	lost        map[*grantRec]map[string]int // grants shown lost: how, how often
	overlaps    int                          // overlaps of a lost grant with a later one
	lateRefused int                          // writes of lost holders after the newer holder wrote
	unexpected  []string                     // findings a failover does not explain
}

// acrossFailover sorts the findings of the checker into those a failover
// to a replica that missed writes explains and the others. It tells a
// grant of the old primary by its token: tokens are at least the Redis
// clock in microseconds (SAFETY.md, P2), so one made after the kill is
// larger than the kill's time, and one made before is smaller.
func (h *history) acrossFailover(t *testing.T, res *resource, cut, killed time.Time) failoverReport {
	t.Helper()
	old := func(g *grantRec) bool { return g.fence < killed.UnixMicro() }
	rep := failoverReport{lost: make(map[*grantRec]map[string]int)}
	for _, g := range h.grants {
		if old(g) {
			rep.old++
			if g.fence >= cut.UnixMicro() {
				rep.afterCut++
			}
		}
		if g.acquired.ret.Before(killed) && !old(g) {
			t.Fatalf("%s: grant %d was answered at %s, before the kill at %s, yet its token is larger",
				g.lock, g.fence, stamp(g.acquired.ret), stamp(killed))
		}
	}
	lose := func(g *grantRec, how string) {
		if rep.lost[g] == nil {
			rep.lost[g] = make(map[string]int)
		}
		rep.lost[g][how]++
	}
	for _, f := range h.findings(res, 1) {
		switch {
		case f.kind == endedEarly && old(f.a):
			lose(f.a, "gone at its renew or release")
		case f.kind == writeRefused && old(f.a):
			lose(f.a, "a write refused inside its lease")
		case f.kind == overlap && old(f.a) && !old(f.b):
			lose(f.a, "overlapped a later grant")
			rep.overlaps++
			late, accepted := res.writesAfter(f.lock, f.a.fence, f.b.fence)
			rep.lateRefused += late - accepted
			if accepted > 0 {
				rep.unexpected = append(rep.unexpected, fmt.Sprintf("%s: %d writes of lost grant %d were accepted after grant %d wrote",
					f.lock, accepted, f.a.fence, f.b.fence))
			}
		default:
			rep.unexpected = append(rep.unexpected, f.msg)
		}
	}
	return rep
}

func (r failoverReport) lostList() string {
	var gs []*grantRec
	for g := range r.lost {
		gs = append(gs, g)
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i].fence < gs[j].fence })
	var b strings.Builder
	for _, g := range gs {
		var hows []string
		for how, n := range r.lost[g] {
			hows = append(hows, fmt.Sprintf("%s (%d)", how, n))
		}
		sort.Strings(hows)
		fmt.Fprintf(&b, "\n  %s grant %d, granted at %s, lease until %s: %s",
			g.lock, g.fence, stamp(g.acquired.ret), stamp(g.known), strings.Join(hows, ", "))
	}
	return b.String()
}

// writesAfter counts the writes carrying token older that reached the
// resource after its first accepted write with token newer, and how many
// of those it accepted.
func (r *resource) writesAfter(lock string, older, newer int64) (late, accepted int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := false
	for _, w := range r.log {
		switch {
		case w.lock != lock:
		case w.fence == newer && w.accepted:
			seen = true
		case seen && w.fence == older:
			late++
			if w.accepted {
				accepted++
			}
		}
	}
	return late, accepted
}

// grantsOf is the number of grants of lock so far.
func (h *history) grantsOf(lock string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, o := range h.ops {
		if o.kind == opAcquire && o.status == http.StatusCreated && o.lock == lock {
			n++
		}
	}
	return n
}

// fenceOf is the token of the first grant of lock to client, 0 if none.
func (h *history) fenceOf(client int, lock string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, o := range h.ops {
		if o.kind == opAcquire && o.status == http.StatusCreated && o.client == client && o.lock == lock {
			return o.fence
		}
	}
	return 0
}

// granted is the number of grants whose acquire was called after since.
func (h *history) granted(since time.Time) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, o := range h.ops {
		if o.kind == opAcquire && o.status == http.StatusCreated && o.call.After(since) {
			n++
		}
	}
	return n
}

// cutReplication cuts the primary's link to its replica for good: the
// replica is given a password the primary does not have, so it cannot
// link again. Writes from then on never reach it, as with an asynchronous
// replica that fell behind when the primary dies.
func cutReplication(t *testing.T, primary, replica *redistest.Server) {
	t.Helper()
	if err := replica.Client(t).ConfigSet(t.Context(), "masterauth", "not-the-primary's").Err(); err != nil {
		t.Fatalf("config set masterauth on the replica: %v", err)
	}
	if err := primary.Client(t).Do(t.Context(), "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		t.Fatalf("client kill type replica: %v", err)
	}
}

// firstGrant asks c for a fresh lock every 20 ms until one is granted or
// deadline passes, and returns when the grant came (zero if none did).
// Each try takes a new name: a try that got 503 may have been granted.
func firstGrant(ctx context.Context, c *client, prefix string, deadline time.Time) time.Time {
	for n := 0; time.Now().Before(deadline) && ctx.Err() == nil; n++ {
		lock := fmt.Sprintf("%s-%d", prefix, n)
		g, r := c.acquire(ctx, lock, time.Second, 0)
		if r.status == http.StatusCreated && r.err == nil {
			at := time.Now()
			c.release(ctx, lock, g.Token)
			return at
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	return time.Time{}
}

func latest(ts []time.Time) time.Time {
	var l time.Time
	for _, t := range ts {
		if t.After(l) {
			l = t
		}
	}
	return l
}

// readiness records what a gateway's /readyz answers, polled every 20 ms,
// as a list of changes.
type readiness struct {
	mu      sync.Mutex
	changes []readyChange
	stop    func() // idempotent; stops the polling and waits for it
}

// readyChange is /readyz answering status (0: no answer) from at on.
type readyChange struct {
	at     time.Time
	status int
}

func watchReadiness(t *testing.T, g *gateway) *readiness {
	t.Helper()
	tr := &http.Transport{}
	hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	r := &readiness{}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			status := 0
			if resp, err := hc.Get(g.URL + "/readyz"); err == nil {
				resp.Body.Close()
				status = resp.StatusCode
			}
			r.mu.Lock()
			if n := len(r.changes); n == 0 || r.changes[n-1].status != status {
				r.changes = append(r.changes, readyChange{time.Now(), status})
			}
			r.mu.Unlock()
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond): // poll interval
			}
		}
	}()
	var once sync.Once
	r.stop = func() {
		once.Do(func() { close(done); <-stopped; tr.CloseIdleConnections() })
	}
	t.Cleanup(r.stop)
	return r
}

// last is the latest answer, 0 before the first.
func (r *readiness) last() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.changes) == 0 {
		return 0
	}
	return r.changes[len(r.changes)-1].status
}

// said reports whether /readyz answered status at some time in [from, to].
func (r *readiness) said(status int, from, to time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, c := range r.changes {
		end := to
		if i+1 < len(r.changes) {
			end = r.changes[i+1].at
		}
		if c.status == status && !end.Before(from) && !c.at.After(to) {
			return true
		}
	}
	return false
}

// describe lists the changes after from, timed from from and from switched.
func (r *readiness) describe(from, switched time.Time) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var parts []string
	for _, c := range r.changes {
		if c.at.Before(from) {
			continue
		}
		parts = append(parts, fmt.Sprintf("%d at kill+%v (switch%+v)", c.status,
			c.at.Sub(from).Round(time.Millisecond), c.at.Sub(switched).Round(time.Millisecond)))
	}
	return strings.Join(parts, ", then ")
}
