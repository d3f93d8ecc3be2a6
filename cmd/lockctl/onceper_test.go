package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
)

// TestRunOncePer: three "lockctl run --once-per 3s" loops on one lock, as
// cron on three hosts, each ticking every 200 ms for 10 s, run the job at
// most once per 3 s in all, and at least as often as their ticks allow.
// A run that does not run the job exits 80 without a word.
func TestRunOncePer(t *testing.T) {
	const (
		period   = 3 * time.Second
		tick     = 200 * time.Millisecond
		duration = 10 * time.Second
	)
	rs := redistest.Start(t)
	gw := startGateway(t, "--redis-url", rs.URL())
	runs := filepath.Join(t.TempDir(), "runs")
	job := "date +%s%N >> " + shq(runs)

	var (
		mu    sync.Mutex
		ticks []time.Time // when each tick of any loop began
		ran   int         // runs that exited 0: the job ran
	)
	start := time.Now()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for next := time.Now(); time.Since(start) < duration; next = next.Add(tick) {
				time.Sleep(time.Until(next)) // a cron's tick, not synchronisation
				mu.Lock()
				ticks = append(ticks, time.Now())
				mu.Unlock()
				r := <-lockctlAsync(t, gw, nil, "run", "cron/report", "--once-per", period.String(), "--", "sh", "-c", job)
				switch {
				case r.code == exitOK:
					mu.Lock()
					ran++
					mu.Unlock()
				case r.code == exitHeld && r.stderr == "":
				default:
					t.Errorf("run: exit %d, stderr %q; want 0, or 80 and nothing said", r.code, r.stderr)
					return
				}
			}
		})
	}
	wg.Wait()
	end := time.Now()

	b, err := os.ReadFile(runs)
	if err != nil {
		t.Fatalf("the job never ran: %v", err)
	}
	var starts []time.Time
	for _, line := range strings.Fields(string(b)) {
		ns, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			t.Fatalf("runs file: %q: %v", line, err)
		}
		starts = append(starts, time.Unix(0, ns))
	}
	if len(starts) != ran {
		t.Fatalf("the job ran %d times, but %d runs exited 0", len(starts), ran)
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	// Each run's grant keeps the lock for the period from when it was
	// made, before its job starts: two starts are a period apart, less
	// the time a job takes to start after its grant (a fork, a few ms;
	// 300 ms allows for a busy machine, and is far from a tick).
	for i := 1; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < period-300*time.Millisecond {
			t.Errorf("job runs %d and %d started %v apart, want at least %v", i, i+1, gap, period)
		}
	}
	if most := int(end.Sub(start)/period) + 1; len(starts) > most {
		t.Errorf("the job ran %d times in %v, want at most %d", len(starts), end.Sub(start), most)
	}
	// After each run, the first tick past its period runs the job again:
	// the widest gap between two ticks (of any loop) bounds the wait.
	slices.SortFunc(ticks, func(a, b time.Time) int { return a.Compare(b) })
	widest := time.Duration(0)
	for i := 1; i < len(ticks); i++ {
		widest = max(widest, ticks[i].Sub(ticks[i-1]))
	}
	span := ticks[len(ticks)-1].Sub(ticks[0])
	if least := int(span / (period + widest + 300*time.Millisecond)); len(starts) < least {
		t.Errorf("the job ran %d times over %v of ticks (widest gap %v), want at least %d", len(starts), span, widest, least)
	}
	t.Logf("the job ran %d times in %v (%d ticks, widest gap %v)", len(starts), end.Sub(start), len(ticks), widest)
}
