package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lockgate/lockgate/cmd/lockbench/loadgen"
)

// Issue #25 ("Speed, rebased") sets speed targets for the Redis backend.
// A --processes run measures the figures they are about; the report checks
// each against its target, so that a run says which are met without
// reading the tables. They are called goals here, where a target is
// something the lab measures.

// goalClients are the client counts the targets of #25 are set at.
var goalClients = []int{16, 64}

// The hand-off cost is held flat from handoffFrom to handoffTo waiters.
const handoffFrom, handoffTo = 16, 256

// GoalCheck is one target of #25 against the run.
type GoalCheck struct {
	What string `json:"what"`
	// Clients are the runs' client counts: one, or for the hand-off cost
	// the two it compares.
	Clients []int `json:"clients,omitempty"`
	// Value is the figure the goal is about: a ratio (of rounds, the
	// median of the rounds' own ratios, Min and Max their spread), or
	// bytes for a released name. Unset when not measured.
	Value    float64 `json:"value,omitempty"`
	Min      float64 `json:"min,omitempty"`
	Max      float64 `json:"max,omitempty"`
	Measured string  `json:"measured"` // as the report prints it
	Goal     string  `json:"goal"`
	// Verdict is "met", "not met", or "not measured: " and why. It is
	// decided on Value, the median of rounds.
	Verdict string `json:"verdict"`
}

// checkGoals checks c against the targets of #25, in the order.
func checkGoals(c *Comparison) []GoalCheck {
	find := func(target, mode string, clients int) *TargetRun {
		for i := range c.Runs {
			if r := &c.Runs[i]; r.Target == target && r.Mode == mode && r.Clients == clients {
				return r
			}
		}
		return nil
	}
	// missing says why there is no run of target in mode at clients.
	missing := func(target, mode string, clients int) string {
		if !slices.ContainsFunc(c.Runs, func(r TargetRun) bool { return r.Target == target }) {
			return fmt.Sprintf("not measured: no %s target (--targets)", target)
		}
		return fmt.Sprintf("not measured: no %s run at %d clients (--%s-clients)", mode, clients, mode)
	}
	unc, con := loadgen.ModeUncontended, loadgen.ModeContended
	var goals []GoalCheck
	// throughput checks the redis target's cycles/s in mode over ref's, of
	// the same round, at each of goalClients, against least.
	throughput := func(what, mode, ref string, least float64) {
		for _, n := range goalClients {
			gc := GoalCheck{What: what, Clients: []int{n}, Goal: fmt.Sprintf("≥ %g", least)}
			run, other := find("redis", mode, n), find(ref, mode, n)
			switch {
			case run == nil:
				gc.Verdict = missing("redis", mode, n)
			case other == nil:
				gc.Verdict = missing(ref, mode, n)
			default:
				gc.ratio(roundRatios(*run, *other))
				gc.verdict(gc.Value >= least)
			}
			goals = append(goals, gc)
		}
	}

	// Redis's main-thread CPU per uncontended cycle, over the plain lock's
	// in the same round: what the lock scripts cost Redis beyond a lock.
	for _, g := range []struct {
		target string
		most   float64
	}{{"redis", 2.0}, {"redis-h0", 1.5}} {
		for _, n := range goalClients {
			gc := GoalCheck{What: "Redis main-thread CPU per uncontended cycle, " + g.target + " / plain", Clients: []int{n},
				Goal: fmt.Sprintf("≤ %.1f", g.most)}
			run, plain := find(g.target, unc, n), find("plain", unc, n)
			switch {
			case run == nil:
				gc.Verdict = missing(g.target, unc, n)
			case plain == nil:
				gc.Verdict = missing("plain", unc, n)
			case run.RedisOverPlain <= 0:
				gc.Verdict = "not measured: no Redis accounting (INFO cpu) of the runs"
			default:
				gc.ratio(positive(roundsOf(*run), func(r TargetRun) float64 { return r.RedisOverPlain }))
				gc.verdict(gc.Value <= g.most)
			}
			goals = append(goals, gc)
		}
	}

	// Uncontended throughput against the HTTP ceiling with a plain Redis
	// lock behind it: how near a Redis-backed gateway comes to one plain
	// round trip per call.
	throughput("uncontended cycles/s, redis / redis-ceiling", unc, "redis-ceiling", 0.85)

	released := GoalCheck{What: "Redis memory a released lock name keeps (redis, kept per name)", Goal: "≤ 300 B"}
	if i := slices.IndexFunc(c.Released, func(m ReleasedNameMemory) bool { return m.Target == "redis" }); i >= 0 {
		released.Value = c.Released[i].KeptPerName
		released.Measured = fmt.Sprintf("%.0f B", released.Value)
		released.verdict(released.Value <= 300)
	} else if slices.ContainsFunc(c.Runs, func(r TargetRun) bool { return r.Target == "redis" }) {
		released.Verdict = "not measured: --released-names 0"
	} else {
		released.Verdict = "not measured: no redis target (--targets)"
	}
	goals = append(goals, released)

	// Contended throughput against the embedded backend's: what the queue
	// in Redis costs a hand-off beyond the one in the gateway's memory.
	throughput("contended cycles/s, redis / embedded", con, "embedded", 0.6)

	goals = append(goals, checkHandoffCost(find("redis", con, handoffFrom), find("redis", con, handoffTo),
		slices.ContainsFunc(c.Runs, func(r TargetRun) bool { return r.Target == "redis" })))
	return goals
}

