package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/cmd/lockbench/loadgen"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// fakeRun is a run of one scenario against one target, with figures made
// from cps so that rounds of it differ.
func fakeRun(key, mode string, clients int, cps float64) TargetRun {
	run := TargetRun{Target: key, Label: "label of " + key, Mode: mode, Clients: clients,
		Result: loadgen.Result{Path: "gateway", ElapsedS: 1, Cycles: int64(cps), CyclesPerSec: cps,
			Acquire: loadgen.Latency{N: int(cps), P50: 1e4 / cps, P90: 2e4 / cps, P99: 3e4 / cps, Max: 4e4 / cps},
			Release: loadgen.Latency{N: int(cps), P50: 0.5e4 / cps, P90: 1e4 / cps, P99: 1.5e4 / cps, Max: 2e4 / cps}},
		ServerCPUUS: 1e6 / cps, BenchCPUUS: 0.5e6 / cps, ServerSyscalls: 6}
	if key == "redis" {
		run.RedisCPUUS = 0.8e6 / cps
	}
	switch mode {
	case loadgen.ModeContended:
		run.Result.Fairness = &loadgen.Fairness{Grants: int64(cps), ContestedReleases: int64(cps) - 1, P99WaitMS: 3e4 / cps,
			LongestWaitMS: 4e4 / cps, CycleMS: 1e3 / cps, FIFOBoundMS: float64(clients-1) * 1e3 / cps, P99OverFIFO: 1.5}
	case loadgen.ModeSemaphore:
		run.Result.Semaphore = &loadgen.SemaphoreStats{Limit: 4, Grants: int64(cps), MostHolders: 3, MeanHolders: 2.5}
	case loadgen.ModeMixed:
		run.Result.Mixed = &loadgen.MixedStats{SharedRatio: 0.8, SharedGrants: int64(0.8 * cps), ExclusiveGrants: int64(0.2 * cps), MostHolders: 5,
			SharedWait: run.Result.Acquire, ExclusiveWait: run.Result.Acquire}
	}
	return run
}

// fakeComparison is one round of every kind of scenario: a ceiling and two
// gateways uncontended at 16 and 64 clients, the gateways contended, on a
// semaphore and shared/exclusive. scale multiplies every throughput,
// ceilingScale the ceiling's.
func fakeComparison(scale, ceilingScale float64) []TargetRun {
	var runs []TargetRun
	for _, n := range []int{16, 64} {
		ceiling := fakeRun("ceiling", loadgen.ModeUncontended, n, 10000*ceilingScale)
		runs = append(runs, ceiling)
		for _, k := range []string{"embedded", "redis"} {
			run := fakeRun(k, loadgen.ModeUncontended, n, map[string]float64{"embedded": 8000, "redis": 3000}[k]*scale)
			run.OverCeiling = run.Result.CyclesPerSec / ceiling.Result.CyclesPerSec
			runs = append(runs, run)
		}
	}
	for _, mode := range []string{loadgen.ModeContended, loadgen.ModeSemaphore, loadgen.ModeMixed} {
		for _, k := range []string{"embedded", "redis"} {
			runs = append(runs, fakeRun(k, mode, 64, map[string]float64{"embedded": 5000, "redis": 1500}[k]*scale))
		}
	}
	return runs
}

func fakeReport(runs []TargetRun) *Report {
	return &Report{Report: loadgen.Report{Target: "processes", Started: time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC),
		Machine:      loadgen.Machine{OS: "linux", Arch: "amd64", CPUs: 2, GOMAXPROCS: 2, Go: "go1.26.8", LoadStart: "1.00 1.00 1.00", LoadEnd: "2.00 2.00 2.00"},
		RedisVersion: "7.0.15", Settings: loadgen.Settings{DurationS: 5, WaitMS: 30000, TTLMS: 30000}},
		Comparison: &Comparison{Runs: runs}}
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs; got:\n%s\nwant:\n%s", path, got, want)
	}
}

