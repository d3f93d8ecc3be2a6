package loadgen

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Modes of a scenario (Scenario.Mode).
const (
	ModeUncontended = "uncontended" // every worker its own lock, no waiting
	ModeContended   = "contended"   // every worker on one lock, server-side waits
	// ModeSemaphore is a contended run on a semaphore: every worker takes a
	// permit of one semaphore of Scenario.Limit permits, waiting
	// server-side.
	ModeSemaphore = "semaphore"
	// ModeMixed is a contended run on one lock taken shared or exclusive:
	// each acquire is shared with probability Scenario.SharedRatio, and
	// waits server-side.
	ModeMixed = "mixed"
)

// Scenario is one load shape.
type Scenario struct {
	Mode     string        // one of the Mode constants
	Clients  int           // workers, each with one call in flight
	Duration time.Duration // how long workers start new cycles
	Hold     time.Duration // time between a grant and its release
	Wait     time.Duration // server-side wait of a contended acquire
	Limit    int           // semaphore mode: the semaphore's permits
	// SharedRatio is, in mixed mode, the share of acquires that ask for a
	// shared grant.
	SharedRatio float64
}

func (s Scenario) String() string {
	str := fmt.Sprintf("%s, %d clients", s.Mode, s.Clients)
	switch s.Mode {
	case ModeSemaphore:
		str = fmt.Sprintf("%s of %d, %d clients", s.Mode, s.Limit, s.Clients)
	case ModeMixed:
		str = fmt.Sprintf("%s %.0f%% shared, %d clients", s.Mode, 100*s.SharedRatio, s.Clients)
	}
	if s.Mode != ModeUncontended {
		str += fmt.Sprintf(", hold %s", s.Hold)
	}
	return str
}

// Result is what one run of a scenario against one target measured.
type Result struct {
	// Path is "gateway" (over HTTP) or "floor" (the engine in-process).
	Path string `json:"path"`
	// ElapsedS runs from the first cycle to the last worker's exit: workers
	// finish the cycle they are in when Duration is up.
	ElapsedS     float64 `json:"elapsed_s"`
	Cycles       int64   `json:"cycles"` // acquire + release, both successful
	CyclesPerSec float64 `json:"cycles_per_s"`
	// Acquire covers granted acquires only: in contended mode, the wait.
	Acquire Latency `json:"acquire"`
	Release Latency `json:"release"`
	// Handoff and Fairness are set in contended mode.
	Handoff  *Latency  `json:"handoff,omitempty"`
	Fairness *Fairness `json:"fairness,omitempty"`
	// Semaphore is set in semaphore mode.
	Semaphore *SemaphoreStats `json:"semaphore,omitempty"`
	// Mixed is set in mixed mode.
	Mixed *MixedStats `json:"mixed,omitempty"`
	// Redis counts the commands Redis ran during the run, when lockbench
	// can reach Redis.
	Redis *RedisCalls `json:"redis,omitempty"`
	// Errors counts failed calls by class ("409 lock_held", "transport").
	Errors map[string]int64 `json:"errors"`
}

// worker is one client's record of a run. Only its goroutine writes it.
type worker struct {
	acq, rel []int64   // latencies of successful calls, ns
	attempts []attempt // contended modes: every acquire, in order
	errors   map[string]int64
	cycles   int64
	firstErr error
}

func (w *worker) fail(err error) {
	w.errors[ErrorClass(err)]++
	if w.firstErr == nil {
		w.firstErr = err
	}
}

// Hooks run around the timed part of a run: Start after every worker's
// warm-up cycle, Stop after the last worker's exit. Either may be nil.
type Hooks struct {
	Start, Stop func()
}

// Run runs sc against tgt and returns what it measured, labelled path
// ("gateway", "floor", or a target's name). Lock names start with prefix,
// which must be unique to the run. Worker goroutines carry the pprof label
// lockbench=label, so that a CPU profile can tell them from the gateway.
func Run(ctx context.Context, tgt Target, sc Scenario, path, prefix, label string, h Hooks) (Result, error) {
	// A hard stop well past the expected end: a wedged server must not hang
	// the benchmark.
	ctx, cancel := context.WithTimeout(ctx, sc.Duration+sc.Wait+sc.Hold+time.Minute)
	defer cancel()

	workers := make([]*worker, sc.Clients)
	sessions := make([]Session, sc.Clients)
	warmups := make([]Session, sc.Clients)
	for i := range workers {
		workers[i] = &worker{
			acq:    make([]int64, 0, 1024),
			rel:    make([]int64, 0, 1024),
			errors: make(map[string]int64),
		}
		name := fmt.Sprintf("%s-w%d", prefix, i)
		warmups[i] = tgt.NewSession(ctx, name+"-warm")
		if sc.Mode != ModeUncontended {
			name = prefix + "-shared"
		}
		sessions[i] = tgt.NewSession(ctx, name)
		if _, ok := sessions[i].(SharedAcquirer); sc.Mode == ModeMixed && !ok {
			return Result{}, fmt.Errorf("%s: the target takes no shared grants", path)
		}
	}

	var stop atomic.Bool
	var base time.Time
	clock := func() int64 { return int64(time.Since(base)) }
	start := make(chan struct{})
	var warm, done sync.WaitGroup
	warmErrs := make([]error, sc.Clients)
	warm.Add(sc.Clients)
	done.Add(sc.Clients)
	for i, w := range workers {
		go pprof.Do(ctx, pprof.Labels("lockbench", label), func(ctx context.Context) {
			defer done.Done()
			// One cycle on a lock of its own opens the worker's connection
			// and loads the scripts before the clock starts.
			warmErrs[i] = warmUp(warmups[i])
			warm.Done()
			<-start
			if warmErrs[i] != nil {
				return
			}
			if sc.Mode != ModeUncontended {
				w.contend(ctx, sessions[i], sc, &stop, clock)
			} else {
				w.loop(ctx, sessions[i], sc, &stop, clock)
			}
		})
	}
	warm.Wait()
	if err := firstError(warmErrs); err != nil {
		close(start)
		done.Wait()
		return Result{}, fmt.Errorf("warm-up cycle: %w", err)
	}
	if h.Start != nil {
		h.Start()
	}
	base = time.Now() // written before close(start): the workers see it
	timer := time.AfterFunc(sc.Duration, func() { stop.Store(true) })
	defer timer.Stop()
	close(start)
	done.Wait()
	elapsed := time.Since(base)
	if h.Stop != nil {
		h.Stop()
	}
	return collect(workers, sc, path, elapsed)
}

