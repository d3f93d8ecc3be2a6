package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lockgate/lockgate/cmd/lockbench/loadgen"
)

// goalFigures are one round's figures that the targets of #25 are about,
// at 16 and 64 clients (index 0 and 1), and at 256 waiters for the
// hand-off cost.
type goalFigures struct {
	redisCPS, redisCeilingCPS [2]float64 // uncontended cycles/s
	redisUS, h0US, plainUS    [2]float64 // Redis main-thread µs per uncontended cycle
	contendedRedis            [2]float64 // contended cycles/s; embedded's is 5000
	handoffUS                 [2]float64 // gateway + Redis µs per contended cycle of redis at 16 and 256
}

// goalRound is one round of the scenarios the targets are about, as
// runRound makes it: each scenario's runs over the targets in turn, the
// Redis targets' cost over plain's set by overPlain.
func goalRound(f goalFigures) []TargetRun {
	withRedis := func(run TargetRun, us float64) TargetRun {
		run.Redis = &redisCost{MainCPUUS: us}
		return run
	}
	var runs []TargetRun
	for i, n := range []int{16, 64} {
		scenario := []TargetRun{
			fakeRun("ceiling", loadgen.ModeUncontended, n, 10000),
			fakeRun("redis-ceiling", loadgen.ModeUncontended, n, f.redisCeilingCPS[i]),
			fakeRun("embedded", loadgen.ModeUncontended, n, 9000),
			withRedis(fakeRun("redis", loadgen.ModeUncontended, n, f.redisCPS[i]), f.redisUS[i]),
			withRedis(fakeRun("redis-h0", loadgen.ModeUncontended, n, f.redisCPS[i]), f.h0US[i]),
			withRedis(fakeRun("plain", loadgen.ModeUncontended, n, 30000), f.plainUS[i]),
		}
		overPlain(scenario)
		runs = append(runs, scenario...)
	}
	for i, n := range []int{16, 64, 256} {
		redis := fakeRun("redis", loadgen.ModeContended, n, 2000)
		if i < 2 {
			redis = fakeRun("redis", loadgen.ModeContended, n, f.contendedRedis[i])
		}
		// Two thirds of a contended cycle's CPU in the gateway, a third in
		// Redis's main thread.
		var us float64
		switch n {
		case 16:
			us = f.handoffUS[0]
		case 256:
			us = f.handoffUS[1]
		}
		if us > 0 {
			redis = withRedis(redis, us/3)
			redis.ServerCPUUS = us * 2 / 3
		}
		runs = append(runs, fakeRun("embedded", loadgen.ModeContended, n, 5000), redis)
	}
	return runs
}

// checked is the goals of c by what and clients: "contended cycles/s,
// redis / embedded at 16".
func checked(t *testing.T, c *Comparison) map[string]GoalCheck {
	t.Helper()
	goals := checkGoals(c)
	if len(goals) != 10 {
		t.Fatalf("%d goals, want 10 (#25's five targets, four of them at 16 and 64 clients; the first for redis and redis-h0): %+v", len(goals), goals)
	}
	byName := map[string]GoalCheck{}
	for _, g := range goals {
		name := g.What
		if len(g.Clients) == 1 {
			name = fmt.Sprintf("%s at %d", g.What, g.Clients[0])
		}
		byName[name] = g
	}
	return byName
}

const (
	redisCPU  = "Redis main-thread CPU per uncontended cycle, redis / plain"
	h0CPU     = "Redis main-thread CPU per uncontended cycle, redis-h0 / plain"
	nearRC    = "uncontended cycles/s, redis / redis-ceiling"
	keptName  = "Redis memory a released lock name keeps (redis, kept per name)"
	contended = "contended cycles/s, redis / embedded"
	handoff   = "gateway + Redis main-thread CPU per contended cycle (redis), 256 over 16 waiters"
)

