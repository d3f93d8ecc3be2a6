package safety

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestFaultMatrix runs every primitive (the rows, matrix_prims_test.go) on
// every topology (the columns, matrix_topo_test.go) under faults, and
// checks each cell: TestFaultMatrix/<topology>/<primitive>. Each topology
// runs matrixSeeds rounds of matrixRound, one seed each, every primitive at
// once on shared names (the lock primitives on the same locks), while the
// test's goroutine injects, from the seed: lost replies (Redis ran the
// script; the connection is cut where its reply would come back), commands
// delivered twice, cut connections, random delays on every connection
// (pub/sub included), Redis paused (SIGSTOP), a gateway killed (SIGKILL)
// and started again, and the topology's own faults (a failover that loses
// unacknowledged writes; a slot migration under load).
//
// What each cell must show, over the intervals each answered grant
// certainly held its name (from its 201 to its release call, or the last
// expires_at it was told): no two exclusive grants of a lock overlap, nor
// an exclusive and a shared one; no more permits than the limit; fencing
// tokens unique and increasing in real-time order per lock across every
// primitive; the resource never takes a stale token; no renew or release
// says 409 within the lease; answers agree with the grant's own calls
// (holds counted once, a lock freed only by its last hold, an idempotent
// retry gets the lost call's grant); no refusal when no call could hold the
// name; no permit granted while as many hold as a lowered limit certainly in
// force (the semaphore row's holders resize, matrix_resize_test.go); and
// once the load stops, every name frees by the end of the last lease any
// call may have made. Every answer that states a lease is read back from
// Redis at once: Redis holds at least that (matrix_leases_test.go). The
// breaker row breaks the round's locks at random:
// a grant counts as held only until the call of the first break that may
// have ended it, a "broken" answer needs such a break, and no call of a
// grant live when a break answered 200 succeeds after that answer
// (matrix_break_test.go).
//
// A row needs minRoundGrants grants in a round to show anything. A round
// runs on while a row has fewer (matrixStretch), and a row still short
// draws again (matrixRedraws): too few grants is a busy machine, not a
// finding. A cell whose row was short in every round is skipped, saying so.
//
// The seeds are logged: LOCKGATE_FAULT_SEED=<seed> replays one round with
// it (with -run 'TestFaultMatrix/<topology>'), and LOCKGATE_FAULT_ROUND=m1
// gives it the names of round m1 (on Cluster, where they are decides which
// node each is on); the goroutines' interleaving differs from run to run.
func TestFaultMatrix(t *testing.T) {
	t.Parallel() // long, and much of it waiting: it runs beside the other long ones
	var seeds []uint64
	for range matrixSeeds {
		seeds = append(seeds, rand.Uint64())
	}
	redraws := matrixRedraws
	if s := os.Getenv("LOCKGATE_FAULT_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("LOCKGATE_FAULT_SEED: %v", err)
		}
		seeds, redraws = []uint64{seed}, 0
	}
	for _, topo := range topologies {
		t.Run(topo.name, func(t *testing.T) {
			f := topo.start(t)
			f.name = topo.name
			byPrim := make(map[string][]string)
			bit := 0 // the topology's own faults that did what they are for
			// full counts, per row, the rounds that made enough of its
			// grants to show anything. A row short in a round draws
			// again: a round more, with a seed of its own, up to
			// redraws.
			full := make(map[string]int)
			lacking := func() bool {
				for _, p := range primitives {
					if notYet(p.name, topo.name) == "" && full[p.name] < len(seeds) {
						return true
					}
				}
				return false
			}
			rounds := 0
			var sets setCounts // the lock sets granted in every round, by what they asked
			for i := 0; i < len(seeds) || (i < len(seeds)+redraws && lacking()); i++ {
				seed := rand.Uint64() // a redraw
				if i < len(seeds) {
					seed = seeds[i]
				} else {
					t.Logf("round %d: a redraw, as a row made too few grants in a round", i)
				}
				t.Logf("round %d: seed %d", i, seed)
				prefix := fmt.Sprintf("m%d", i)
				if r := os.Getenv("LOCKGATE_FAULT_ROUND"); r != "" && redraws == 0 {
					prefix = r // the replayed round's names: on Cluster, its slots
				}
				out := f.round(t, seed, prefix, matrixRound, f.inject)
				rounds++
				bit += out.bit
				sets.add(out.sets)
				for _, p := range primitives {
					if !slices.Contains(out.short, p.name) {
						full[p.name]++
					}
				}
				for _, fd := range out.findings {
					msg := fmt.Sprintf("seed %d: %s", seed, fd.msg)
					ps := fd.prims()
					if len(ps) == 0 {
						ps = []string{"exclusive"} // the resource's writers
					}
					for _, p := range ps {
						byPrim[p] = append(byPrim[p], msg)
					}
				}
			}
			// A topology's own fault must bite in some round: a failover
			// that lost no write, or a migration that moved no key, would
			// leave its column checking nothing the single Redis does not.
			if len(f.own) > 0 && bit == 0 {
				t.Errorf("%s: its own fault did not bite in any of the %d rounds", topo.name, rounds)
			}
			for _, p := range primitives {
				t.Run(p.name, func(t *testing.T) {
					if why := notYet(p.name, topo.name); why != "" {
						t.Skip(why)
					}
					if fs := byPrim[p.name]; len(fs) > 0 {
						t.Errorf("%d findings, replay with LOCKGATE_FAULT_SEED and the seed:\n%s", len(fs), strings.Join(fs[:min(len(fs), 15)], "\n"))
					}
					// Too few grants is no finding: the machine was too
					// busy for this row to show much, which says nothing
					// about the gateway. Said as such.
					switch n := full[p.name]; {
					case n == 0 && !t.Failed():
						t.Skipf("none of the %d rounds made %d %s grants, too few to show anything (a busy machine; the logs count them): this cell checked next to nothing",
							rounds, minRoundGrants, p.name)
					case n < len(seeds):
						t.Logf("%d of the %d rounds made enough %s grants to show anything (%d wanted); the others made too few (a busy machine)",
							n, rounds, p.name, len(seeds))
					}
					if p.name == "lockset" {
						setsAsked(t, sets)
					}
				})
			}
		})
	}
}