// TestOneRoundReport: one round of each scenario is reported as before
// --repeat existed, markdown and JSON alike (testdata/one-round.* were
// written by the code before it, but for the section against the targets
// of #25, added since).
func TestOneRoundReport(t *testing.T) {
	rep := fakeReport(fakeComparison(1, 1))
	var md bytes.Buffer
	if err := writeComparison(&md, rep); err != nil {
		t.Fatal(err)
	}
	golden(t, "one-round.md", md.Bytes())
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "one-round.json", js)
}

func TestMedian(t *testing.T) {
	tests := map[string]struct {
		vs   []float64
		want float64
	}{
		"none":                        {nil, 0},
		"one":                         {[]float64{7}, 7},
		"odd count, unsorted":         {[]float64{9, 1, 5}, 5},
		"even count: mean of middles": {[]float64{4, 1, 3, 2}, 2.5},
		"an outlier does not move it": {[]float64{10, 11, 1000}, 11},
		"ties":                        {[]float64{2, 2, 1}, 2},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			in := slices.Clone(tt.vs)
			if got := median(in); got != tt.want {
				t.Errorf("median(%v) = %v, want %v", tt.vs, got, tt.want)
			}
			if !slices.Equal(in, tt.vs) {
				t.Errorf("median reordered its input: %v, was %v", in, tt.vs)
			}
		})
	}
}

