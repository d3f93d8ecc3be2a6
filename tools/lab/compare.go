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
	"strings"
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
	// Repeat is the rounds of each scenario (--repeat), when more than one:
	// then each of Runs summarises its Rounds (see combineRounds).
	Repeat int `json:"repeat,omitempty"`
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
	// Round numbers a run among its scenario's Rounds, from 1.
	Round int `json:"round,omitempty"`
	// Rounds are the runs a summary of --repeat N > 1 was made from, in
	// the order they ran.
	Rounds []TargetRun `json:"rounds,omitempty"`
}

// Targets of --processes, in the order each scenario runs them.
// "replicated" is the Redis gateway with --redis-min-replicas 1: asked
// for, it gives the Redis a replica, which the "redis" target then has too,
// so that the two differ only in the WAIT. "redis-ceiling" is the ceiling
// with the plain lock on the Redis targets' redis-server behind it.
var allTargets = []string{"ceiling", "redis-ceiling", "embedded", "redis", "replicated", "engine", "semaphore", "plain", "etcd"}

// defaultTargets are the targets of --processes without --targets.
var defaultTargets = slices.DeleteFunc(slices.Clone(allTargets), func(t string) bool { return t == "replicated" })

// procTarget is a target and the processes whose CPU its cycles cost.
type procTarget struct {
	key, label string
	tgt        loadgen.Target
	close      func()
	server     int // pid of the server process, or 0
	redis      int // pid of the redis-server it uses, or 0
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
	add := func(t *procTarget) {
		targets = append(targets, t)
		stops = append(stops, t.close)
	}

	var rp *redisProc
	if want("redis") || want("replicated") || want("engine") || want("semaphore") || want("plain") || want("redis-ceiling") {
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
		rdb := redis.NewClient(&redis.Options{Addr: rp.addr})
		rep.RedisVersion, _ = loadgen.InfoField(ctx, rdb, "server", "redis_version")
		rdb.Close()
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
	if want("embedded") || want("redis") || want("replicated") {
		bin := cfg.gatewayBin
		if bin == "" {
			fmt.Fprint(progress, "go build cmd/gateway ... ")
			if bin, err = buildGateway(ctx, tmp); err != nil {
				return nil, err
			}
			fmt.Fprintln(progress, "done")
		}
		for _, k := range []string{"embedded", "redis", "replicated"} {
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
			add(&procTarget{key: k, label: label, tgt: ht, close: ht.Close, server: p.pid(), redis: redisPID, contended: true, pprofAddr: pprofAddr,
				semaphore: func(limit int) loadgen.Target { return loadgen.SemaphoreTarget{HTTP: ht, Limit: limit} }, mixed: true})
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

	matrix := presetMatrix(cfg)
	if cfg.repeat > 1 {
		cmp.Repeat = cfg.repeat
	}
	runID := randomID()
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
		fmt.Fprintln(progress)
		runs = append(runs, run)
	}
	return runs, nil
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
	h := loadgen.Hooks{
		Start: func() {
			read(before)
			sysBefore, _ = syscallCount(t.server)
		},
		Stop: func() {
			read(after)
			sysAfter, _ = syscallCount(t.server)
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

// writeComparison renders a --processes report as markdown.
func writeComparison(w io.Writer, r *Report) error {
	var b strings.Builder
	c, m := r.Comparison, r.Machine
	fmt.Fprintf(&b, "## lockbench --processes, %s\n\n", r.Started.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- every target its own process on loopback, started by lockbench: the built cmd/gateway binary "+
		"(LOCKGATE_LOG_LEVEL=warn) with the embedded backend and with its own redis-server, the HTTP ceiling, etcd; "+
		"each scenario runs against every target in turn\n")
	fmt.Fprintf(&b, "- machine: %s/%s, %d CPUs, %s", m.OS, m.Arch, m.CPUs, m.Go)
	if r.RedisVersion != "" {
		fmt.Fprintf(&b, ", Redis %s", r.RedisVersion)
	}
	if c.EtcdVersion != "" {
		fmt.Fprintf(&b, ", etcd %s", c.EtcdVersion)
	}
	if m.LoadStart != "" {
		fmt.Fprintf(&b, "; load average %s at the start, %s at the end", m.LoadStart, m.LoadEnd)
	}
	fmt.Fprintf(&b, "\n- each run: %gs of new cycles, lease %d ms, contended acquires wait up to %d ms server-side, hold 0\n",
		r.Settings.DurationS, r.Settings.TTLMS, r.Settings.WaitMS)
	b.WriteString("- HTTP ceiling: a plain net/http server process with the gateway's JWT check that answers 201 / 204 with a small JSON body and holds no lock\n")
	if slices.ContainsFunc(c.Runs, func(run TargetRun) bool { return run.Target == "redis-ceiling" }) {
		b.WriteString("- HTTP ceiling + plain Redis lock: the same process, whose acquire is a SET NX PX of a random token and whose release " +
			"is a compare-and-delete script, on the Redis targets' redis-server (the gateway's go-redis settings: RESP2, no retries)\n")
	}
	b.WriteString("- CPU per cycle: utime + stime from /proc/<pid>/stat over the timed part of the run (10 ms ticks), over cycles; " +
		"syscalls per cycle: syscr + syscw from /proc/<pid>/io, which the machine's load hardly moves\n")
	if c.Repeat > 1 {
		fmt.Fprintf(&b, "- %s\n", roundsNote(c.Repeat))
	}
	for _, n := range c.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}

	find := func(key, mode string, clients int) *TargetRun {
		for i := range c.Runs {
			if r := &c.Runs[i]; r.Target == key && r.Mode == mode && r.Clients == clients {
				return r
			}
		}
		return nil
	}
	var unc, con []int
	for _, run := range c.Runs {
		if run.Mode == loadgen.ModeUncontended && !slices.Contains(unc, run.Clients) {
			unc = append(unc, run.Clients)
		}
		if run.Mode == loadgen.ModeContended && !slices.Contains(con, run.Clients) {
			con = append(con, run.Clients)
		}
	}
	join := func(ns []int) string {
		s := make([]string, len(ns))
		for i, n := range ns {
			s[i] = fmt.Sprint(n)
		}
		return strings.Join(s, " / ")
	}

	fmt.Fprintf(&b, "\n| target | uncontended %s clients (cycles/s) | x ceiling | contended %s | server CPU per uncontended cycle (µs) |\n", join(unc), join(con))
	b.WriteString("| --- | --- | --- | --- | --- |\n")
	for _, key := range allTargets {
		var label string
		var cps, ratio, ccps, cpu []string
		for _, n := range unc {
			if r := find(key, loadgen.ModeUncontended, n); r != nil {
				label = r.Label
				cps = append(cps, fmt.Sprintf("%.0f", r.Result.CyclesPerSec))
				if r.OverCeiling > 0 {
					ratio = append(ratio, ratioCell(*r))
				}
				switch {
				case r.ServerCPUUS > 0 && r.RedisCPUUS > 0:
					cpu = append(cpu, fmt.Sprintf("%.0f + %.0f Redis", r.ServerCPUUS, r.RedisCPUUS))
				case r.ServerCPUUS > 0:
					cpu = append(cpu, fmt.Sprintf("%.0f", r.ServerCPUUS))
				case r.RedisCPUUS > 0:
					cpu = append(cpu, fmt.Sprintf("%.0f Redis", r.RedisCPUUS))
				}
			}
		}
		for _, n := range con {
			if r := find(key, loadgen.ModeContended, n); r != nil {
				label = r.Label
				ccps = append(ccps, fmt.Sprintf("%.0f", r.Result.CyclesPerSec))
			}
		}
		if label == "" {
			continue
		}
		dash := func(s []string) string {
			if len(s) == 0 {
				return "-"
			}
			return strings.Join(s, " / ")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", label, dash(cps), dash(ratio), dash(ccps), dash(cpu))
	}

	b.WriteString("\n### Uncontended: each client its own lock, acquire + release\n\n")
	b.WriteString("| target | clients | cycles/s | x ceiling | acquire p50 / p99 (ms) | release p50 / p99 (ms) | CPU µs per cycle: server / Redis / lockbench | server syscalls per cycle | errors |\n")
	b.WriteString("| --- | ---: | ---: | ---: | --- | --- | --- | ---: | --- |\n")
	for _, run := range c.Runs {
		if run.Mode != loadgen.ModeUncontended {
			continue
		}
		r := run.Result
		fmt.Fprintf(&b, "| %s | %d | %.0f | %s | %s / %s | %s / %s | %s | %s | %s |\n", run.Target, run.Clients, r.CyclesPerSec, ratioCell(run),
			loadgen.Num(r.Acquire.P50), loadgen.Num(r.Acquire.P99), loadgen.Num(r.Release.P50), loadgen.Num(r.Release.P99), cpuCell(run), syscallCell(run), loadgen.FormatErrors(r.Errors))
	}
	if len(con) > 0 {
		b.WriteString("\n### Contended: every client on one lock, server-side wait, hold 0\n\n")
		b.WriteString("Self-hand-offs: releases during which another client's acquire was pending (sent, not necessarily " +
			"arrived), after which the releaser got the lock again; lead: the longest such an acquire had been pending " +
			"when the release was sent. A FIFO server hands the lock back only while the pending acquires have not " +
			"reached it: a lead of about a round trip is an acquire still on its way; a long one is a stalled request " +
			"or a queue jumped, which only the server can tell. FIFO bound: (clients − 1) × the mean cycle.\n\n")
		b.WriteString("| target | clients | cycles/s | self-hand-offs while others' acquires were pending, longest lead | wait p99 / max (ms) | FIFO bound (ms) | p99 / FIFO | CPU µs per cycle: server / Redis / lockbench | server syscalls per cycle | errors |\n")
		b.WriteString("| --- | ---: | ---: | --- | --- | ---: | ---: | --- | ---: | --- |\n")
		for _, run := range c.Runs {
			if run.Mode != loadgen.ModeContended || run.Result.Fairness == nil {
				continue
			}
			r, f := run.Result, run.Result.Fairness
			fmt.Fprintf(&b, "| %s | %d | %.0f | %s | %s / %s | %s | %.2f | %s | %s | %s |\n", run.Target, run.Clients, r.CyclesPerSec,
				loadgen.SelfRegrantCell(f), loadgen.Num(f.P99WaitMS), loadgen.Num(f.LongestWaitMS), loadgen.Num(f.FIFOBoundMS),
				f.P99OverFIFO, cpuCell(run), syscallCell(run), loadgen.FormatErrors(r.Errors))
		}
	}
	if slices.ContainsFunc(c.Runs, func(run TargetRun) bool { return run.Result.Semaphore != nil }) {
		b.WriteString("\n### Semaphore: every client on one semaphore, server-side wait, hold 0\n\n")
		b.WriteString("Holders as the clients saw them, from an acquire's answer to its release being sent: the most at once " +
			"(never above the limit) and the mean (permit-time held over the run's length).\n\n")
		b.WriteString("| target | clients | limit | cycles/s | most holders at once | mean holders | wait p50 / p99 / max (ms) | CPU µs per cycle: server / Redis / lockbench | server syscalls per cycle | errors |\n")
		b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | --- |\n")
		for _, run := range c.Runs {
			st := run.Result.Semaphore
			if st == nil {
				continue
			}
			r := run.Result
			fmt.Fprintf(&b, "| %s | %d | %d | %.0f | %d | %s | %s / %s / %s | %s | %s | %s |\n", run.Target, run.Clients, st.Limit, r.CyclesPerSec,
				st.MostHolders, loadgen.Num(st.MeanHolders), loadgen.Num(r.Acquire.P50), loadgen.Num(r.Acquire.P99), loadgen.Num(r.Acquire.Max), cpuCell(run), syscallCell(run),
				loadgen.FormatErrors(r.Errors))
		}
	}
	if slices.ContainsFunc(c.Runs, func(run TargetRun) bool { return run.Result.Mixed != nil }) {
		loadgen.WriteMixedHeader(&b)
		for _, run := range c.Runs {
			if run.Result.Mixed != nil {
				loadgen.WriteMixedRow(&b, run.Target, run.Clients, &run.Result)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func syscallCell(run TargetRun) string {
	if run.ServerSyscalls == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", run.ServerSyscalls)
}

func cpuCell(run TargetRun) string {
	cell := func(v float64) string {
		if v == 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f", v)
	}
	return cell(run.ServerCPUUS) + " / " + cell(run.RedisCPUUS) + " / " + cell(run.BenchCPUUS)
}