// checkHandoffCost holds the CPU a contended cycle of the redis target
// costs, the gateway's and Redis's main thread's, to within 10 % from
// handoffFrom to handoffTo waiters: a hand-off whose cost grew with the
// queue would be work per waiter. The two are different scenarios, which
// ran at different times: rounds of the one are not paired with rounds of
// the other, and the ratio is of the two medians of rounds.
func checkHandoffCost(from, to *TargetRun, ranRedis bool) GoalCheck {
	gc := GoalCheck{What: "gateway + Redis main-thread CPU per contended cycle (redis), " +
		fmt.Sprintf("%d over %d waiters", handoffTo, handoffFrom), Clients: []int{handoffFrom, handoffTo}, Goal: "within 10 % (0.90–1.10)"}
	cost := func(r TargetRun) float64 {
		if r.Redis == nil || r.ServerCPUUS <= 0 {
			return 0
		}
		return r.ServerCPUUS + r.Redis.MainCPUUS
	}
	switch {
	case !ranRedis:
		gc.Verdict = "not measured: no redis target (--targets)"
		return gc
	case from == nil || to == nil:
		gc.Verdict = fmt.Sprintf("not measured: run with --contended-clients %d,64,%d", handoffFrom, handoffTo)
		return gc
	}
	costFrom, costTo := positive(roundsOf(*from), cost), positive(roundsOf(*to), cost)
	if len(costFrom) == 0 || len(costTo) == 0 {
		gc.Verdict = "not measured: no CPU figures of the gateway or no Redis accounting (INFO cpu)"
		return gc
	}
	gc.Value = median(costTo) / median(costFrom)
	gc.Measured = fmt.Sprintf("%.2f: %s → %s µs", gc.Value, spread(costFrom, "%.0f"), spread(costTo, "%.0f"))
	gc.verdict(gc.Value >= 0.9 && gc.Value <= 1.1)
	return gc
}

// ratio sets the goal's value to the median of ratios, each one round's,
// with their spread when there are several.
func (g *GoalCheck) ratio(ratios []float64) {
	if len(ratios) == 0 {
		g.Verdict = "not measured: no figures"
		return
	}
	g.Value = median(ratios)
	if len(ratios) > 1 {
		g.Min, g.Max = slices.Min(ratios), slices.Max(ratios)
	}
	g.Measured = spread(ratios, "%.2f")
}

func (g *GoalCheck) verdict(met bool) {
	if g.Verdict != "" { // not measured
		return
	}
	g.Verdict = "not met"
	if met {
		g.Verdict = "met"
	}
}

// spread is the median of vs, and with several their min–max in
// brackets: "0.85 (0.80–0.90)".
func spread(vs []float64, format string) string {
	s := fmt.Sprintf(format, median(vs))
	if len(vs) > 1 {
		s += fmt.Sprintf(" ("+format+"–"+format+")", slices.Min(vs), slices.Max(vs))
	}
	return s
}

// roundsOf is the rounds a run summarises, or the run itself when it ran
// once.
func roundsOf(run TargetRun) []TargetRun {
	if len(run.Rounds) == 0 {
		return []TargetRun{run}
	}
	return run.Rounds
}

// positive is get of each run, the runs without the figure (0) left out.
func positive(runs []TargetRun, get func(TargetRun) float64) []float64 {
	var vs []float64
	for _, r := range runs {
		if v := get(r); v > 0 {
			vs = append(vs, v)
		}
	}
	return vs
}

// roundRatios is a's cycles/s over b's, round by round: a and b are runs
// of one scenario, whose rounds each ran over every target in turn, so
// that round i of a and round i of b had the same stretch of the
// machine's load (as the ratio to the ceiling, see combineRounds).
func roundRatios(a, b TargetRun) []float64 {
	ra, rb := roundsOf(a), roundsOf(b)
	var ratios []float64
	for i := range min(len(ra), len(rb)) {
		if rb[i].Result.CyclesPerSec > 0 && ra[i].Result.CyclesPerSec > 0 {
			ratios = append(ratios, ra[i].Result.CyclesPerSec/rb[i].Result.CyclesPerSec)
		}
	}
	return ratios
}

// writeGoals writes the targets of #25 against the run, with the load
// average that the figures depend on.
func writeGoals(b *strings.Builder, r *Report) {
	b.WriteString("\n### Against the targets of #25")
	if m := r.Machine; m.LoadStart != "" {
		fmt.Fprintf(b, " (load average %s at the start, %s at the end)", m.LoadStart, m.LoadEnd)
	}
	b.WriteString("\n\nEach ratio is of two runs in the same round and scenario; of rounds, the median of the rounds' ratios, " +
		"their min–max in brackets, and the verdict is the median's. The hand-off cost's ratio is of the medians of two " +
		"scenarios, which ran at different times; after it, the µs per cycle of each.\n\n")
	b.WriteString("| figure | clients | measured | target | verdict |\n")
	b.WriteString("| --- | --- | --- | --- | --- |\n")
	for _, g := range checkGoals(r.Comparison) {
		clients := make([]string, len(g.Clients))
		for i, n := range g.Clients {
			clients[i] = fmt.Sprint(n)
		}
		measured := g.Measured
		if measured == "" {
			measured = "-"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", g.What, strings.Join(clients, " → "), measured, g.Goal, g.Verdict)
	}
}