// TestCombineRounds: of three rounds, cycles/s and each CPU figure are the
// medians of the rounds, each taken on its own; the ratio to the ceiling is
// the median of the rounds' own ratios, with their min and max; the
// latencies are the median round's; errors, self-hand-offs and conflicts
// are summed, the most holders at once is the most of any round.
func TestCombineRounds(t *testing.T) {
	// Round 1 is slow on a slow ceiling (ratio 0.90), round 2 fast on a
	// fast ceiling (0.60), round 3 in between (0.75): the median of the
	// ratios, 0.75, is not the ratio of the medians.
	r1 := fakeRun("embedded", loadgen.ModeUncontended, 16, 9000)
	r1.OverCeiling, r1.ServerCPUUS, r1.BenchCPUUS = 0.90, 300, 10
	r1.Result.Errors = map[string]int64{"transport": 2}
	r2 := fakeRun("embedded", loadgen.ModeUncontended, 16, 12000)
	r2.OverCeiling, r2.ServerCPUUS, r2.BenchCPUUS = 0.60, 100, 30
	r2.Result.Errors = map[string]int64{"transport": 1, "409 lock_held": 4}
	r3 := fakeRun("embedded", loadgen.ModeUncontended, 16, 10000)
	r3.OverCeiling, r3.ServerCPUUS, r3.BenchCPUUS = 0.75, 200, 50
	rounds := []TargetRun{r1, r2, r3}
	before := slices.Clone(rounds)

	got := combineRounds(rounds)
	if got.Result.CyclesPerSec != 10000 {
		t.Errorf("cycles/s = %v, want 10000", got.Result.CyclesPerSec)
	}
	if got.OverCeiling != 0.75 || got.OverCeilingMin != 0.60 || got.OverCeilingMax != 0.90 {
		t.Errorf("x ceiling = %v (%v–%v), want 0.75 (0.6–0.9)", got.OverCeiling, got.OverCeilingMin, got.OverCeilingMax)
	}
	if got.ServerCPUUS != 200 || got.BenchCPUUS != 30 || got.RedisCPUUS != 0 {
		t.Errorf("CPU server / Redis / lockbench = %v / %v / %v, want 200 / 0 / 30", got.ServerCPUUS, got.RedisCPUUS, got.BenchCPUUS)
	}
	if got.Result.Acquire != r3.Result.Acquire || got.Result.Release != r3.Result.Release {
		t.Errorf("latencies = %+v / %+v, want the median round's %+v / %+v", got.Result.Acquire, got.Result.Release, r3.Result.Acquire, r3.Result.Release)
	}
	if want := map[string]int64{"transport": 3, "409 lock_held": 4}; !maps.Equal(got.Result.Errors, want) {
		t.Errorf("errors = %v, want %v", got.Result.Errors, want)
	}
	if len(got.Rounds) != 3 || got.Round != 0 {
		t.Fatalf("rounds = %d, round = %d; want 3 rounds in a summary of no round", len(got.Rounds), got.Round)
	}
	for i, r := range got.Rounds {
		if r.Round != i+1 || r.Result.CyclesPerSec != rounds[i].Result.CyclesPerSec || r.OverCeiling != rounds[i].OverCeiling {
			t.Errorf("round %d = #%d at %v cycles/s, %v x ceiling; want #%d as it ran", i, r.Round, r.Result.CyclesPerSec, r.OverCeiling, i+1)
		}
	}
	if !reflect.DeepEqual(rounds, before) || len(rounds[2].Result.Errors) != 0 {
		t.Errorf("combineRounds changed its rounds: %+v", rounds)
	}

	t.Run("even count", func(t *testing.T) {
		got := combineRounds([]TargetRun{r1, r2})
		if got.Result.CyclesPerSec != 10500 || got.OverCeiling != 0.75 || got.ServerCPUUS != 200 {
			t.Errorf("cycles/s, x ceiling, CPU = %v, %v, %v; want the means of the middles 10500, 0.75, 200",
				got.Result.CyclesPerSec, got.OverCeiling, got.ServerCPUUS)
		}
		if got.Result.Acquire != r1.Result.Acquire {
			t.Errorf("latencies = %+v, want the slower middle round's %+v", got.Result.Acquire, r1.Result.Acquire)
		}
	})

	t.Run("the ceiling has no ratio", func(t *testing.T) {
		c1, c2 := fakeRun("ceiling", loadgen.ModeUncontended, 16, 10000), fakeRun("ceiling", loadgen.ModeUncontended, 16, 20000)
		if got := combineRounds([]TargetRun{c1, c2}); got.OverCeiling != 0 || ratioCell(got) != "" {
			t.Errorf("ceiling x ceiling = %v %q, want none", got.OverCeiling, ratioCell(got))
		}
	})

	t.Run("contended: self-hand-offs summed, their longest lead the most of any round", func(t *testing.T) {
		a, b, c := fakeRun("redis", loadgen.ModeContended, 64, 1000), fakeRun("redis", loadgen.ModeContended, 64, 2000), fakeRun("redis", loadgen.ModeContended, 64, 3000)
		a.Result.Fairness.SelfRegrants, a.Result.Fairness.ContestedReleases = 3, 100
		c.Result.Fairness.SelfRegrants, c.Result.Fairness.ContestedReleases = 1, 300
		a.Result.Fairness.SelfRegrantLeadMS, c.Result.Fairness.SelfRegrantLeadMS = 0.8, 1.3
		b.Result.Fairness.ContestedReleases = 600
		got := combineRounds([]TargetRun{a, b, c}).Result.Fairness
		if got.SelfRegrants != 4 || got.ContestedReleases != 1000 || got.SelfRegrantShare != 0.004 {
			t.Errorf("self-hand-offs %d of %d (%v), want 4 of 1000 (0.004)", got.SelfRegrants, got.ContestedReleases, got.SelfRegrantShare)
		}
		if got.SelfRegrantLeadMS != 1.3 || loadgen.SelfRegrantCell(got) != "4 of 1000 (0 %), lead ≤ 1.30 ms" {
			t.Errorf("lead %v ms, cell %q; want the longest of any round, 1.3 ms: \"4 of 1000 (0 %%), lead ≤ 1.30 ms\"", got.SelfRegrantLeadMS, loadgen.SelfRegrantCell(got))
		}
		if got.P99WaitMS != b.Result.Fairness.P99WaitMS || b.Result.Fairness.SelfRegrants != 0 {
			t.Errorf("p99 wait %v, want the median round's %v, and that round left as it was", got.P99WaitMS, b.Result.Fairness.P99WaitMS)
		}
	})

	t.Run("semaphore and mixed: most holders the most, conflicts summed", func(t *testing.T) {
		a, b := fakeRun("redis", loadgen.ModeSemaphore, 64, 1000), fakeRun("redis", loadgen.ModeSemaphore, 64, 2000)
		a.Result.Semaphore.MostHolders = 4
		if got := combineRounds([]TargetRun{a, b, b}).Result.Semaphore; got.MostHolders != 4 || got.MeanHolders != 2.5 {
			t.Errorf("semaphore = %+v, want most holders 4 of any round", got)
		}
		m1, m2 := fakeRun("redis", loadgen.ModeMixed, 64, 1000), fakeRun("redis", loadgen.ModeMixed, 64, 2000)
		m1.Result.Mixed.Conflicts, m1.Result.Mixed.MostHolders = 2, 9
		m2.Result.Mixed.Conflicts = 1
		if got := combineRounds([]TargetRun{m1, m2, m2}).Result.Mixed; got.Conflicts != 4 || got.MostHolders != 9 {
			t.Errorf("mixed conflicts %d, most holders %d; want 4 and 9", got.Conflicts, got.MostHolders)
		}
	})
}

