package safety

import (
	"sync"
	"testing"
	"time"
)

// stalls records when the test's process made no progress: the gateways
// run inside it, so a bound on how late they answer holds only for the
// time the process ran. On a machine that runs four test packages with
// -race beside other load, the kernel or the runtime can leave every
// goroutine of the process unscheduled for seconds (TestRandomFaults saw
// an acquire answered 3.2 s past its deadline in a run that made a third
// of the calls a quiet run makes). A hang of the gateway stalls nothing
// here, so the bounds still find one.
//
// A goroutine ticks every stallTick and notes each gap between two ticks
// longer than stallGap: the process did not run it for that long.
type stalls struct {
	mu   sync.Mutex
	gaps [][2]time.Time
}

const (
	stallTick = 5 * time.Millisecond
	stallGap  = 50 * time.Millisecond
)

// watchStalls starts recording the process's stalls, until the test ends.
func watchStalls(t *testing.T) *stalls {
	s := &stalls{}
	done := make(chan struct{})
	stopped := make(chan struct{})
	t.Cleanup(func() { close(done); <-stopped })
	go func() {
		defer close(stopped)
		tick := time.NewTicker(stallTick)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				now := time.Now() // not the tick's time, which is when it was due, not when it ran
				if now.Sub(last) > stallGap {
					s.mu.Lock()
					s.gaps = append(s.gaps, [2]time.Time{last, now})
					s.mu.Unlock()
				}
				last = now
			}
		}
	}()
	return s
}

// within returns how long the process stalled between from and to.
func (s *stalls) within(from, to time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d time.Duration
	for _, g := range s.gaps {
		start, end := g[0], g[1]
		if from.After(start) {
			start = from
		}
		if to.Before(end) {
			end = to
		}
		if end.After(start) {
			d += end.Sub(start)
		}
	}
	return d
}

// longest returns the longest stall recorded.
func (s *stalls) longest() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d time.Duration
	for _, g := range s.gaps {
		d = max(d, g[1].Sub(g[0]))
	}
	return d
}

func TestStallsWithin(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	s := &stalls{gaps: [][2]time.Time{{at(100), at(400)}, {at(1000), at(1100)}}}
	for _, c := range []struct {
		from, to int
		want     time.Duration
	}{
		{0, 50, 0},
		{0, 2000, 400 * time.Millisecond},
		{200, 1050, 250 * time.Millisecond},
		{150, 300, 150 * time.Millisecond},
	} {
		if got := s.within(at(c.from), at(c.to)); got != c.want {
			t.Errorf("within(%d ms, %d ms) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
	if got := s.longest(); got != 300*time.Millisecond {
		t.Errorf("longest = %v, want 300ms", got)
	}
}