// setsAsked fails the lockset cell whose sets, granted in enough
// numbers to show anything (minAskedSets), count none granted at a
// priority above 0 or none capped: the checks would have run without
// what the row asks (of the sets granted, about four in five waited at a
// priority above 0 and two in five were capped: twenty without one is a
// chance below one in ten thousand).
func setsAsked(t *testing.T, sets setCounts) {
	t.Helper()
	t.Logf("%s", sets)
	switch {
	case sets.granted < minAskedSets:
		t.Logf("fewer than %d lock sets granted (a busy machine): too few to ask that some were prioritized and some capped", minAskedSets)
	case sets.prioritized == 0:
		t.Errorf("none of the %d lock sets granted asked for a priority above 0: the row's priorities did not run", sets.granted)
	case sets.capped == 0:
		t.Errorf("none of the %d lock sets granted asked for a cap: the row's max_hold_ms did not run", sets.granted)
	}
}

// minAskedSets is how many lock sets a topology's rounds grant before
// setsAsked asks what they asked for.
const minAskedSets = 20

// matrixSeeds rounds per topology, each of matrixRound: about 25 s a
// topology with its start and the rounds' drains, in make test; make soak
// runs more rounds, longer.
var (
	matrixSeeds = bySoak(2, 8)
	matrixRound = bySoak(6*time.Second, 10*time.Second)
)

const (
	// A round in which a row made fewer than minRoundGrants runs on, up
	// to matrixStretch times matrixRound; a row still short draws again:
	// up to matrixRedraws rounds more per topology.
	matrixStretch = 3
	matrixRedraws = 2
)

// workers is how many workers run p in f's rounds.
func (f *faulty) workers(p primitive) int {
	if n := f.rowWorkers[p.name]; n > 0 {
		return n
	}
	return p.clients()
}

// injector applies faults to a round from seed until done is closed (the
// load has stopped), and says what it did and how many of the topology's
// own faults bit.
type injector func(t *testing.T, seed uint64, done <-chan struct{}, prefix string, names []string) (did []string, bit int)

// roundOutcome is what a round's checks found, with its histories.
type roundOutcome struct {
	findings    []finding
	locks, sems *history
	bit         int // the topology's own faults that bit (see injector)
	// short are the rows that made too few grants to show anything,
	// however long the round ran (see minRoundGrants).
	short []string
	// gatewayOf is the gateway each worker called (roundState.gatewayOf).
	gatewayOf map[int]int
	// sets counts the lock sets granted, by what they asked.
	sets setCounts
}

