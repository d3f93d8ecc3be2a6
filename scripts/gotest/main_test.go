package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// ev is one line of go test -json.
func ev(t *testing.T, action, test, output string, elapsed float64) string {
	t.Helper()
	b, err := json.Marshal(event{Action: action, Package: "example.com/m/p", Test: test, Output: output, Elapsed: elapsed})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPrinter(t *testing.T) {
	tests := []struct {
		name   string
		events func(t *testing.T) []string
		want   string
		failed []string
	}{
		{
			name: "a passing package prints its ok line only",
			events: func(t *testing.T) []string {
				return []string{
					ev(t, "start", "", "", 0),
					ev(t, "run", "TestA", "", 0),
					ev(t, "output", "TestA", "=== RUN   TestA\n", 0),
					ev(t, "output", "TestA", "    a_test.go:9: a log line\n", 0),
					ev(t, "output", "TestA", "--- PASS: TestA (0.01s)\n", 0),
					ev(t, "pass", "TestA", "", 0.01),
					ev(t, "output", "", "PASS\n", 0),
					ev(t, "output", "", "ok  \texample.com/m/p\t0.02s\n", 0),
					ev(t, "pass", "", "", 0.02),
				}
			},
			want: "ok  \texample.com/m/p\t0.02s\n",
		},
		{
			name: "a failed test prints its failed tests, one by one, and its package's FAIL line",
			events: func(t *testing.T) []string {
				return []string{
					ev(t, "run", "TestB", "", 0),
					ev(t, "output", "TestB", "=== RUN   TestB\n", 0),
					ev(t, "run", "TestB/x", "", 0),
					ev(t, "output", "TestB/x", "=== RUN   TestB/x\n", 0),
					ev(t, "run", "TestB/y", "", 0),
					ev(t, "output", "TestB/y", "=== RUN   TestB/y\n", 0),
					ev(t, "output", "TestB/y", "    b_test.go:5: y logs\n", 0),
					ev(t, "output", "TestB/x", "    b_test.go:7: got 1, want 2\n", 0),
					ev(t, "output", "TestB", "--- FAIL: TestB (0.10s)\n", 0),
					ev(t, "output", "TestB/x", "    --- FAIL: TestB/x (0.05s)\n", 0),
					ev(t, "fail", "TestB/x", "", 0.05),
					ev(t, "output", "TestB/y", "    --- PASS: TestB/y (0.05s)\n", 0),
					ev(t, "pass", "TestB/y", "", 0.05),
					ev(t, "fail", "TestB", "", 0.1),
					ev(t, "output", "", "FAIL\n", 0),
					ev(t, "output", "", "FAIL\texample.com/m/p\t0.12s\n", 0),
					ev(t, "fail", "", "", 0.12),
				}
			},
			want: "--- FAIL: TestB (0.10s)\n" +
				"    b_test.go:7: got 1, want 2\n    --- FAIL: TestB/x (0.05s)\n" +
				"FAIL\nFAIL\texample.com/m/p\t0.12s\n",
			failed: []string{"FAIL\texample.com/m/p\t0.12s"},
		},
		{
			name: "a slow test says so as it passes",
			events: func(t *testing.T) []string {
				return []string{
					ev(t, "run", "TestSlow", "", 0),
					ev(t, "pass", "TestSlow", "", 12.34),
				}
			},
			want: "    pass example.com/m/p TestSlow (12.3s)\n",
		},
		{
			name: "a skip says why",
			events: func(t *testing.T) []string {
				return []string{
					ev(t, "run", "TestC", "", 0),
					ev(t, "run", "TestC/z", "", 0),
					ev(t, "output", "TestC/z", "    c_test.go:3: no redis-server\n", 0),
					ev(t, "output", "TestC/z", "--- SKIP: TestC/z (0.00s)\n", 0),
					ev(t, "skip", "TestC/z", "", 0),
					ev(t, "pass", "TestC", "", 0),
				}
			},
			want: "    skip example.com/m/p TestC/z: c_test.go:3: no redis-server\n",
		},
		{
			name: "a package that died shows what its running tests printed",
			events: func(t *testing.T) []string {
				return []string{
					ev(t, "run", "TestD", "", 0),
					ev(t, "output", "TestD", "    d_test.go:1: before the panic\n", 0),
					ev(t, "output", "", "panic: test timed out after 1s\n", 0),
					ev(t, "output", "", "FAIL\texample.com/m/p\t1.01s\n", 0),
					ev(t, "fail", "", "", 1.01),
				}
			},
			want: "panic: test timed out after 1s\nFAIL\texample.com/m/p\t1.01s\n" +
				"--- still running when example.com/m/p ended: TestD\n    d_test.go:1: before the panic\n",
			failed: []string{"FAIL\texample.com/m/p\t1.01s"},
		},
		{
			name: "a line that is no event passes through",
			events: func(t *testing.T) []string {
				return []string{"# example.com/m/p", "p.go:1:1: syntax error"}
			},
			want: "# example.com/m/p\np.go:1:1: syntax error\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			p := newPrinter(&out, time.Now)
			for _, l := range tc.events(t) {
				p.line(l)
			}
			if got := out.String(); got != tc.want {
				t.Errorf("got output\n%q\nwant\n%q", got, tc.want)
			}
			if !slices.Equal(p.failedPackages, tc.failed) {
				t.Errorf("got failed packages %q, want %q", p.failedPackages, tc.failed)
			}
		})
	}
}

