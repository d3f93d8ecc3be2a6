// Command lockbench measures a lockgate gateway: throughput, latency,
// handoff latency and fairness under contention, next to the floor (the
// lock engine called in-process against the same Redis, no HTTP), and with
// --self the memory a held lock costs Redis and a parked waiter costs the
// gateway. See docs/PERFORMANCE.md for what it measured here and how.
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
)

func main() {
	if os.Getenv(parkEnv) != "" { // a child that parks waiters for --self
		os.Exit(parkMain())
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
	if cfg.self {
		rep, err = runSelf(ctx, cfg, stderr)
	} else {
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
	return writeMarkdown(stdout, rep)
}
