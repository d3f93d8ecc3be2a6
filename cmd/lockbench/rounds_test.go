package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// fakeRun is a run of one scenario against one target, with figures made
// from cps so that rounds of it differ.
func fakeRun(key, mode string, clients int, cps float64) TargetRun {
	run := TargetRun{Target: key, Label: "label of " + key, Mode: mode, Clients: clients,
		Result: Result{Path: "gateway", ElapsedS: 1, Cycles: int64(cps), CyclesPerSec: cps,
			Acquire: Latency{N: int(cps), P50: 1e4 / cps, P90: 2e4 / cps, P99: 3e4 / cps, Max: 4e4 / cps},
			Release: Latency{N: int(cps), P50: 0.5e4 / cps, P90: 1e4 / cps, P99: 1.5e4 / cps, Max: 2e4 / cps}},
		ServerCPUUS: 1e6 / cps, BenchCPUUS: 0.5e6 / cps, ServerSyscalls: 6}
	if key == "redis" {
		run.RedisCPUUS = 0.8e6 / cps
	}
	switch mode {
	case contended:
		run.Result.Fairness = &Fairness{Grants: int64(cps), ContestedReleases: int64(cps) - 1, P99WaitMS: 3e4 / cps,
			LongestWaitMS: 4e4 / cps, CycleMS: 1e3 / cps, FIFOBoundMS: float64(clients-1) * 1e3 / cps, P99OverFIFO: 1.5}
	case semaphoreMode:
		run.Result.Semaphore = &SemaphoreStats{Limit: 4, Grants: int64(cps), MostHolders: 3, MeanHolders: 2.5}
	case mixedMode:
		run.Result.Mixed = &MixedStats{SharedRatio: 0.8, SharedGrants: int64(0.8 * cps), ExclusiveGrants: int64(0.2 * cps), MostHolders: 5,
			SharedWait: run.Result.Acquire, ExclusiveWait: run.Result.Acquire}
	}
	return run
}

// fakeComparison is one round of every kind of scenario: a ceiling and two
// gateways uncontended at 16 and 64 clients, the gateways contended, on a
// semaphore and shared/exclusive. scale multiplies every throughput.
func fakeComparison(scale float64) []TargetRun {
	var runs []TargetRun
	for _, n := range []int{16, 64} {
		ceiling := fakeRun("ceiling", uncontended, n, 10000*scale)
		runs = append(runs, ceiling)
		for _, k := range []string{"embedded", "redis"} {
			run := fakeRun(k, uncontended, n, map[string]float64{"embedded": 8000, "redis": 3000}[k]*scale)
			run.OverCeiling = run.Result.CyclesPerSec / ceiling.Result.CyclesPerSec
			runs = append(runs, run)
		}
	}
	for _, mode := range []string{contended, semaphoreMode, mixedMode} {
		for _, k := range []string{"embedded", "redis"} {
			runs = append(runs, fakeRun(k, mode, 64, map[string]float64{"embedded": 5000, "redis": 1500}[k]*scale))
		}
	}
	return runs
}

func fakeReport(runs []TargetRun) *Report {
	return &Report{Target: "processes", Started: time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC),
		Machine:      Machine{OS: "linux", Arch: "amd64", CPUs: 2, GOMAXPROCS: 2, Go: "go1.26.8", LoadStart: "1.00 1.00 1.00", LoadEnd: "2.00 2.00 2.00"},
		RedisVersion: "7.0.15", Settings: Settings{DurationS: 5, WaitMS: 30000, TTLMS: 30000},
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
// written by the code before it).
func TestOneRoundReport(t *testing.T) {
	rep := fakeReport(fakeComparison(1))
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
