// Command lockbench drives a lockgate gateway at a URL with concurrent
// clients (uncontended, contended, on a semaphore, shared and exclusive)
// and reports throughput, latency, handoff latency and fairness, next to
// the floor when it knows the gateway's Redis: the same calls made to the
// lock engine in-process against that Redis, without HTTP. The lab that
// measures the numbers of docs/PERFORMANCE.md, with the gateways, Redis,
// ceilings and etcd it starts itself, is tools/lab (make bench, make
// bench-self).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/lockgate/lockgate/cmd/lockbench/loadgen"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		os.Exit(1)
	}
}

// run parses args, benchmarks, and writes the report to stdout; progress
// goes to stderr.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	rep, err := runRemote(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	if cfg.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return loadgen.WriteMarkdown(stdout, rep, "the gateway at "+rep.Target)
}

// runRemote runs the one scenario of the command line against --url.
func runRemote(ctx context.Context, cfg config, progress io.Writer) (*loadgen.Report, error) {
	b, err := loadgen.NewBench(cfg.benchOptions(), cfg.url, cfg.token, cfg.redisURL, progress)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	rep := b.NewReport(ctx, cfg.url)
	sc := loadgen.Scenario{Mode: cfg.mode, Clients: cfg.clients, Duration: cfg.duration, Hold: cfg.hold, Wait: cfg.wait, Limit: cfg.semaphoreLimit,
		SharedRatio: cfg.sharedRatio}
	sr, err := b.Scenario(ctx, sc, 0)
	if err != nil {
		return nil, err
	}
	rep.Scenarios = append(rep.Scenarios, sr)
	rep.Machine.LoadEnd = loadgen.LoadAvg()
	return rep, nil
}
