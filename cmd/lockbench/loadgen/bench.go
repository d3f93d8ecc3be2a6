package loadgen

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options are the settings every scenario of a Bench shares.
type Options struct {
	Namespace string        // of the benchmark's locks
	TTL       time.Duration // lease of each grant
	// Duration and Wait are recorded in the report's Settings; each
	// Scenario carries its own.
	Duration, Wait time.Duration
	// Floor also runs each scenario against the engine in-process, when
	// the Bench knows the Redis.
	Floor bool
	// CPUProfile, when set, is where a CPU profile of this process during
	// the first uncontended gateway run goes.
	CPUProfile string
}

// Bench runs scenarios against one gateway and, when it knows the Redis,
// the floor.
type Bench struct {
	opts     Options
	url      string
	token    string
	runID    string        // makes lock names unique to this run
	floor    *EngineTarget // nil without Redis
	rdb      *redis.Client // nil without Redis
	progress io.Writer
	profiled bool
}

// NewBench returns a Bench of the gateway at url, authenticated with
// token. With redisURL, the gateway's Redis, it counts the Redis commands
// of each run, and measures the floor when opts ask for it. Progress goes
// to progress.
func NewBench(opts Options, url, token, redisURL string, progress io.Writer) (*Bench, error) {
	b := &Bench{opts: opts, url: url, token: token, runID: randomID(), progress: progress}
	if redisURL == "" {
		return b, nil
	}
	ro, err := redis.ParseURL(redisURL)
	if err != nil {
		return nil, errors.New("invalid --redis-url: want redis://[[user]:password@]host[:port][/db]")
	}
	b.rdb = redis.NewClient(ro)
	if opts.Floor {
		if b.floor, err = NewEngineTarget(redisURL, opts.Namespace, opts.TTL); err != nil {
			b.rdb.Close()
			return nil, err
		}
	}
	return b, nil
}

// Close closes the bench's Redis connections.
func (b *Bench) Close() {
	if b.floor != nil {
		b.floor.Close()
	}
	if b.rdb != nil {
		b.rdb.Close()
	}
}

// RunID makes the bench's lock names unique to it.
func (b *Bench) RunID() string { return b.runID }

// Redis is a client of the gateway's Redis, or nil when the bench has none.
func (b *Bench) Redis() *redis.Client { return b.rdb }

func randomID() string {
	id := make([]byte, 4)
	rand.Read(id) // never fails: see crypto/rand.Read
	return hex.EncodeToString(id)
}

// NewReport starts the report of a run against target, under these
// options, and of Redis when the bench knows it.
func (b *Bench) NewReport(ctx context.Context, target string) *Report {
	r := NewReport(target, b.opts)
	if b.rdb != nil {
		r.RedisVersion, _ = InfoField(ctx, b.rdb, "server", "redis_version")
	}
	return r
}

// Scenario runs sc against the gateway, then the floor. idx numbers sc
// among the bench's scenarios: it keeps their lock names apart.
func (b *Bench) Scenario(ctx context.Context, sc Scenario, idx int) (ScenarioReport, error) {
	sr := ScenarioReport{Name: sc.String(), Mode: sc.Mode, Clients: sc.Clients, HoldMS: ms(int64(sc.Hold))}
	gw, err := NewHTTPTarget(b.url, b.token, b.opts.Namespace, b.opts.TTL, sc.Clients)
	if err != nil {
		return sr, err
	}
	defer gw.Close()
	prefix := fmt.Sprintf("%s-%d", b.runID, idx)

	var h Hooks
	var calls *RedisCalls
	if b.rdb != nil {
		h, calls = b.countCalls(ctx)
	}
	if b.opts.CPUProfile != "" && !b.profiled && sc.Mode == ModeUncontended {
		b.profiled = true
		h = b.profile(h)
	}
	var gwTarget, floorTarget Target = gw, b.floor
	if sc.Mode == ModeSemaphore {
		gwTarget, floorTarget = SemaphoreTarget{HTTP: gw, Limit: sc.Limit}, SemaphoreTarget{Engine: b.floor, Limit: sc.Limit}
	}
	fmt.Fprintf(b.progress, "%-36s gateway ... ", sc)
	sr.Gateway, err = Run(ctx, gwTarget, sc, "gateway", prefix+"-g", "client", h)
	if err != nil {
		fmt.Fprintln(b.progress)
		return sr, err
	}
	b.attachCalls(&sr.Gateway, calls)
	fmt.Fprintf(b.progress, "%7.0f cycles/s", sr.Gateway.CyclesPerSec)

	if b.floor != nil {
		h, calls = b.countCalls(ctx)
		fmt.Fprint(b.progress, "   floor ... ")
		floor, err := Run(ctx, floorTarget, sc, "floor", prefix+"-f", "floor", h)
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

// countCalls returns Hooks that snapshot INFO commandstats around the timed
// part of a run, and where the difference lands.
func (b *Bench) countCalls(ctx context.Context) (Hooks, *RedisCalls) {
	var before map[string]int64
	calls := &RedisCalls{}
	return Hooks{
		Start: func() { before, _ = commandCalls(ctx, b.rdb) },
		Stop: func() {
			if after, err := commandCalls(ctx, b.rdb); err == nil && before != nil {
				*calls = diffCalls(before, after)
			}
		},
	}, calls
}

// attachCalls adds the Redis command counts to r, per grant.
func (b *Bench) attachCalls(r *Result, calls *RedisCalls) {
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
func (b *Bench) profile(h Hooks) Hooks {
	var f *os.File
	return Hooks{
		Start: func() {
			if h.Start != nil {
				h.Start()
			}
			var err error
			if f, err = os.Create(b.opts.CPUProfile); err != nil {
				fmt.Fprintf(b.progress, "\n--cpuprofile: %v\n", err)
				return
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				fmt.Fprintf(b.progress, "\n--cpuprofile: %v\n", err)
				f.Close()
				f = nil
			}
		},
		Stop: func() {
			if f != nil {
				pprof.StopCPUProfile()
				f.Close()
			}
			if h.Stop != nil {
				h.Stop()
			}
		},
	}
}