func warmUp(s Session) error {
	token, _, err := s.Acquire(0)
	if err != nil {
		return err
	}
	return s.Release(token)
}

func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// loop is an uncontended worker: acquire without waiting, hold, release.
func (w *worker) loop(ctx context.Context, s Session, sc Scenario, stop *atomic.Bool, clock func() int64) {
	for !stop.Load() && ctx.Err() == nil {
		t0 := clock()
		token, _, err := s.Acquire(0)
		t1 := clock()
		if err != nil {
			w.fail(err)
			backOff(ctx)
			continue
		}
		w.acq = append(w.acq, t1-t0)
		hold(ctx, sc.Hold)
		t2 := clock()
		err = s.Release(token)
		t3 := clock()
		if err != nil {
			w.fail(err)
			continue
		}
		w.rel = append(w.rel, t3-t2)
		w.cycles++
	}
}

// contend is a contended worker: acquire with a server-side wait, hold,
// release, recording every call's times for the fairness analysis. A worker
// waiting when the time is up stays in line until it gets the lock, so the
// run ends with every waiter served, not with cancelled requests.
func (w *worker) contend(ctx context.Context, s Session, sc Scenario, stop *atomic.Bool, clock func() int64) {
	w.attempts = make([]attempt, 0, 1024)
	var rng *rand.Rand
	if sc.Mode == ModeMixed {
		rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	for !stop.Load() && ctx.Err() == nil {
		a := attempt{start: clock()}
		var token string
		var fence int64
		var err error
		if a.shared = rng != nil && rng.Float64() < sc.SharedRatio; a.shared {
			token, fence, err = s.(SharedAcquirer).AcquireShared(sc.Wait)
		} else {
			token, fence, err = s.Acquire(sc.Wait)
		}
		a.end = clock()
		if err != nil {
			w.attempts = append(w.attempts, a)
			w.fail(err)
			backOff(ctx)
			continue
		}
		a.granted, a.fence = true, fence
		w.acq = append(w.acq, a.end-a.start)
		hold(ctx, sc.Hold)
		a.relStart = clock()
		err = s.Release(token)
		a.relEnd = clock()
		if err != nil {
			w.fail(err)
		} else {
			a.released = true
			w.rel = append(w.rel, a.relEnd-a.relStart)
			w.cycles++
		}
		w.attempts = append(w.attempts, a)
	}
}

func hold(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// backOff keeps a failing worker (a gateway that is down, a wrong token)
// from spinning.
func backOff(ctx context.Context) { hold(ctx, time.Millisecond) }

// collect merges the workers' records into a Result.
func collect(workers []*worker, sc Scenario, path string, elapsed time.Duration) (Result, error) {
	r := Result{Path: path, ElapsedS: elapsed.Seconds(), Errors: make(map[string]int64)}
	var acq, rel []int64
	var firstErr error
	for _, w := range workers {
		r.Cycles += w.cycles
		acq = append(acq, w.acq...)
		rel = append(rel, w.rel...)
		for class, n := range w.errors {
			r.Errors[class] += n
		}
		if firstErr == nil {
			firstErr = w.firstErr
		}
	}
	if r.Cycles == 0 {
		return r, fmt.Errorf("%s: no successful cycle in %s (errors: %s): %w", path, elapsed.Round(time.Millisecond), FormatErrors(r.Errors), firstErr)
	}
	r.CyclesPerSec = float64(r.Cycles) / elapsed.Seconds()
	r.Acquire = summarize(acq)
	r.Release = summarize(rel)
	if sc.Mode == ModeContended {
		perWorker := make([][]attempt, len(workers))
		for i, w := range workers {
			perWorker[i] = w.attempts
		}
		f, handoffs := analyzeContention(perWorker, elapsed)
		hl := summarize(handoffs)
		r.Fairness, r.Handoff = &f, &hl
	}
	if sc.Mode == ModeSemaphore {
		perWorker := make([][]attempt, len(workers))
		for i, w := range workers {
			perWorker[i] = w.attempts
		}
		r.Semaphore = semaphoreStats(perWorker, sc.Limit, elapsed)
	}
	if sc.Mode == ModeMixed {
		perWorker := make([][]attempt, len(workers))
		for i, w := range workers {
			perWorker[i] = w.attempts
		}
		r.Mixed = mixedStats(perWorker, sc.SharedRatio)
	}
	return r, nil
}

// FormatErrors renders error counts as "409 lock_held ×3, transport ×1",
// or "none".
func FormatErrors(errs map[string]int64) string {
	if len(errs) == 0 {
		return "none"
	}
	var b strings.Builder
	for i, class := range slices.Sorted(maps.Keys(errs)) {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s ×%d", class, errs[class])
	}
	return b.String()
}