// round runs one seeded round of length on fresh names (prefix), faulted
// by inject, and returns what the checks found.
func (f *faulty) round(t *testing.T, seed uint64, prefix string, length time.Duration, inject injector) roundOutcome {
	var lockNames, semNames []string
	for _, s := range []string{"a", "b", "c", "d"} {
		lockNames = append(lockNames, prefix+"/lock-"+s)
	}
	for _, s := range []string{"a", "b"} {
		semNames = append(semNames, prefix+"/sem-"+s)
	}
	locks, sems, res := &history{}, &history{}, newResource()
	rs := &roundState{lockNames: lockNames, semNames: semNames, locks: locks, sems: sems, redis: f.redis, gatewayOf: make(map[int]int)}
	for _, g := range f.gateways {
		rs.clients = append(rs.clients, g.client)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// The load runs for length, then on while a row has made too few
	// grants to show anything, up to matrixStretch times length: a busy
	// machine makes fewer grants in the same time, not a worse gateway.
	start := time.Now()
	stop := make(chan struct{})
	go func() {
		defer close(stop)
		poll := time.NewTicker(100 * time.Millisecond)
		defer poll.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-poll.C:
				if now.Sub(start) < length || (f.holdLoad != nil && !closed(f.holdLoad)) {
					continue
				}
				if g, _ := rs.grantCounts(); len(f.short(g)) == 0 || now.Sub(start) >= matrixStretch*length {
					return
				}
			}
		}
	}()
	var wg sync.WaitGroup
	// The workers, row by row in turn: the k-th of each row before any
	// row's k+1-th, so that adding a row's workers leaves the others'
	// seeds (and a replayed round) as they were.
	id := 0
	most := 0
	for _, p := range primitives {
		most = max(most, f.workers(p))
	}
	for k := 0; k < most; k++ {
		for _, p := range primitives {
			if k >= f.workers(p) {
				continue
			}
			i := id
			id++
			slot := f.gateways[k%len(f.gateways)] // each primitive on every gateway
			rs.gatewayOf[i] = k % len(f.gateways)
			if notYet(p.name, f.name) != "" {
				continue
			}
			w := &worker{id: i, prim: p.name, rng: rand.New(rand.NewPCG(seed, uint64(100+i))), client: slot.client, h: locks, res: res, round: rs}
			names := lockNames
			if p.sem {
				w.h, names = sems, semNames
			}
			wg.Go(func() {
				for !closed(stop) && ctx.Err() == nil {
					p.cycle(ctx, w, names[w.rng.IntN(len(names))])
				}
			})
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	f.live = rs
	did, bit := inject(t, seed, done, prefix, append(append([]string{}, lockNames...), semNames...))
	loaded := time.Since(start) // inject returns once the load stopped
	f.quiet()

	// Once the load stops, every name frees by the end of the last lease
	// any call may have made.
	var fs []finding
	for _, n := range lockNames {
		fs = append(fs, f.frees(t, locks, n, "/locks/")...)
	}
	for _, n := range semNames {
		fs = append(fs, f.frees(t, sems, n, "/semaphores/")...)
	}
	fs = append(fs, locks.breakFindings(f.trusted)...) // first: it cuts the broken grants
	fs = append(fs, locks.findings(res, 1)...)
	fs = append(fs, locks.matrixFindings(1, f.trusted)...)
	fs = append(fs, sems.findings(nil, semLimit)...)
	fs = append(fs, sems.matrixFindings(semLimit, f.trusted)...)
	lowered, checked := sems.loweredFindings()
	fs = append(fs, lowered...)

	grants, unknowns := rs.grantCounts()
	fs = append(fs, rs.findings(f)...)
	sets := rs.setCounts()
	t.Logf("round %s: %v of load, %d calls; grants by primitive %v, unknown outcomes %v; %d permits granted under a lowered limit checked; %s; %s; faults: %s",
		prefix, loaded.Round(100*time.Millisecond), len(locks.ops)+len(sems.ops), grants, unknowns, checked, rs.leases.counts(), sets, strings.Join(did, ", "))
	short := f.short(grants)
	if len(short) > 0 {
		t.Logf("round %s: too few grants to show anything (fewer than %d) for %s, with the load run on to %d times the round's %v (a busy machine): not counted for those rows; every check still ran",
			prefix, minRoundGrants, strings.Join(short, ", "), matrixStretch, length)
	}
	return roundOutcome{findings: fs, locks: locks, sems: sems, bit: bit, short: short, gatewayOf: rs.gatewayOf, sets: sets}
}

// minRoundGrants is how many grants a row makes in a round that shows
// anything about it (the breaker: breaks answered 200; the watch row:
// events seen).
const minRoundGrants = 5

// short are the rows running on f that made fewer than minRoundGrants
// grants, of the counts grants.
func (f *faulty) short(grants map[string]int) []string {
	var out []string
	for _, p := range primitives {
		if grants[p.name] < minRoundGrants && notYet(p.name, f.name) == "" {
			out = append(out, p.name)
		}
	}
	return out
}

// grantCounts are the grants each row has made in the round so far, and
// its calls whose outcome is unknown. A grant counts once its holder is
// done with it.
func (rs *roundState) grantCounts() (grants, unknowns map[string]int) {
	grants, unknowns = make(map[string]int), make(map[string]int)
	for _, h := range []*history{rs.locks, rs.sems} {
		h.mu.Lock()
		for _, g := range h.grants {
			if g.fence != 0 {
				grants[g.prim]++
			}
		}
		for _, o := range h.ops {
			if unknown(o.status) {
				unknowns[o.prim]++
			}
			if o.kind == opBreak && o.status == http.StatusOK { // the breaker's count
				grants[o.prim]++
			}
		}
		h.mu.Unlock()
	}
	rs.counts(grants)
	return grants, unknowns
}

// closed reports whether c is closed.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// inject is the matrix's injector: random delays on every proxy, and
// faults drawn from seed, among them the topology's own at least once a
// round (at a time drawn in its first half), at most twice.
func (f *faulty) inject(t *testing.T, seed uint64, done <-chan struct{}, prefix string, names []string) ([]string, int) {
	// Lost replies and doubled commands hit the round's own script calls
	// (their keys hold the hash tag "{<prefix>/..."), not heartbeats alone.
	ours := func(args [][]byte) bool {
		if !anyScriptCall(args) {
			return false
		}
		for _, a := range args[3:] {
			if strings.Contains(string(a), "{"+prefix+"/") {
				return true
			}
		}
		return false
	}
	for i, p := range f.proxies {
		p.setJitter(jitter(rand.New(rand.NewPCG(seed, uint64(i+1)))))
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	count := make(map[string]int)
	var own []string
	bit := 0
	ownFault := func() {
		from := time.Now()
		did, ok := f.own[rng.IntN(len(f.own))](t, rng, names)
		f.noteFault(from, did)
		own = append(own, did)
		if ok {
			bit++
		}
	}
	ownBy := time.Now().Add(time.Duration(500+rng.IntN(3000)) * time.Millisecond)
	for {
		select {
		case <-done:
			out := own
			for k, n := range count {
				out = append(out, fmt.Sprintf("%d× %s", n, k))
			}
			return out, bit
		case <-time.After(time.Duration(200+rng.IntN(600)) * time.Millisecond): // the faults' rate
		}
		if len(f.own) > 0 && len(own) == 0 && time.Now().After(ownBy) {
			ownFault()
			continue
		}
		pi := rng.IntN(len(f.proxies))
		p, from := f.proxies[pi], time.Now()
		switch n := rng.IntN(20); {
		case n < 6:
			k := 1 + rng.IntN(3)
			p.addFault(loseReply, ours, k)
			count["lost reply"]++
			f.noteFault(from, fmt.Sprintf("the next %d replies of the round's script calls lost at proxy %d (armed)", k, pi))
		case n < 10:
			k := 1 + rng.IntN(3)
			p.addFault(sendTwice, ours, k)
			count["sent twice"]++
			f.noteFault(from, fmt.Sprintf("the next %d of the round's script calls sent twice at proxy %d (armed)", k, pi))
		case n < 13:
			p.drop()
			count["links cut"]++
			f.noteFault(from, fmt.Sprintf("links of proxy %d cut", pi))
		case n < 15:
			resume := f.pause(t, rng)
			time.Sleep(time.Duration(100+rng.IntN(500)) * time.Millisecond) // the pause
			resume()
			count["Redis paused"]++
			f.noteFault(from, "Redis paused")
		case n < 16:
			gi := rng.IntN(len(f.gateways))
			f.gateways[gi].restart(t)
			count["gateway killed"]++
			f.noteFault(from, fmt.Sprintf("gateway %d killed and started again", gi))
		case n < 17 && len(f.own) > 0 && len(own) < 2:
			ownFault()
		}
	}
}

// quiet ends the faults: no delays, no armed faults left.
func (f *faulty) quiet() {
	for _, p := range f.proxies {
		p.setJitter(nil)
		p.removeFaults()
	}
}

// frees waits until name is free, and returns a finding if it is still
// held past the end of the last lease any call of h may have made on it.
func (f *faulty) frees(t *testing.T, h *history, name, path string) []finding {
	until, prim := h.heldUntil(name, f.trusted)
	deadline := until.Add(time.Second)
	for {
		r := f.gateways[0].client().do(t.Context(), "GET", path+name, "")
		if r.status == http.StatusNotFound {
			return nil
		}
		if time.Now().After(deadline) {
			return []finding{{kind: heldByNobody, lock: name, prim: prim, msg: fmt.Sprintf(
				"%s: still held at %s, past the end of the last lease any call may have made (%s): %s",
				name, stamp(time.Now()), stamp(deadline.Add(-time.Second)), r)}}
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

// anyScriptCall matches every FCALL, EVAL and EVALSHA (and their _RO forms).
func anyScriptCall(args [][]byte) bool {
	if len(args) == 0 {
		return false
	}
	switch strings.ToUpper(string(args[0])) {
	case "FCALL", "FCALL_RO", "EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO":
		return true
	}
	return false
}

// notYet says why a primitive's row does not run on a topology yet, or "".
// Every row runs on every topology now; a row that has to wait again
// says why here.
func notYet(prim, topology string) string {
	return ""
}
