package main

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/auth"
	"github.com/lockgate/lockgate/cmd/lockbench/loadgen"
	"github.com/lockgate/lockgate/internal/redistest"
)

// TestProcessesSmoke runs --processes briefly, with this test binary as the
// gateway (it runs app.Run as cmd/gateway does; a real run builds
// cmd/gateway, which takes too long for a test) and without etcd, and
// checks that the report has every figure. It asserts presence, never
// speed.
func TestProcessesSmoke(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	args := []string{"lockbench", "--processes", "--json", "--duration", "300ms",
		"--uncontended-clients", "2", "--contended-clients", "3", "--semaphore-clients", "5", "--semaphore-limit", "2",
		"--mixed-clients", "6", "--shared-ratio", "0.5", "--released-names", "200", "--gateway-bin", exe, "--etcd", "", "--pprof-dir", dir}
	var out, progress bytes.Buffer
	if err := run(t.Context(), args, &out, &progress); err != nil {
		t.Fatalf("lockbench --processes: %v\nprogress:\n%s", err, &progress)
	}
	if s := out.String() + progress.String(); strings.Contains(s, "eyJ") {
		t.Errorf("the output contains what looks like a JWT:\n%s", s)
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("the --json report does not parse: %v\n%s", err, &out)
	}
	c := rep.Comparison
	if c == nil {
		t.Fatalf("no comparison in the report:\n%s", &out)
	}
	got := map[string]bool{}
	for _, r := range c.Runs {
		got[r.Target+" "+r.Mode] = true
		if r.Result.Cycles <= 0 || r.Result.Acquire.N == 0 {
			t.Errorf("%s %s: want cycles and latencies, got %+v", r.Target, r.Mode, r.Result)
		}
		if r.Mode == loadgen.ModeUncontended && r.Target != "ceiling" && r.OverCeiling <= 0 {
			t.Errorf("%s: want a ratio to the ceiling, got %v", r.Target, r.OverCeiling)
		}
		if r.Mode == loadgen.ModeContended && r.Result.Fairness == nil {
			t.Errorf("%s contended: no fairness figures", r.Target)
		}
		if r.Mode == loadgen.ModeSemaphore {
			if st := r.Result.Semaphore; st == nil || st.Limit != 2 || st.MostHolders < 1 || st.MostHolders > 2 {
				t.Errorf("%s semaphore: want at most 2 holders, got %+v", r.Target, st)
			}
		}
		if r.Mode == loadgen.ModeMixed {
			checkMixed(t, r.Target+" mixed", r.Clients, &r.Result)
		}
		if r.ServerCPUUS < 0 || r.RedisCPUUS < 0 || r.BenchCPUUS < 0 {
			t.Errorf("%s %s: negative CPU %+v", r.Target, r.Mode, r)
		}
	}
	for _, want := range []string{"ceiling uncontended", "redis-ceiling uncontended", "embedded uncontended", "redis uncontended", "engine uncontended",
		"embedded contended", "redis contended", "engine contended", "embedded semaphore", "redis semaphore", "engine semaphore",
		"embedded mixed", "redis mixed", "engine mixed"} {
		if !got[want] {
			t.Errorf("no run of %s; got %v", want, got)
		}
	}
	for _, k := range []string{"ceiling contended", "ceiling semaphore", "ceiling mixed", "semaphore semaphore", "semaphore mixed",
		"redis-ceiling contended", "redis-ceiling semaphore", "redis-ceiling mixed"} {
		if got[k] {
			t.Errorf("a run of %s: that target has no such calls", k)
		}
	}
	if len(c.Goals) != 10 {
		t.Errorf("%d goals of #25 in the JSON, want 10: %+v", len(c.Goals), c.Goals)
	}
	if len(c.Notes) == 0 || !strings.Contains(c.Notes[0], "etcd not measured") {
		t.Errorf("notes = %q, want one saying etcd was skipped", c.Notes)
	}
	for _, name := range []string{"redis-cpu", "redis-allocs-before", "redis-allocs-after", "embedded-cpu"} {
		if fi, err := os.Stat(filepath.Join(dir, name+".pprof")); err != nil || fi.Size() == 0 {
			t.Errorf("--pprof-dir: want a non-empty %s.pprof (stat: %v)", name, err)
		}
	}
	var md bytes.Buffer
	if err := writeComparison(&md, &rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| HTTP ceiling", "| HTTP ceiling + plain Redis lock (SET NX PX / compare-and-delete) |", "| redis-ceiling | 2 |", "| lockgate, Redis backend |", "| lockgate, embedded backend |",
		"### Against the targets of #25", "### Uncontended", "### Contended", "| redis | 3 |", "etcd not measured",
		"### Semaphore", "| embedded | 5 | 2 |", "### Shared and exclusive", "| redis | 6 | 50 % |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the markdown report lacks %q:\n%s", want, &md)
		}
	}
}

