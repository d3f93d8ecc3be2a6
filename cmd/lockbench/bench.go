package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Report is everything one lockbench run measured.
type Report struct {
	// Target is "self" or the gateway's URL.
	Target       string           `json:"target"`
	Started      time.Time        `json:"started"`
	Machine      Machine          `json:"machine"`
	RedisVersion string           `json:"redis_version,omitempty"`
	Settings     Settings         `json:"settings"`
	Scenarios    []ScenarioReport `json:"scenarios"`
	HeldLocks    *HeldLockMemory  `json:"held_locks,omitempty"`
	Parked       *ParkedWaiters   `json:"parked_waiters,omitempty"`
	// Comparison is set by --processes, which leaves Scenarios empty.
	Comparison *Comparison `json:"comparison,omitempty"`
}

// Machine is where the load generator ran.
type Machine struct {
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Go         string `json:"go"`
	// LoadStart and LoadEnd are /proc/loadavg's 1, 5 and 15 minute load
	// averages when lockbench started and finished (Linux only): on a
	// shared machine they say how much else was running.
	LoadStart string `json:"load_start,omitempty"`
	LoadEnd   string `json:"load_end,omitempty"`
}

// loadAvg returns the 1, 5 and 15 minute load averages, or "" where
// /proc/loadavg does not exist.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// Settings are the knobs every scenario shared.
type Settings struct {
	DurationS float64 `json:"duration_s"`
	WaitMS    int64   `json:"wait_ms"`
	TTLMS     int64   `json:"ttl_ms"`
}

// ScenarioReport is one scenario against the gateway and the floor.
type ScenarioReport struct {
	Name    string  `json:"name"`
	Mode    string  `json:"mode"`
	Clients int     `json:"clients"`
	HoldMS  float64 `json:"hold_ms"`
	Gateway Result  `json:"gateway"`
	Floor   *Result `json:"floor,omitempty"`
	// GatewayOverFloor is the gateway's cycles/s over the floor's.
	GatewayOverFloor float64 `json:"gateway_over_floor,omitempty"`
}

// bench runs scenarios against one gateway and, when it knows the Redis,
// the floor.
type bench struct {
	cfg      config
	url      string
	token    string
	runID    string        // makes lock names unique to this run
	floor    *engineTarget // nil without Redis
	rdb      *redis.Client // nil without Redis
	progress io.Writer
	profiled bool
}

func newBench(cfg config, url, token, redisURL string, progress io.Writer) (*bench, error) {
	b := &bench{cfg: cfg, url: url, token: token, runID: randomID(), progress: progress}
	if redisURL == "" {
		return b, nil
	}
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return nil, errors.New("invalid --redis-url: want redis://[[user]:password@]host[:port][/db]")
	}
	b.rdb = redis.NewClient(opts)
	if cfg.floor {
		if b.floor, err = newEngineTarget(redisURL, cfg.namespace, cfg.ttl); err != nil {
			b.rdb.Close()
			return nil, err
		}
	}
	return b, nil
}

func (b *bench) close() {
	if b.floor != nil {
		b.floor.close()
	}
	if b.rdb != nil {
		b.rdb.Close()
	}
}

func randomID() string {
	id := make([]byte, 4)
	rand.Read(id) // never fails: see crypto/rand.Read
	return hex.EncodeToString(id)
}

func (b *bench) newReport(ctx context.Context, target string) *Report {
	r := &Report{
		Target:  target,
		Started: time.Now().UTC().Truncate(time.Second),
		Machine: Machine{
			OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(),
			GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version(),
			LoadStart: loadAvg(),
		},
		Settings: Settings{
			DurationS: b.cfg.duration.Seconds(),
			WaitMS:    b.cfg.wait.Milliseconds(),
			TTLMS:     b.cfg.ttl.Milliseconds(),
		},
	}
	if b.rdb != nil {
		r.RedisVersion, _ = infoField(ctx, b.rdb, "server", "redis_version")
	}
	return r
}

