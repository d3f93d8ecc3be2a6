package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/lockgate/lockgate/cmd/lockbench/loadgen"
	"github.com/lockgate/lockgate/locks"
)

// config is lockbench's command line.
type config struct {
	url            string
	token          string
	redisURL       string
	namespace      string
	mode           string
	clients        int
	duration       time.Duration
	hold           time.Duration
	wait           time.Duration
	ttl            time.Duration
	floor          bool
	json           bool
	cpuProfile     string
	semaphoreLimit int
	sharedRatio    float64
}

const usage = `lockbench drives a lockgate gateway and reports throughput, latency,
handoff latency and fairness, next to the floor: the same calls made to the
lock engine in-process against the same Redis, without HTTP.

Usage:
  lockbench --url URL [--redis-url URL] [flags]

The token comes from --token or LOCKGATE_TOKEN (prefer the variable: flags
show in ps), the URL from --url or LOCKGATE_URL, and the Redis of the floor
from --redis-url or LOCKGATE_REDIS_URL.

The benchmark of docs/PERFORMANCE.md, which starts its own redis-server,
gateways, HTTP ceilings and etcd, is the lab in tools/lab: make bench,
make bench-self.

Flags:
`

func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
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
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of this process during an uncontended gateway run")
	fs.IntVar(&c.semaphoreLimit, "semaphore-limit", 4, "--mode semaphore: the semaphore's permits")
	fs.Float64Var(&c.sharedRatio, "shared-ratio", 0.8, "--mode mixed: the share of acquires that ask for a shared grant")
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
	if c.token == "" {
		c.token = getenv("LOCKGATE_TOKEN")
	}
	return c, c.check()
}

func (c config) check() error {
	switch {
	case c.mode != loadgen.ModeUncontended && c.mode != loadgen.ModeContended && c.mode != loadgen.ModeSemaphore && c.mode != loadgen.ModeMixed:
		return fmt.Errorf("--mode %q: want %s, %s, %s or %s", c.mode, loadgen.ModeUncontended, loadgen.ModeContended, loadgen.ModeSemaphore, loadgen.ModeMixed)
	case !(c.sharedRatio >= 0 && c.sharedRatio <= 1):
		return errors.New("--shared-ratio must be 0 to 1")
	case c.semaphoreLimit < 1 || c.semaphoreLimit > locks.MaxLimit:
		return fmt.Errorf("--semaphore-limit must be 1 to %d", locks.MaxLimit)
	case c.clients < 1:
		return errors.New("--clients must be at least 1")
	case c.duration <= 0 || c.ttl <= 0:
		return errors.New("--duration and --ttl must be positive")
	case c.hold < 0 || c.wait < 0:
		return errors.New("--hold and --wait must not be negative")
	case c.wait < time.Millisecond:
		return errors.New("--wait must be at least 1ms: a contended acquire waits server-side")
	case c.url == "":
		return errors.New("no gateway: set --url (or LOCKGATE_URL)")
	}
	return nil
}

// benchOptions are the settings of cfg the load generator shares between
// its runs.
func (c config) benchOptions() loadgen.Options {
	return loadgen.Options{Namespace: c.namespace, TTL: c.ttl, Duration: c.duration, Wait: c.wait, Floor: c.floor, CPUProfile: c.cpuProfile}
}