// TestRedisCeilingLock drives the redis-ceiling's handler over HTTP against
// a real redis-server: one holder at a time, and a release with another
// token leaves the holder's lock in place.
func TestRedisCeilingLock(t *testing.T) {
	rs := redistest.Start(t)
	client := rs.Client(t)
	secret := randomSecret()
	authn, err := auth.NewAuthenticator(auth.Config{Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ceilingHandler(authn, &plainLock{client: client}))
	t.Cleanup(srv.Close)
	jwt, err := mintToken(secret, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ht, err := loadgen.NewHTTPTarget(srv.URL, jwt, "ns", time.Minute, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ht.Close)
	a, b := ht.NewSession(t.Context(), "x"), ht.NewSession(t.Context(), "x")
	key := plainKey("ns", "x")

	token, _, err := a.Acquire(0)
	if err != nil {
		t.Fatalf("first acquire: %v", err)
	}
	if _, _, err := b.Acquire(0); loadgen.ErrorClass(err) != "409 lock_held" {
		t.Errorf("second acquire: got %v, want 409 lock_held", err)
	}
	if err := b.Release("not-" + token); loadgen.ErrorClass(err) != "409 not_holder" {
		t.Errorf("release with another token: got %v, want 409 not_holder", err)
	}
	if got, err := client.Get(t.Context(), key).Result(); err != nil || got != token {
		t.Fatalf("after a release with another token, %s = %q (%v), want the holder's token", key, got, err)
	}
	if err := a.Release(token); err != nil {
		t.Fatalf("release by the holder: %v", err)
	}
	if n, err := client.Exists(t.Context(), key).Result(); err != nil || n != 0 {
		t.Errorf("after the holder's release, EXISTS %s = %d (%v), want 0", key, n, err)
	}
	if _, _, err := b.Acquire(0); err != nil {
		t.Errorf("acquire after the release: %v", err)
	}
}

func TestCPUTimeOfThisProcess(t *testing.T) {
	before, err := cpuTime(0)
	if err != nil {
		t.Fatalf("cpuTime: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		after, err := cpuTime(os.Getpid())
		if err != nil {
			t.Fatalf("cpuTime(pid): %v", err)
		}
		if after > before {
			return
		}
	}
	t.Error("10s of spinning did not move this process's CPU time")
}

// TestProcessesRepeatSmoke runs --processes --repeat 2 briefly (this test
// binary as the gateway, as in TestProcessesSmoke) and checks that each
// target and scenario has one summary of two rounds, each round's ratio
// against that round's ceiling. It asserts shape, never speed.
func TestProcessesRepeatSmoke(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"lockbench", "--processes", "--json", "--repeat", "2", "--duration", "200ms", "--targets", "ceiling,embedded",
		"--uncontended-clients", "2", "--contended-clients", "2", "--semaphore-clients", "0", "--mixed-clients", "0",
		"--gateway-bin", exe, "--etcd", ""}
	var out, progress bytes.Buffer
	if err := run(t.Context(), args, &out, &progress); err != nil {
		t.Fatalf("lockbench --processes --repeat 2: %v\nprogress:\n%s", err, &progress)
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("the --json report does not parse: %v\n%s", err, &out)
	}
	c := rep.Comparison
	if c == nil || c.Repeat != 2 {
		t.Fatalf("want a comparison of 2 rounds, got %+v", c)
	}
	var got []string
	for _, r := range c.Runs {
		got = append(got, r.Target+" "+r.Mode)
		if len(r.Rounds) != 2 {
			t.Errorf("%s %s: %d rounds, want 2", r.Target, r.Mode, len(r.Rounds))
		}
	}
	if want := []string{"ceiling uncontended", "embedded uncontended", "embedded contended"}; !slices.Equal(got, want) {
		t.Fatalf("runs %q, want %q", got, want)
	}
	ceiling, embedded := c.Runs[0], c.Runs[1]
	for i, r := range embedded.Rounds {
		want := r.Result.CyclesPerSec / ceiling.Rounds[i].Result.CyclesPerSec
		if r.Round != i+1 || math.Abs(r.OverCeiling-want) > 1e-9 {
			t.Errorf("embedded round %d: #%d, %v x ceiling; want #%d, %v (against round %d's ceiling)", i, r.Round, r.OverCeiling, i+1, want, i+1)
		}
	}
	if embedded.OverCeilingMin > embedded.OverCeiling || embedded.OverCeiling > embedded.OverCeilingMax || embedded.OverCeilingMin <= 0 {
		t.Errorf("embedded x ceiling %v (%v–%v): want the median within a positive spread", embedded.OverCeiling, embedded.OverCeilingMin, embedded.OverCeilingMax)
	}
	if n := strings.Count(progress.String(), "2/2 "); n != 3 {
		t.Errorf("progress names round 2 of 2 %d times, want 3:\n%s", n, &progress)
	}
}

func TestRepeatFlag(t *testing.T) {
	for name, args := range map[string][]string{
		"zero rounds":         {"lockbench", "--processes", "--repeat", "0"},
		"without --processes": {"lockbench", "--self", "--repeat", "2"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := parseConfig(args, io.Discard); err == nil {
				t.Errorf("parseConfig(%q) = nil error, want one", args)
			}
		})
	}
}

// TestContendedClientsZero: --contended-clients 0 leaves the contended runs
// out, as --semaphore-clients 0 and --mixed-clients 0 do theirs.
func TestContendedClientsZero(t *testing.T) {
	args := []string{"lockbench", "--processes", "--contended-clients", "0", "--semaphore-clients", "0", "--mixed-clients", "0"}
	cfg, err := parseConfig(args, io.Discard)
	if err != nil {
		t.Fatalf("parseConfig(%q): %v", args, err)
	}
	var modes []string
	for _, sc := range presetMatrix(cfg) {
		modes = append(modes, sc.Mode)
	}
	if want := []string{loadgen.ModeUncontended, loadgen.ModeUncontended}; !slices.Equal(modes, want) {
		t.Errorf("scenarios %q, want %q", modes, want)
	}
	rep := &Report{Comparison: &Comparison{Runs: []TargetRun{{Target: "ceiling", Label: "HTTP ceiling", Mode: loadgen.ModeUncontended, Clients: 16}}}}
	var md strings.Builder
	if err := writeComparison(&md, rep); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(md.String(), "### Contended") {
		t.Errorf("a report without contended runs has a contended section:\n%s", &md)
	}
}
