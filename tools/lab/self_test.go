package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockgate/lockgate/cmd/lockbench/loadgen"
)

// TestMain lets this test binary stand in for the lab's children: the
// parker of --self and the ceiling of --processes are os.Executable(),
// which is us; TestProcessesSmoke also runs it as the gateway.
func TestMain(m *testing.M) {
	if code, ok := childMain(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestSelfSmoke runs the whole --self matrix, briefly and with few clients,
// against a real redis-server and an in-process gateway, and checks that
// the report has every figure. It asserts presence, never speed.
func TestSelfSmoke(t *testing.T) {
	profile := filepath.Join(t.TempDir(), "cpu.prof")
	args := []string{"lockbench", "--self", "--json", "--duration", "300ms",
		"--uncontended-clients", "2", "--contended-clients", "3", "--semaphore-clients", "5", "--semaphore-limit", "2",
		"--mixed-clients", "6", "--shared-ratio", "0.5", "--parked", "50", "--held-locks", "20", "--cpuprofile", profile}
	var out, progress bytes.Buffer
	if err := run(t.Context(), args, &out, &progress); err != nil {
		t.Fatalf("lockbench --self: %v\nprogress:\n%s", err, &progress)
	}
	if s := out.String() + progress.String(); strings.Contains(s, "eyJ") {
		t.Errorf("the output contains what looks like a JWT:\n%s", s)
	}

	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("the --json report does not parse: %v\n%s", err, &out)
	}
	if rep.RedisVersion == "" || rep.Machine.CPUs == 0 {
		t.Errorf("report lacks the Redis version or the machine: %+v %+v", rep.RedisVersion, rep.Machine)
	}
	modes := map[string]int{}
	for _, s := range rep.Scenarios {
		modes[s.Mode]++
		for _, r := range []*loadgen.Result{&s.Gateway, s.Floor} {
			if r == nil {
				t.Fatalf("%s: no floor result", s.Name)
			}
			checkResult(t, s, r)
		}
		if s.GatewayOverFloor <= 0 {
			t.Errorf("%s: gateway/floor = %v, want a positive ratio", s.Name, s.GatewayOverFloor)
		}
	}
	if modes[loadgen.ModeUncontended] != 1 || modes[loadgen.ModeContended] != 1 || modes[loadgen.ModeSemaphore] != 1 || modes[loadgen.ModeMixed] != 1 {
		t.Errorf("scenarios by mode = %v, want one uncontended, one contended, one semaphore and one mixed", modes)
	}
	if h := rep.HeldLocks; h == nil || h.Locks != 20 || h.KeysPerLock < 1 || h.BytesPerLock <= 0 || h.CallRecordBytesPerLock != 0 {
		// used_memory is not checked: earlier runs' call records expire
		// while it is measured, and can make its growth negative.
		t.Errorf("held-lock memory = %+v, want 20 locks of at least one key and some bytes each, and no call records (an acquire keeps none since #36)", h)
	}
	if p := rep.Parked; p == nil || p.Waiters != 50 || p.HeapLivePerWaiter <= 0 || p.StackPerWaiter <= 0 || p.GoroutinesPerWaiter <= 0 {
		t.Errorf("parked waiters = %+v, want 50 waiters costing some heap, stack and goroutines each", p)
	}
	if fi, err := os.Stat(profile); err != nil || fi.Size() == 0 {
		t.Errorf("--cpuprofile: want a non-empty profile at %s (stat: %v)", profile, err)
	}

	var md bytes.Buffer
	if err := writeSelfMarkdown(&md, &rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"### Throughput and latency", "| uncontended, 2 clients | gateway |", "| | floor |",
		"### Contention", "| contended, 3 clients, hold 0s | gateway |", "self-regrants", "### Memory", "parked waiter",
		"### Shared and exclusive", "| gateway | 6 | 50 % |", "| floor | 6 | 50 % |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the markdown report lacks %q:\n%s", want, &md)
		}
	}
}

func checkResult(t *testing.T, s loadgen.ScenarioReport, r *loadgen.Result) {
	t.Helper()
	if r.Cycles <= 0 || r.CyclesPerSec <= 0 || r.Acquire.N == 0 || r.Release.N == 0 || r.Acquire.Max <= 0 {
		t.Errorf("%s %s: want cycles and latencies, got %+v", s.Name, r.Path, r)
	}
	if r.Errors == nil {
		t.Errorf("%s %s: errors should be an empty map, not missing", s.Name, r.Path)
	}
	if r.Redis == nil || r.Redis.Total <= 0 || r.Redis.PerHandoff <= 0 || r.Redis.ScriptsPerHandoff <= 0 {
		t.Errorf("%s %s: want Redis command counts, got %+v", s.Name, r.Path, r.Redis)
	}
	if s.Mode == loadgen.ModeSemaphore {
		if st := r.Semaphore; st == nil || st.Grants <= 0 || st.MostHolders < 1 || st.MostHolders > st.Limit || st.MeanHolders <= 0 {
			t.Errorf("%s %s: want semaphore figures with at most %d holders, got %+v", s.Name, r.Path, s.Clients, r.Semaphore)
		}
	}
	if s.Mode == loadgen.ModeMixed {
		checkMixed(t, s.Name+" "+r.Path, s.Clients, r)
	}
	if s.Mode != loadgen.ModeContended {
		return
	}
	if f := r.Fairness; f == nil || f.Grants <= 0 || f.MaxGrants <= 0 || f.LongestWaitMS <= 0 || f.P99WaitMS <= 0 || f.FIFOBoundMS <= 0 {
		t.Errorf("%s %s: want fairness figures, got %+v", s.Name, r.Path, r.Fairness)
	}
	if r.Handoff == nil || r.Handoff.N == 0 {
		t.Errorf("%s %s: want handoff latencies, got %+v", s.Name, r.Path, r.Handoff)
	}
}

// checkMixed checks the figures of a shared/exclusive run of clients at a
// shared ratio of 0.5: both kinds granted (a run of a few hundred grants
// all of one kind has odds below 2^-100), never more holders than clients,
// no conflict.
func checkMixed(t *testing.T, name string, clients int, r *loadgen.Result) {
	t.Helper()
	m := r.Mixed
	switch {
	case m == nil:
		t.Errorf("%s: no shared/exclusive figures", name)
	case m.SharedGrants <= 0 || m.ExclusiveGrants <= 0:
		t.Errorf("%s: want shared and exclusive grants, got %+v", name, m)
	case m.MostHolders < 1 || m.MostHolders > clients:
		t.Errorf("%s: most holders at once %d, want 1 to %d", name, m.MostHolders, clients)
	case m.Conflicts != 0:
		t.Errorf("%s: %d grants began beside an exclusive one, want 0", name, m.Conflicts)
	case int64(m.ExclusiveWait.N) != m.ExclusiveGrants || int64(m.SharedWait.N) != m.SharedGrants || m.ExclusiveWait.P99 <= 0:
		t.Errorf("%s: want a wait per grant of each kind, got %+v", name, m)
	case m.SharedRatio != 0.5:
		t.Errorf("%s: shared ratio %v, want 0.5", name, m.SharedRatio)
	}
}