// TestGoalsOneRound: each target is met or not by the run's figure,
// a figure right on its target meeting it.
func TestGoalsOneRound(t *testing.T) {
	f := goalFigures{
		redisCPS: [2]float64{7000, 6000}, redisCeilingCPS: [2]float64{8000, 8000}, // 0.875, 0.75
		redisUS: [2]float64{40, 50}, h0US: [2]float64{30, 31}, plainUS: [2]float64{20, 20}, // 2.0, 2.5; 1.5, 1.55
		contendedRedis: [2]float64{3000, 2000}, // 0.6, 0.4
		handoffUS:      [2]float64{300, 320},   // 1.07
	}
	c := &Comparison{Runs: goalRound(f), Released: []ReleasedNameMemory{{Target: "redis-h0", KeptPerName: 900}, {Target: "redis", KeptPerName: 280}}}
	got := checked(t, c)
	for name, want := range map[string]struct{ measured, goal, verdict string }{
		redisCPU + " at 16":  {"2.00", "≤ 2.0", "met"},
		redisCPU + " at 64":  {"2.50", "≤ 2.0", "not met"},
		h0CPU + " at 16":     {"1.50", "≤ 1.5", "met"},
		h0CPU + " at 64":     {"1.55", "≤ 1.5", "not met"},
		nearRC + " at 16":    {"0.88", "≥ 0.85", "met"},
		nearRC + " at 64":    {"0.75", "≥ 0.85", "not met"},
		keptName:             {"280 B", "≤ 300 B", "met"},
		contended + " at 16": {"0.60", "≥ 0.6", "met"},
		contended + " at 64": {"0.40", "≥ 0.6", "not met"},
		handoff:              {"1.07: 300 → 320 µs", "within 10 % (0.90–1.10)", "met"},
	} {
		g, ok := got[name]
		if !ok {
			t.Errorf("no goal %q; got %v", name, got)
			continue
		}
		if g.Measured != want.measured || g.Goal != want.goal || g.Verdict != want.verdict {
			t.Errorf("%s: measured %q, goal %q, %q; want %q, %q, %q", name, g.Measured, g.Goal, g.Verdict, want.measured, want.goal, want.verdict)
		}
		if g.Min != 0 || g.Max != 0 {
			t.Errorf("%s: spread %v–%v of one round, want none", name, g.Min, g.Max)
		}
	}
	if g := got[handoff]; !slices.Equal(g.Clients, []int{16, 256}) {
		t.Errorf("hand-off cost at %v clients, want 16 → 256", g.Clients)
	}

	t.Run("a hand-off cost that grows or falls by more than 10 %", func(t *testing.T) {
		for _, to := range []float64{340, 260} {
			f := f
			f.handoffUS[1] = to
			if g := checked(t, &Comparison{Runs: goalRound(f)})[handoff]; g.Verdict != "not met" {
				t.Errorf("%v → %v µs: %q (%s), want not met", f.handoffUS[0], to, g.Verdict, g.Measured)
			}
		}
	})

	t.Run("the markdown", func(t *testing.T) {
		rep := fakeReport(c.Runs)
		rep.Comparison = c
		var md strings.Builder
		if err := writeComparison(&md, rep); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"### Against the targets of #25 (load average 1.00 1.00 1.00 at the start, 2.00 2.00 2.00 at the end)",
			"| " + redisCPU + " | 64 | 2.50 | ≤ 2.0 | not met |",
			"| " + keptName + " |  | 280 B | ≤ 300 B | met |",
			"| " + handoff + " | 16 → 256 | 1.07: 300 → 320 µs | within 10 % (0.90–1.10) | met |",
		} {
			if !strings.Contains(md.String(), want) {
				t.Errorf("the report lacks %q:\n%s", want, &md)
			}
		}
	})
}