// scenario runs sc against the gateway, then the floor.
func (b *bench) scenario(ctx context.Context, sc Scenario, idx int) (ScenarioReport, error) {
	sr := ScenarioReport{Name: sc.String(), Mode: sc.Mode, Clients: sc.Clients, HoldMS: ms(int64(sc.Hold))}
	gw, err := newHTTPTarget(b.url, b.token, b.cfg.namespace, b.cfg.ttl, sc.Clients)
	if err != nil {
		return sr, err
	}
	defer gw.close()
	prefix := fmt.Sprintf("%s-%d", b.runID, idx)

	var h hooks
	var calls *RedisCalls
	if b.rdb != nil {
		h, calls = b.countCalls(ctx)
	}
	if b.cfg.cpuProfile != "" && !b.profiled && sc.Mode == uncontended {
		b.profiled = true
		h = b.profile(h)
	}
	var gwTarget, floorTarget target = gw, b.floor
	if sc.Mode == semaphoreMode {
		gwTarget, floorTarget = semaphoreTarget{http: gw, limit: sc.Limit}, semaphoreTarget{engine: b.floor, limit: sc.Limit}
	}
	fmt.Fprintf(b.progress, "%-36s gateway ... ", sc)
	sr.Gateway, err = runScenario(ctx, gwTarget, sc, "gateway", prefix+"-g", "client", h)
	if err != nil {
		fmt.Fprintln(b.progress)
		return sr, err
	}
	b.attachCalls(&sr.Gateway, calls)
	fmt.Fprintf(b.progress, "%7.0f cycles/s", sr.Gateway.CyclesPerSec)

	if b.floor != nil {
		h, calls = b.countCalls(ctx)
		fmt.Fprint(b.progress, "   floor ... ")
		floor, err := runScenario(ctx, floorTarget, sc, "floor", prefix+"-f", "floor", h)
		if err != nil {
			fmt.Fprintln(b.progress)
			return sr, err
		}
		b.attachCalls(&floor, calls)
		sr.Floor = &floor
		sr.GatewayOverFloor = sr.Gateway.CyclesPerSec / floor.CyclesPerSec
		fmt.Fprintf(b.progress, "%7.0f cycles/s   gateway/floor %.0f%%", floor.CyclesPerSec, 100*sr.GatewayOverFloor)
	}
	fmt.Fprintln(b.progress)
	return sr, nil
}

// countCalls returns hooks that snapshot INFO commandstats around the timed
// part of a run, and where the difference lands.
func (b *bench) countCalls(ctx context.Context) (hooks, *RedisCalls) {
	var before map[string]int64
	calls := &RedisCalls{}
	return hooks{
		start: func() { before, _ = commandCalls(ctx, b.rdb) },
		stop: func() {
			if after, err := commandCalls(ctx, b.rdb); err == nil && before != nil {
				*calls = diffCalls(before, after)
			}
		},
	}, calls
}

// attachCalls adds the Redis command counts to r, per grant.
func (b *bench) attachCalls(r *Result, calls *RedisCalls) {
	if calls == nil || calls.ByCommand == nil {
		return
	}
	grants := r.Cycles
	if r.Fairness != nil {
		grants = r.Fairness.Grants
	}
	if grants > 0 {
		calls.PerHandoff = float64(calls.Total) / float64(grants)
		var scripts int64
		for _, c := range scriptCommands {
			scripts += calls.ByCommand[c]
		}
		calls.ScriptsPerHandoff = float64(scripts) / float64(grants)
	}
	r.Redis = calls
}

// profile wraps h with a CPU profile of the timed part of the run.
func (b *bench) profile(h hooks) hooks {
	var f *os.File
	return hooks{
		start: func() {
			if h.start != nil {
				h.start()
			}
			var err error
			if f, err = os.Create(b.cfg.cpuProfile); err != nil {
				fmt.Fprintf(b.progress, "\n--cpuprofile: %v\n", err)
				return
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				fmt.Fprintf(b.progress, "\n--cpuprofile: %v\n", err)
				f.Close()
				f = nil
			}
		},
		stop: func() {
			if f != nil {
				pprof.StopCPUProfile()
				f.Close()
			}
			if h.stop != nil {
				h.stop()
			}
		},
	}
}

// runRemote runs the one scenario of the command line against --url.
func runRemote(ctx context.Context, cfg config, progress io.Writer) (*Report, error) {
	redisURL := cfg.redisURL
	b, err := newBench(cfg, cfg.url, cfg.token, redisURL, progress)
	if err != nil {
		return nil, err
	}
	defer b.close()
	rep := b.newReport(ctx, cfg.url)
	sc := Scenario{Mode: cfg.mode, Clients: cfg.clients, Duration: cfg.duration, Hold: cfg.hold, Wait: cfg.wait, Limit: cfg.semaphoreLimit,
		SharedRatio: cfg.sharedRatio}
	sr, err := b.scenario(ctx, sc, 0)
	if err != nil {
		return nil, err
	}
	rep.Scenarios = append(rep.Scenarios, sr)
	rep.Machine.LoadEnd = loadAvg()
	return rep, nil
}
