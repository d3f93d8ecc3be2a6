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

// config is lockbench's command line.
type config struct {
	url       string
	token     string
	redisURL  string
	namespace string
	mode      string
	clients   int
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
}

const usage = `lockbench drives a lockgate gateway and reports throughput, latency,
handoff latency and fairness, next to the floor: the same calls made to the
lock engine in-process against the same Redis, without HTTP.

Usage:
  lockbench --url URL [--redis-url URL] [flags]   one scenario against a running gateway
  lockbench --self [flags]                        the preset matrix against a redis-server
                                                  and a gateway that lockbench starts
  lockbench --processes [flags]                   every target as its own process: the built
                                                  cmd/gateway (embedded and Redis backends), an
                                                  HTTP ceiling, etcd; ratios and CPU per cycle
  (lockbench local is --self)

The token comes from --token or LOCKGATE_TOKEN (prefer the variable: flags
show in ps), the URL from --url or LOCKGATE_URL, and the Redis of the floor
from --redis-url or LOCKGATE_REDIS_URL.

Flags:
`

func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	var uncontendedList, contendedList, targetList string
	fs := flag.NewFlagSet("lockbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.url, "url", getenv("LOCKGATE_URL"), "base URL of the gateway (env LOCKGATE_URL)")
	fs.StringVar(&c.token, "token", "", "JWT granting --namespace (env LOCKGATE_TOKEN)")
	fs.StringVar(&c.redisURL, "redis-url", getenv("LOCKGATE_REDIS_URL"), "the gateway's Redis, for the floor and Redis command counts (env LOCKGATE_REDIS_URL)")
	fs.StringVar(&c.namespace, "namespace", "lockbench", "namespace of the benchmark's locks")
	fs.StringVar(&c.mode, "mode", loadgen.ModeUncontended, "uncontended (each client its own lock), contended (all on one lock, server-side wait), semaphore (all on one semaphore of --semaphore-limit permits) or mixed (all on one lock, a --shared-ratio share of the acquires shared)")
	fs.IntVar(&c.clients, "clients", 16, "concurrent clients, each with one call in flight")
	fs.DurationVar(&c.duration, "duration", 5*time.Second, "how long each run starts new cycles")
	fs.DurationVar(&c.hold, "hold", 0, "time between a grant and its release")
	fs.DurationVar(&c.wait, "wait", 30*time.Second, "server-side wait (wait_ms) of a contended acquire")
	fs.DurationVar(&c.ttl, "ttl", 30*time.Second, "lease of each grant")
	fs.BoolVar(&c.floor, "floor", true, "also run the engine in-process against --redis-url")
	fs.BoolVar(&c.json, "json", false, "print the report as JSON instead of markdown")
	fs.BoolVar(&c.self, "self", false, "start a redis-server and a gateway, and run the preset matrix")
	fs.StringVar(&c.redisServer, "redis-server", "redis-server", "--self: the redis-server binary")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of this process during the first uncontended gateway run; with --self the gateway runs here too, and its samples carry the label lockbench=gateway")
	fs.StringVar(&uncontendedList, "uncontended-clients", "16,64", "--self, --processes: client counts of the uncontended runs")
	fs.StringVar(&contendedList, "contended-clients", "", "--self, --processes: client counts of the contended runs (default 8,64,256 with --self, 16,64 with --processes; 0: skip)")
	fs.BoolVar(&c.processes, "processes", false, "run every target as its own process, each scenario against each in turn")
	fs.StringVar(&targetList, "targets", strings.Join(defaultTargets, ","), "--processes: the targets to run, of "+strings.Join(allTargets, ", ")+" (replicated: the Redis gateway with --redis-min-replicas 1, and a replica)")
	fs.StringVar(&c.gatewayBin, "gateway-bin", "", "--processes: the gateway binary (default: go build cmd/gateway into a temporary directory)")
	fs.StringVar(&c.etcd, "etcd", "etcd", "--processes: the etcd binary to compare with (skipped when not found)")
	fs.StringVar(&c.pprofDir, "pprof-dir", "", "--processes: write CPU and allocation profiles of each gateway process during its first uncontended run here")
	fs.IntVar(&c.repeat, "repeat", 1, "--processes: rounds of each scenario, each round over every target in the same order; the report gives the medians of the rounds and the spread of the ratio to the ceiling")
	fs.IntVar(&c.semaphoreLimit, "semaphore-limit", 4, "--mode semaphore, --self: the semaphore's permits")
	fs.IntVar(&c.semaphoreClients, "semaphore-clients", 64, "--self, --processes: clients of the semaphore run (0: skip)")
	fs.Float64Var(&c.sharedRatio, "shared-ratio", 0.8, "--mode mixed, --self, --processes: the share of acquires that ask for a shared grant")
	fs.IntVar(&c.mixedClients, "mixed-clients", 64, "--self, --processes: clients of the shared/exclusive run (0: skip)")
	fs.IntVar(&c.parked, "parked", 5000, "--self: waiters to park for the gateway heap measurement (0: skip)")
	fs.IntVar(&c.heldLocks, "held-locks", 1000, "--self: locks to hold for the Redis memory measurement (0: skip)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	if len(args) > 0 {
		args = args[1:]
	}
	if len(args) > 0 && args[0] == "local" {
		c.self, args = true, args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q; flags start with --", fs.Arg(0))
	}
	if c.token == "" {
		c.token = getenv("LOCKGATE_TOKEN")
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
	case c.mode != loadgen.ModeUncontended && c.mode != loadgen.ModeContended && c.mode != loadgen.ModeSemaphore && c.mode != loadgen.ModeMixed:
		return fmt.Errorf("--mode %q: want %s, %s, %s or %s", c.mode, loadgen.ModeUncontended, loadgen.ModeContended, loadgen.ModeSemaphore, loadgen.ModeMixed)
	case !(c.sharedRatio >= 0 && c.sharedRatio <= 1) || c.mixedClients < 0:
		return errors.New("--shared-ratio must be 0 to 1, and --mixed-clients not negative")
	case c.semaphoreLimit < 1 || c.semaphoreLimit > locks.MaxLimit || c.semaphoreClients < 0:
		return fmt.Errorf("--semaphore-limit must be 1 to %d, and --semaphore-clients not negative", locks.MaxLimit)
	case c.clients < 1:
		return errors.New("--clients must be at least 1")
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
	case c.parked < 0 || c.heldLocks < 0:
		return errors.New("--parked and --held-locks must not be negative")
	case c.self && c.processes:
		return errors.New("--self or --processes, not both")
	case !c.self && !c.processes && c.url == "":
		return errors.New("no gateway: set --url (or LOCKGATE_URL), or run --self or --processes to start one")
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
