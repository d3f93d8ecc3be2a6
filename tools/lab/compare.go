package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/cmd/lockbench/loadgen"
)

// Comparison is what --processes measured: every target as its own
// process, one scenario after another, each scenario run against every
// target in turn so that the ratios come from one stretch of the machine's
// load.
type Comparison struct {
	Runs  []TargetRun `json:"runs"`
	Notes []string    `json:"notes,omitempty"`
	// EtcdVersion is set when etcd ran.
	EtcdVersion string `json:"etcd_version,omitempty"`
	// Released is what a released lock name keeps in Redis, per Redis
	// gateway target (--released-names).
	Released []ReleasedNameMemory `json:"released,omitempty"`
	// Repeat is the rounds of each scenario (--repeat), when more than one:
	// then each of Runs summarises its Rounds (see combineRounds).
	Repeat int `json:"repeat,omitempty"`
	// Goals are the targets of issue #25 against the runs (see goals.go).
	Goals []GoalCheck `json:"goals_of_25,omitempty"`
}

// TargetRun is one scenario against one target.
type TargetRun struct {
	Target  string         `json:"target"` // ceiling, redis-ceiling, embedded, redis, engine, plain, etcd
	Label   string         `json:"label"`
	Mode    string         `json:"mode"`
	Clients int            `json:"clients"`
	Result  loadgen.Result `json:"result"`
	// OverCeiling is cycles/s over the ceiling's in the same scenario
	// (uncontended runs only); of rounds, the median of each round's ratio
	// to that round's ceiling, and OverCeilingMin and OverCeilingMax the
	// rounds' spread.
	OverCeiling    float64 `json:"over_ceiling,omitempty"`
	OverCeilingMin float64 `json:"over_ceiling_min,omitempty"`
	OverCeilingMax float64 `json:"over_ceiling_max,omitempty"`
	// CPU per cycle in µs, from /proc/<pid>/stat (10 ms ticks): of the
	// target's server process, of its redis-server, and of the lab (the
	// load generator, reported as lockbench; for the engine target, the
	// engine too).
	ServerCPUUS float64 `json:"server_cpu_us_per_cycle,omitempty"`
	RedisCPUUS  float64 `json:"redis_cpu_us_per_cycle,omitempty"`
	BenchCPUUS  float64 `json:"lockbench_cpu_us_per_cycle,omitempty"`
	// ServerSyscalls is the server process's read and write system calls
	// per cycle, from /proc/<pid>/io: unlike CPU time, the load of the
	// machine hardly moves it.
	ServerSyscalls float64 `json:"server_syscalls_per_cycle,omitempty"`
	// Redis is Redis's own accounting of the run, per cycle, for a target
	// on the lab's redis-server (see rediscost.go).
	Redis *redisCost `json:"redis,omitempty"`
	// RedisOverPlain is Redis's main-thread CPU per cycle over the plain
	// lock's in the same round and scenario; of rounds, the median of the
	// rounds' ratios, and the min and max.
	RedisOverPlain    float64 `json:"redis_over_plain,omitempty"`
	RedisOverPlainMin float64 `json:"redis_over_plain_min,omitempty"`
	RedisOverPlainMax float64 `json:"redis_over_plain_max,omitempty"`
	// Round numbers a run among its scenario's Rounds, from 1.
	Round int `json:"round,omitempty"`
	// Rounds are the runs a summary of --repeat N > 1 was made from, in
	// the order they ran.
	Rounds []TargetRun `json:"rounds,omitempty"`
}

// Targets of --processes, in the order each scenario runs them.
// "redis-h0" is the Redis gateway with --history 0, uncontended only: the
// lock scripts' cost without the history. "replicated" is the Redis gateway with --redis-min-replicas 1: asked
// for, it gives the Redis a replica, which the "redis" target then has too,
// so that the two differ only in the WAIT. "redis-ceiling" is the ceiling
// with the plain lock on the Redis targets' redis-server behind it.
var allTargets = []string{"ceiling", "redis-ceiling", "embedded", "redis", "redis-h0", "replicated", "engine", "semaphore", "plain", "etcd"}

// defaultTargets are the targets of --processes without --targets.
var defaultTargets = slices.DeleteFunc(slices.Clone(allTargets), func(t string) bool { return t == "replicated" })