// TestGoalsRounds: of rounds, a ratio is the median of the rounds' own
// ratios, with their min–max, and decides the verdict; the hand-off cost
// is the ratio of the medians of its two scenarios.
func TestGoalsRounds(t *testing.T) {
	base := goalFigures{
		redisCPS: [2]float64{9000, 9000}, redisCeilingCPS: [2]float64{10000, 10000},
		redisUS: [2]float64{40, 40}, h0US: [2]float64{30, 30}, plainUS: [2]float64{20, 20},
		contendedRedis: [2]float64{3000, 3000}, handoffUS: [2]float64{300, 300},
	}
	// redis / redis-ceiling at 16: 0.90, 0.80, 0.86. The median of the
	// ratios meets 0.85; the ratio of the median cycles/s (8000 / 10000)
	// would not.
	r1, r2, r3 := base, base, base
	r2.redisCPS[0] = 8000
	r3.redisCPS[0], r3.redisCeilingCPS[0] = 4300, 5000
	// Redis µs over plain's at 16: 2.0, 1.5, 2.5.
	r2.redisUS[0], r3.redisUS[0] = 30, 50
	// Gateway + Redis µs per contended cycle: 300, 310, 290 at 16 waiters;
	// 315, 400, 320 at 256.
	r1.handoffUS = [2]float64{300, 315}
	r2.handoffUS = [2]float64{310, 400}
	r3.handoffUS = [2]float64{290, 320}
	runs := mergeRounds([][]TargetRun{goalRound(r1), goalRound(r2), goalRound(r3)})
	got := checked(t, &Comparison{Runs: runs, Repeat: 3})
	for name, want := range map[string]struct {
		measured, verdict string
		value, min, max   float64
	}{
		nearRC + " at 16":   {"0.86 (0.80–0.90)", "met", 0.86, 0.8, 0.9},
		nearRC + " at 64":   {"0.90 (0.90–0.90)", "met", 0.9, 0.9, 0.9},
		redisCPU + " at 16": {"2.00 (1.50–2.50)", "met", 2, 1.5, 2.5},
		// The medians of the rounds, 300 and 320: the µs per cycle are
		// not paired by round.
		handoff: {"1.07: 300 (290–310) → 320 (315–400) µs", "met", 320.0 / 300, 0, 0},
	} {
		g := got[name]
		if g.Measured != want.measured || g.Verdict != want.verdict {
			t.Errorf("%s: %q, %q; want %q, %q", name, g.Measured, g.Verdict, want.measured, want.verdict)
		}
		if !near(g.Value, want.value) || !near(g.Min, want.min) || !near(g.Max, want.max) {
			t.Errorf("%s: value %v (%v–%v), want %v (%v–%v)", name, g.Value, g.Min, g.Max, want.value, want.min, want.max)
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// TestGoalsNotMeasured: a target whose figures the run lacks says so, and
// why, instead of a verdict.
func TestGoalsNotMeasured(t *testing.T) {
	f := goalFigures{
		redisCPS: [2]float64{7000, 7000}, redisCeilingCPS: [2]float64{8000, 8000},
		redisUS: [2]float64{40, 40}, h0US: [2]float64{30, 30}, plainUS: [2]float64{20, 20},
		contendedRedis: [2]float64{3000, 3000}, handoffUS: [2]float64{300, 300},
	}
	without := func(runs []TargetRun, drop func(TargetRun) bool) []TargetRun {
		return slices.DeleteFunc(slices.Clone(runs), drop)
	}
	all := goalRound(f)
	tests := map[string]struct {
		c    *Comparison
		want map[string]string // goal: verdict
	}{
		"no plain target": {&Comparison{Runs: without(all, func(r TargetRun) bool { return r.Target == "plain" })}, map[string]string{
			redisCPU + " at 16": "not measured: no plain target (--targets)",
			h0CPU + " at 64":    "not measured: no plain target (--targets)",
			nearRC + " at 16":   "met",
		}},
		"no Redis accounting of plain": {&Comparison{Runs: func() []TargetRun {
			f := f
			f.plainUS = [2]float64{0, 0} // overPlain has nothing to divide by
			return goalRound(f)
		}()}, map[string]string{
			redisCPU + " at 16": "not measured: no Redis accounting (INFO cpu) of the runs",
		}},
		"uncontended at 16 clients only": {&Comparison{Runs: without(all, func(r TargetRun) bool {
			return r.Mode == loadgen.ModeUncontended && r.Clients == 64
		})}, map[string]string{
			redisCPU + " at 16": "met",
			redisCPU + " at 64": "not measured: no uncontended run at 64 clients (--uncontended-clients)",
			nearRC + " at 64":   "not measured: no uncontended run at 64 clients (--uncontended-clients)",
		}},
		"--released-names 0, and contended at 16 and 64 only (the default)": {&Comparison{Runs: without(all, func(r TargetRun) bool {
			return r.Clients == 256
		})}, map[string]string{
			keptName:             "not measured: --released-names 0",
			contended + " at 64": "met",
			handoff:              "not measured: run with --contended-clients 16,64,256",
		}},
		"no Redis accounting of the contended runs": {&Comparison{Runs: func() []TargetRun {
			runs := slices.Clone(all)
			for i := range runs {
				if runs[i].Mode == loadgen.ModeContended {
					runs[i].Redis = nil
				}
			}
			return runs
		}()}, map[string]string{
			handoff: "not measured: no CPU figures of the gateway or no Redis accounting (INFO cpu)",
		}},
		"no redis target": {&Comparison{Runs: without(all, func(r TargetRun) bool { return r.Target == "redis" })}, map[string]string{
			redisCPU + " at 16":  "not measured: no redis target (--targets)",
			h0CPU + " at 16":     "met",
			nearRC + " at 64":    "not measured: no redis target (--targets)",
			keptName:             "not measured: no redis target (--targets)",
			contended + " at 16": "not measured: no redis target (--targets)",
			handoff:              "not measured: no redis target (--targets)",
		}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := checked(t, tt.c)
			for goal, want := range tt.want {
				if g := got[goal]; g.Verdict != want {
					t.Errorf("%s: %q, want %q", goal, g.Verdict, want)
				}
			}
			for goal, g := range got {
				if strings.HasPrefix(g.Verdict, "not measured") && (g.Measured != "" || g.Value != 0) {
					t.Errorf("%s: %q with a figure %q (%v)", goal, g.Verdict, g.Measured, g.Value)
				}
			}
		})
	}
}
