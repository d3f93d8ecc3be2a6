package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockgate/lockgate/cmd/lockbench/loadgen"
	"github.com/lockgate/lockgate/locks"
)

// config is the lab's command line.
type config struct {
	namespace string
	duration  time.Duration
	hold      time.Duration
	wait      time.Duration
	ttl       time.Duration
	floor     bool
	json      bool

	self               bool
	redisServer        string
	cpuProfile         string
	uncontendedClients []int
	contendedClients   []int
	parked             int
	heldLocks          int
	semaphoreLimit     int
	semaphoreClients   int
	sharedRatio        float64
	mixedClients       int

	processes  bool
	targets    []string
	gatewayBin string
	etcd       string
	pprofDir   string
	repeat     int
	// releasedNames is how many names --processes acquires and releases
	// to measure what a released name keeps in Redis.
	releasedNames int
}

const usage = `lab measures lockgate as docs/PERFORMANCE.md reports it: it starts what it
measures and drives each with lockbench's load generator.

Usage:
  lab --self [flags]        the preset matrix against a redis-server and a gateway
                            that the lab starts, the gateway in its own process;
                            the floor, and memory per held lock and parked waiter
  lab --processes [flags]   every target as its own process: the built cmd/gateway
                            (embedded and Redis backends), the HTTP ceilings, etcd;
                            ratios and CPU per cycle

Run it in tools/lab (make bench and make bench-self do): --processes builds
cmd/gateway from the repository around it. lockbench --url measures a gateway
of your own.

Flags:
`

func parseConfig(args []string, stderr io.Writer) (config, error) {
	var c config
	var uncontendedList, contendedList, targetList string
	fs := flag.NewFlagSet("lab", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.namespace, "namespace", "lockbench", "namespace of the benchmark's locks")
	fs.DurationVar(&c.duration, "duration", 5*time.Second, "how long each run starts new cycles")
	fs.DurationVar(&c.hold, "hold", 0, "time between a grant and its release (the uncontended runs hold 0)")
	fs.DurationVar(&c.wait, "wait", 30*time.Second, "server-side wait (wait_ms) of a contended acquire")
	fs.DurationVar(&c.ttl, "ttl", 30*time.Second, "lease of each grant")
	fs.BoolVar(&c.floor, "floor", true, "--self: also run the engine in-process against the gateway's Redis")
	fs.BoolVar(&c.json, "json", false, "print the report as JSON instead of markdown")
	fs.BoolVar(&c.self, "self", false, "start a redis-server and a gateway, and run the preset matrix")
	fs.StringVar(&c.redisServer, "redis-server", "redis-server", "the redis-server binary")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "--self: write a CPU profile of this process during the first uncontended gateway run; the gateway runs here too, and its samples carry the label lockbench=gateway")
	fs.StringVar(&uncontendedList, "uncontended-clients", "16,64", "client counts of the uncontended runs")
	fs.StringVar(&contendedList, "contended-clients", "", "client counts of the contended runs (default 8,64,256 with --self, 16,64 with --processes; 0: skip)")
	fs.BoolVar(&c.processes, "processes", false, "run every target as its own process, each scenario against each in turn")
	fs.StringVar(&targetList, "targets", strings.Join(defaultTargets, ","), "--processes: the targets to run, of "+strings.Join(allTargets, ", ")+" (replicated: the Redis gateway with --redis-min-replicas 1, and a replica)")
	fs.StringVar(&c.gatewayBin, "gateway-bin", "", "--processes: the gateway binary (default: go build cmd/gateway into a temporary directory)")
	fs.StringVar(&c.etcd, "etcd", "etcd", "--processes: the etcd binary to compare with (skipped when not found)")
	fs.StringVar(&c.pprofDir, "pprof-dir", "", "--processes: write CPU and allocation profiles of each gateway process during its first uncontended run here")
	fs.IntVar(&c.repeat, "repeat", 1, "--processes: rounds of each scenario, each round over every target in the same order; the report gives the medians of the rounds and the spread of the ratio to the ceiling")
	fs.IntVar(&c.releasedNames, "released-names", 20000, "--processes: lock names to acquire and release once each through every Redis gateway, for the Redis memory a released name keeps (0: skip)")
	fs.IntVar(&c.semaphoreLimit, "semaphore-limit", 4, "the semaphore's permits")
	fs.IntVar(&c.semaphoreClients, "semaphore-clients", 64, "clients of the semaphore run (0: skip)")
	fs.Float64Var(&c.sharedRatio, "shared-ratio", 0.8, "the share of acquires that ask for a shared grant in the shared/exclusive run")
	fs.IntVar(&c.mixedClients, "mixed-clients", 64, "clients of the shared/exclusive run (0: skip)")
	fs.IntVar(&c.parked, "parked", 5000, "--self: waiters to park for the gateway heap measurement (0: skip)")
	fs.IntVar(&c.heldLocks, "held-locks", 1000, "--self: locks to hold for the Redis memory measurement (0: skip)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	if len(args) > 0 {
		args = args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q; flags start with --", fs.Arg(0))
	}
	var err error
	if c.uncontendedClients, err = parseCounts(uncontendedList); err != nil {
		return c, fmt.Errorf("--uncontended-clients: %w", err)
	}
	if contendedList == "" {
		contendedList = "8,64,256"
		if c.processes {
			contendedList = "16,64"
		}
	}
	if contendedList != "0" { // 0: no contended runs, as --semaphore-clients 0
		if c.contendedClients, err = parseCounts(contendedList); err != nil {
			return c, fmt.Errorf("--contended-clients: %w", err)
		}
	}
	for t := range strings.SplitSeq(targetList, ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		if !slices.Contains(allTargets, t) {
			return c, fmt.Errorf("--targets: %q is not one of %s", t, strings.Join(allTargets, ", "))
		}
		c.targets = append(c.targets, t)
	}
	return c, c.check()
}