// TestPrinterQuiet: after quiet without a line, it names the tests
// running, longest first, and then waits for the next quiet spell.
func TestPrinterQuiet(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var out strings.Builder
	p := newPrinter(&out, func() time.Time { return now })
	p.module = "example.com/m"
	p.tick()
	if out.Len() != 0 {
		t.Fatalf("got %q at once, want nothing", out.String())
	}
	now = now.Add(quiet)
	p.tick()
	if got, want := out.String(), "    building test binaries (30s so far) ...\n"; got != want {
		t.Fatalf("got %q with nothing running, want %q", got, want)
	}
	out.Reset()
	p.line(ev(t, "run", "TestOld", "", 0))
	now = now.Add(10 * time.Second)
	p.line(ev(t, "run", "TestNew", "", 0))
	now = now.Add(quiet - 11*time.Second) // 29 s after the last line
	p.tick()
	if out.Len() != 0 {
		t.Fatalf("got %q before quiet passed, want nothing", out.String())
	}
	now = now.Add(10 * time.Second)
	p.tick()
	want := "    running p TestOld (39s), p TestNew (29s)\n"
	if got := out.String(); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	p.tick()
	if got := out.String(); got != want {
		t.Errorf("got %q right after, want it once", got)
	}
}

func TestOwnFlags(t *testing.T) {
	o, rest := ownFlags([]string{"-C", "tools/lab", "-failed", "f", "-started", "s", "-race", "-count=1", "./..."})
	if want := (options{dir: "tools/lab", failed: "f", started: "s"}); o != want || !slices.Equal(rest, []string{"-race", "-count=1", "./..."}) {
		t.Errorf("got %+v, %q; want %+v, and go test's flags", o, rest, want)
	}
	o, rest = ownFlags([]string{"-race", "./..."})
	if o != (options{}) || !slices.Equal(rest, []string{"-race", "./..."}) {
		t.Errorf("got %+v, %q; want go test's flags alone", o, rest)
	}
}

// TestPrinterStarted: started is called once, at the first event of a
// test binary that runs, not at build output before it.
func TestPrinterStarted(t *testing.T) {
	var b strings.Builder
	p := newPrinter(&b, time.Now)
	calls := 0
	p.started = func() { calls++ }
	p.line(`{"Action":"build-output","ImportPath":"example.com/m/p","Output":"# example.com/m/p\n"}`)
	if calls != 0 {
		t.Fatalf("started was called %d times on build output, want 0", calls)
	}
	for _, l := range []string{ev(t, "start", "", "", 0), ev(t, "run", "TestA", "", 0), ev(t, "start", "", "", 0)} {
		p.line(l)
	}
	if calls != 1 {
		t.Fatalf("started was called %d times, want once", calls)
	}
}
