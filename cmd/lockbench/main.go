// Command lockbench measures a lockgate gateway: throughput, latency,
// handoff latency and fairness under contention, next to the floor (the
// lock engine called in-process against the same Redis, no HTTP), and with
// --self the memory a held lock costs Redis and a parked waiter costs the
// gateway. --processes runs the gateway as users do, as its own process,
// next to an HTTP ceiling and etcd, and reports ratios and CPU per cycle. See docs/PERFORMANCE.md for what it measured here and how.
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

	"github.com/lockgate/lockgate/cmd/gateway/app"
	"github.com/lockgate/lockgate/cmd/lockbench/loadgen"
)

func main() {
	if code, ok := childMain(); ok {
		os.Exit(code)
	}
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
	var rep *Report
	switch {
	case cfg.self:
		rep, err = runSelf(ctx, cfg, stderr)
	case cfg.processes:
		rep, err = runProcesses(ctx, cfg, stderr)
	default:
		rep, err = runRemote(ctx, cfg, stderr)
	}
	if err != nil {
		return err
	}
	if cfg.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	if rep.Comparison != nil {
		return writeComparison(stdout, rep)
	}
	if cfg.self {
		return writeSelfMarkdown(stdout, rep)
	}
	return loadgen.WriteMarkdown(stdout, &rep.Report, "the gateway at "+rep.Target)
}

// childMain runs this process as one of the children lockbench starts,
// when the environment says it is one.
func childMain() (int, bool) {
	if os.Getenv(parkEnv) != "" { // a child that parks waiters for --self
		return parkMain(), true
	}
	switch os.Getenv(roleEnv) {
	case "ceiling":
		return ceilingMain(), true
	case "gateway": // tests only: see roleEnv
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := app.Run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "gateway:", err)
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// runRemote runs the one scenario of the command line against --url.
func runRemote(ctx context.Context, cfg config, progress io.Writer) (*Report, error) {
	redisURL := cfg.redisURL
	b, err := loadgen.NewBench(cfg.benchOptions(), cfg.url, cfg.token, redisURL, progress)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	rep := &Report{Report: *b.NewReport(ctx, cfg.url)}
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
