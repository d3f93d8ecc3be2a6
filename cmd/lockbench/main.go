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
	return writeMarkdown(stdout, rep)
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