// TestOneRoundIsAsItRan: one round is its own summary, with no rounds.
func TestOneRoundIsAsItRan(t *testing.T) {
	round := fakeComparison(1, 1)
	got := mergeRounds([][]TargetRun{round})
	if !reflect.DeepEqual(got, round) {
		t.Errorf("mergeRounds of one round = %+v, want it as it ran %+v", got, round)
	}
}

// TestRepeatedReport: three rounds are reported as one row per target and
// scenario, in the order they ran, with the median ratio and its spread,
// a note saying what the figures are, and every round in the JSON.
func TestRepeatedReport(t *testing.T) {
	// Ratios: 8000/10000, 8000*0.9/(10000*1.2), 8000*1.1/(10000*0.8).
	rounds := [][]TargetRun{fakeComparison(1, 1), fakeComparison(0.9, 1.2), fakeComparison(1.1, 0.8)}
	runs := mergeRounds(rounds)
	if len(runs) != len(rounds[0]) {
		t.Fatalf("%d runs, want one per target and scenario: %d", len(runs), len(rounds[0]))
	}
	for i, r := range runs {
		if r.Target != rounds[0][i].Target || r.Mode != rounds[0][i].Mode || r.Clients != rounds[0][i].Clients || len(r.Rounds) != 3 {
			t.Errorf("run %d = %s %s %d with %d rounds, want %s %s %d with 3", i, r.Target, r.Mode, r.Clients, len(r.Rounds),
				rounds[0][i].Target, rounds[0][i].Mode, rounds[0][i].Clients)
		}
	}
	rep := fakeReport(runs)
	rep.Comparison.Repeat = 3
	var md bytes.Buffer
	if err := writeComparison(&md, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"- 3 rounds of each scenario, each round over every target in the same order",
		"| label of embedded | 8000 / 8000 | 0.80 (0.60–1.10) / 0.80 (0.60–1.10) | 5000 |",
		"| embedded | 16 | 8000 | 0.80 (0.60–1.10) |",
		"| ceiling | 16 | 10000 |  |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, &md)
		}
	}
	if n := strings.Count(md.String(), "| embedded | 64 |"); n != 4 {
		t.Errorf("%d rows of embedded at 64 clients, want 4 (one per scenario):\n%s", n, &md)
	}
	golden(t, "three-rounds.md", md.Bytes())

	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	c := back.Comparison
	if c.Repeat != 3 || len(c.Runs) != len(runs) {
		t.Fatalf("JSON: repeat %d, %d runs; want 3, %d", c.Repeat, len(c.Runs), len(runs))
	}
	for _, r := range c.Runs {
		if len(r.Rounds) != 3 {
			t.Errorf("JSON: %s %s %d has %d rounds, want 3", r.Target, r.Mode, r.Clients, len(r.Rounds))
		}
	}
	if e := c.Runs[1]; e.Rounds[1].Result.CyclesPerSec != 7200 || e.OverCeilingMin != 0.6 {
		t.Errorf("JSON: embedded round 2 at %v cycles/s, min ratio %v; want 7200, 0.6", e.Rounds[1].Result.CyclesPerSec, e.OverCeilingMin)
	}
}