// procTarget is a target and the processes whose CPU its cycles cost.
type procTarget struct {
	key, label string
	tgt        loadgen.Target
	close      func()
	server     int           // pid of the server process, or 0
	redis      int           // pid of the redis-server it uses, or 0
	rdb        *redis.Client // the lab's client of that redis-server, or nil
	contended  bool
	// semaphore takes permits of semaphores of a limit, the way tgt takes
	// locks; nil when the target has no semaphores.
	semaphore func(limit int) loadgen.Target
	mixed     bool   // its sessions take shared grants too
	pprofAddr string // the gateway's LOCKGATE_PPROF_ADDR, or ""
	profiled  bool
}

// runProcesses starts every target of cfg.targets as its own process, runs
// the scenario matrix against each, and stops them.
func runProcesses(ctx context.Context, cfg config, progress io.Writer) (*Report, error) {
	tmp, err := os.MkdirTemp("", "lockbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	secret := randomSecret()
	token, err := mintToken(secret, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	if cfg.pprofDir != "" {
		if err := os.MkdirAll(cfg.pprofDir, 0o755); err != nil {
			return nil, fmt.Errorf("--pprof-dir: %w", err)
		}
	}
	want := func(k string) bool { return slices.Contains(cfg.targets, k) }
	cmp := &Comparison{}
	rep := &Report{Report: *loadgen.NewReport("processes", cfg.benchOptions())}
	rep.Comparison = cmp

	var stops []func()
	defer func() {
		for _, stop := range slices.Backward(stops) {
			stop()
		}
	}()
	var targets []*procTarget
	var labRDB *redis.Client // the lab's own client of the Redis targets' redis-server
	add := func(t *procTarget) {
		if t.redis != 0 {
			t.rdb = labRDB
		}
		targets = append(targets, t)
		stops = append(stops, t.close)
	}

	var rp *redisProc
	if want("redis") || want("redis-h0") || want("replicated") || want("engine") || want("semaphore") || want("plain") || want("redis-ceiling") {
		if rp, err = startRedis(ctx, cfg.redisServer); err != nil {
			return nil, err
		}
		stops = append(stops, rp.stop)
		if want("replicated") {
			replica, err := startReplica(ctx, cfg.redisServer, rp)
			if err != nil {
				return nil, err
			}
			stops = append(stops, replica.stop)
			cmp.Notes = append(cmp.Notes, "the Redis of every Redis target had a replica on loopback (for the replicated target), whose CPU is not counted")
		}
		labRDB = redis.NewClient(&redis.Options{Addr: rp.addr, MaxRetries: -1})
		stops = append(stops, func() { labRDB.Close() })
		rep.RedisVersion, _ = loadgen.InfoField(ctx, labRDB, "server", "redis_version")
	}
	for _, k := range []string{"ceiling", "redis-ceiling"} {
		if !want(k) {
			continue
		}
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		env := map[string]string{roleEnv: "ceiling", "LOCKGATE_JWT_SECRET": string(secret)}
		label, redisPID := "HTTP ceiling (net/http + JWT check, no locking)", 0
		if k == "redis-ceiling" {
			// Uncontended only, as plain: it cannot wait.
			env[ceilingRedisEnv] = rp.url()
			label, redisPID = "HTTP ceiling + plain Redis lock (SET NX PX / compare-and-delete)", rp.cmd.Process.Pid
		}
		p, err := startChild(ctx, k, exe, nil, env)
		if err != nil {
			return nil, err
		}
		stops = append(stops, p.stop)
		ht, err := loadgen.NewHTTPTarget(p.url, token, cfg.namespace, cfg.ttl, maxClients(cfg))
		if err != nil {
			return nil, err
		}
		add(&procTarget{key: k, label: label, tgt: ht, close: ht.Close, server: p.pid(), redis: redisPID})
	}
	if want("embedded") || want("redis") || want("redis-h0") || want("replicated") {
		bin := cfg.gatewayBin
		if bin == "" {
			fmt.Fprint(progress, "go build cmd/gateway ... ")
			if bin, err = buildGateway(ctx, tmp); err != nil {
				return nil, err
			}
			fmt.Fprintln(progress, "done")
		}
		for _, k := range []string{"embedded", "redis", "redis-h0", "replicated"} {
			if !want(k) {
				continue
			}
			args := []string{"--addr", "127.0.0.1:0", "--shutdown-timeout", "5s"}
			label := "lockgate, embedded backend"
			var redisPID int
			if k == "redis" {
				args = append(args, "--redis-url", rp.url())
				label, redisPID = "lockgate, Redis backend", rp.cmd.Process.Pid
			}
			if k == "redis-h0" {
				args = append(args, "--redis-url", rp.url(), "--history", "0")
				label, redisPID = "lockgate, Redis backend, --history 0", rp.cmd.Process.Pid
			}
			if k == "replicated" {
				args = append(args, "--redis-url", rp.url(), "--redis-min-replicas", "1")
				label, redisPID = "lockgate, Redis backend, --redis-min-replicas 1", rp.cmd.Process.Pid
			}
			env := map[string]string{roleEnv: "gateway", "LOCKGATE_JWT_SECRET": string(secret), "LOCKGATE_LOG_LEVEL": "warn"}
			var pprofAddr string
			if cfg.pprofDir != "" {
				if pprofAddr, err = freeLoopbackAddr(); err != nil {
					return nil, err
				}
				env["LOCKGATE_PPROF_ADDR"] = pprofAddr
			}
			p, err := startChild(ctx, "gateway ("+k+")", bin, args, env)
			if err != nil {
				return nil, err
			}
			stops = append(stops, p.stop)
			ht, err := loadgen.NewHTTPTarget(p.url, token, cfg.namespace, cfg.ttl, maxClients(cfg))
			if err != nil {
				return nil, err
			}
			pt := &procTarget{key: k, label: label, tgt: ht, close: ht.Close, server: p.pid(), redis: redisPID, contended: true, pprofAddr: pprofAddr,
				semaphore: func(limit int) loadgen.Target { return loadgen.SemaphoreTarget{HTTP: ht, Limit: limit} }, mixed: true}
			if k == "redis-h0" { // the history's share of the uncontended cycle, nothing more
				pt.contended, pt.semaphore, pt.mixed = false, nil, false
			}
			add(pt)
		}
	}
	if want("engine") {
		et, err := loadgen.NewEngineTarget(rp.url(), cfg.namespace, cfg.ttl)
		if err != nil {
			return nil, err
		}
		add(&procTarget{key: "engine", label: "lock engine in lockbench's process (no HTTP)", tgt: et, close: func() { et.Close() },
			redis: rp.cmd.Process.Pid, contended: true, mixed: true,
			semaphore: func(limit int) loadgen.Target { return loadgen.SemaphoreTarget{Engine: et, Limit: limit} }})
	}
	if want("semaphore") {
		// A semaphore of one permit: the lock's protocol through the
		// semaphore's scripts. No HTTP: the gateway has no semaphore
		// endpoints yet.
		et, err := loadgen.NewEngineTarget(rp.url(), cfg.namespace, cfg.ttl)
		if err != nil {
			return nil, err
		}
		et.Permits = 1
		add(&procTarget{key: "semaphore", label: "semaphore engine, 1 permit, in lockbench's process (no HTTP)", tgt: et, close: func() { et.Close() },
			redis: rp.cmd.Process.Pid, contended: true})
	}
	if want("plain") {
		pt, err := newPlainTarget(rp.url(), cfg.namespace, cfg.ttl)
		if err != nil {
			return nil, err
		}
		add(&procTarget{key: "plain", label: "plain Redis lock in lockbench's process: SET NX PX, compare-and-delete (no HTTP, no queue)",
			tgt: pt, close: func() { pt.close() }, redis: rp.cmd.Process.Pid})
	}
	if want("etcd") {
		if bin, ok := etcdBin(cfg.etcd); !ok {
			cmp.Notes = append(cmp.Notes, fmt.Sprintf("etcd not measured: no %q on PATH (apt-get install etcd-server for etcd 3.4)", cfg.etcd))
		} else {
			ep, err := startEtcd(ctx, bin, filepath.Join(tmp, "etcd"))
			if err != nil {
				return nil, err
			}
			stops = append(stops, ep.stop)
			cmp.EtcdVersion = etcdVersion(ep.url)
			et := newEtcdTarget(ep.url, cfg.namespace, cfg.ttl, maxClients(cfg))
			add(&procTarget{key: "etcd", label: "etcd " + cmp.EtcdVersion + " lock API over its JSON gateway", tgt: et, close: et.close,
				server: ep.pid(), contended: true})
		}
	}

	runID := randomID()
	// Before the runs, whose call records would expire during it and move
	// used_memory.
	for _, t := range targets {
		ht, ok := t.tgt.(*loadgen.HTTPTarget)
		if cfg.releasedNames == 0 || t.rdb == nil || !ok || (t.key != "redis" && t.key != "redis-h0") {
			continue
		}
		fmt.Fprintf(progress, "released names, %s ... ", t.key)
		m, err := measureReleasedNames(ctx, t.key, ht, t.rdb, "lockgate:", runID+"-"+t.key, cfg.releasedNames)
		if err != nil {
			fmt.Fprintln(progress)
			return nil, fmt.Errorf("released names, %s: %w", t.key, err)
		}
		fmt.Fprintf(progress, "%.0f B kept per name\n", m.KeptPerName)
		cmp.Released = append(cmp.Released, m)
	}

	matrix := presetMatrix(cfg)
	if cfg.repeat > 1 {
		cmp.Repeat = cfg.repeat
	}
	for i, sc := range matrix {
		rounds := make([][]TargetRun, cfg.repeat)
		for round := range cfg.repeat {
			prefix := fmt.Sprintf("%s-%d", runID, i)
			if cfg.repeat > 1 {
				prefix = fmt.Sprintf("%s-%d-r%d", runID, i, round+1)
			}
			if rounds[round], err = runRound(ctx, cfg, targets, sc, prefix, round, progress); err != nil {
				return nil, err
			}
		}
		cmp.Runs = append(cmp.Runs, mergeRounds(rounds)...)
	}
	rep.Machine.LoadEnd = loadgen.LoadAvg()
	cmp.Goals = checkGoals(cmp)
	return rep, nil
}

// runRound runs sc against every target in turn, once: round (from 0) of
// cfg.repeat. Each run's ratio to the ceiling is against this round's.
// Lock names start with prefix.
func runRound(ctx context.Context, cfg config, targets []*procTarget, sc loadgen.Scenario, prefix string, round int, progress io.Writer) ([]TargetRun, error) {
	var runs []TargetRun
	var ceiling float64
	for _, t := range targets {
		tgt := t.tgt
		switch {
		case sc.Mode == loadgen.ModeContended && !t.contended, sc.Mode == loadgen.ModeMixed && !t.mixed:
			continue
		case sc.Mode == loadgen.ModeSemaphore:
			if t.semaphore == nil {
				continue
			}
			tgt = t.semaphore(sc.Limit)
		}
		if cfg.repeat > 1 {
			fmt.Fprintf(progress, "%d/%d ", round+1, cfg.repeat)
		}
		fmt.Fprintf(progress, "%-36s %-9s ... ", sc, t.key)
		run, err := runTarget(ctx, cfg, t, tgt, sc, prefix+"-"+t.key)
		if err != nil {
			fmt.Fprintln(progress)
			return nil, fmt.Errorf("%s, %s: %w", sc, t.key, err)
		}
		if t.key == "ceiling" {
			ceiling = run.Result.CyclesPerSec
		} else if ceiling > 0 {
			run.OverCeiling = run.Result.CyclesPerSec / ceiling
		}
		fmt.Fprintf(progress, "%7.0f cycles/s", run.Result.CyclesPerSec)
		if run.OverCeiling > 0 {
			fmt.Fprintf(progress, "  %.2fx ceiling", run.OverCeiling)
		}
		if run.ServerCPUUS > 0 {
			fmt.Fprintf(progress, "  server %.0f µs/cycle", run.ServerCPUUS)
		}
		if run.ServerSyscalls > 0 {
			fmt.Fprintf(progress, ", %.1f syscalls/cycle", run.ServerSyscalls)
		}
		if run.Redis != nil {
			fmt.Fprintf(progress, "  Redis %.0f µs, %.1f commands/cycle", run.Redis.MainCPUUS, run.Redis.Commands)
		}
		fmt.Fprintln(progress)
		runs = append(runs, run)
	}
	overPlain(runs)
	return runs, nil
}

// overPlain sets each Redis target's RedisOverPlain against the plain
// lock's run in runs, one round of one scenario.
func overPlain(runs []TargetRun) {
	i := slices.IndexFunc(runs, func(r TargetRun) bool { return r.Target == "plain" })
	if i < 0 || runs[i].Redis == nil || runs[i].Redis.MainCPUUS <= 0 {
		return
	}
	plain := runs[i].Redis.MainCPUUS
	for j := range runs {
		if r := &runs[j]; j != i && r.Redis != nil {
			r.RedisOverPlain = r.Redis.MainCPUUS / plain
		}
	}
}

func maxClients(cfg config) int {
	return max(slices.Max(append([]int{1}, cfg.uncontendedClients...)), slices.Max(append([]int{1}, cfg.contendedClients...)),
		cfg.semaphoreClients, cfg.mixedClients)
}

// runTarget runs sc against t and measures the CPU its processes used.
func runTarget(ctx context.Context, cfg config, t *procTarget, tgt loadgen.Target, sc loadgen.Scenario, prefix string) (TargetRun, error) {
	run := TargetRun{Target: t.key, Label: t.label, Mode: sc.Mode, Clients: sc.Clients}
	pids := []int{t.server, t.redis, 0}
	before := make([]time.Duration, len(pids))
	after := make([]time.Duration, len(pids))
	read := func(into []time.Duration) {
		for i, pid := range pids {
			if pid != 0 || i == len(pids)-1 {
				into[i], _ = cpuTime(pid)
			}
		}
	}
	var sysBefore, sysAfter int64
	var redisBefore, redisAfter redisSample
	var redisErr error
	h := loadgen.Hooks{
		Start: func() {
			read(before)
			sysBefore, _ = syscallCount(t.server)
			if t.rdb != nil {
				redisBefore, redisErr = sampleRedis(ctx, t.rdb)
			}
		},
		Stop: func() {
			read(after)
			sysAfter, _ = syscallCount(t.server)
			if t.rdb != nil && redisErr == nil {
				redisAfter, redisErr = sampleRedis(ctx, t.rdb)
			}
		},
	}
	if cfg.pprofDir != "" && t.pprofAddr != "" && !t.profiled && sc.Mode == loadgen.ModeUncontended {
		t.profiled = true
		h = profileGateway(cfg, t, sc, h)
	}
	res, err := loadgen.Run(ctx, tgt, sc, t.key, prefix, "client", h)
	if err != nil {
		return run, err
	}
	run.Result = res
	perCycle := func(i int) float64 {
		if pids[i] == 0 && i != len(pids)-1 {
			return 0
		}
		return float64(after[i]-before[i]) / float64(time.Microsecond) / float64(res.Cycles)
	}
	run.ServerCPUUS, run.RedisCPUUS, run.BenchCPUUS = perCycle(0), perCycle(1), perCycle(2)
	if t.rdb != nil && redisErr == nil {
		cost := costPerCycle(redisBefore, redisAfter, res.Cycles)
		run.Redis = &cost
	}
	if t.server != 0 && sysAfter > sysBefore && res.Cycles > 0 {
		run.ServerSyscalls = float64(sysAfter-sysBefore) / float64(res.Cycles)
	}
	return run, nil
}

// profileGateway wraps h: while the run is timed, it takes a CPU profile of
// the gateway process and the allocation profiles before and after, into
// --pprof-dir as <target>-cpu.pprof, <target>-allocs-{before,after}.pprof
// (compare with go tool pprof -sample_index=alloc_space -base before after).
func profileGateway(cfg config, t *procTarget, sc loadgen.Scenario, h loadgen.Hooks) loadgen.Hooks {
	base := "http://" + t.pprofAddr + "/debug/pprof/"
	file := func(name string) string { return filepath.Join(cfg.pprofDir, t.key+"-"+name+".pprof") }
	secs := max(int(sc.Duration/time.Second)-1, 1)
	var wg sync.WaitGroup
	var cpuErr error
	return loadgen.Hooks{
		Start: func() {
			h.Start()
			if err := fetch(base+"allocs", file("allocs-before")); err != nil {
				fmt.Fprintf(os.Stderr, "\n--pprof-dir: %v\n", err)
			}
			wg.Go(func() { cpuErr = fetch(fmt.Sprintf("%sprofile?seconds=%d", base, secs), file("cpu")) })
		},
		Stop: func() {
			h.Stop()
			wg.Wait()
			err := errors.Join(cpuErr, fetch(base+"allocs", file("allocs-after")))
			if err != nil {
				fmt.Fprintf(os.Stderr, "\n--pprof-dir: %v\n", err)
			}
		},
	}
}

func fetch(url, path string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