func (c config) check() error {
	switch {
	case !(c.sharedRatio >= 0 && c.sharedRatio <= 1) || c.mixedClients < 0:
		return errors.New("--shared-ratio must be 0 to 1, and --mixed-clients not negative")
	case c.semaphoreLimit < 1 || c.semaphoreLimit > locks.MaxLimit || c.semaphoreClients < 0:
		return fmt.Errorf("--semaphore-limit must be 1 to %d, and --semaphore-clients not negative", locks.MaxLimit)
	case c.duration <= 0 || c.ttl <= 0:
		return errors.New("--duration and --ttl must be positive")
	case c.hold < 0 || c.wait < 0:
		return errors.New("--hold and --wait must not be negative")
	case c.wait < time.Millisecond:
		return errors.New("--wait must be at least 1ms: a contended acquire waits server-side")
	case c.repeat < 1:
		return errors.New("--repeat must be at least 1")
	case c.repeat > 1 && !c.processes:
		return errors.New("--repeat goes with --processes")
	case c.parked < 0 || c.heldLocks < 0 || c.releasedNames < 0:
		return errors.New("--parked, --held-locks and --released-names must not be negative")
	case c.self && c.processes:
		return errors.New("--self or --processes, not both")
	case !c.self && !c.processes:
		return errors.New("nothing to run: give --self or --processes (lockbench --url measures a gateway of your own)")
	}
	return nil
}

// benchOptions are the settings of cfg every scenario shares.
func (c config) benchOptions() loadgen.Options {
	return loadgen.Options{Namespace: c.namespace, TTL: c.ttl, Duration: c.duration, Wait: c.wait, Floor: c.floor, CPUProfile: c.cpuProfile}
}

// parseCounts parses "16,64" into client counts.
func parseCounts(s string) ([]int, error) {
	var counts []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a client count", f)
		}
		counts = append(counts, n)
	}
	return counts, nil
}
