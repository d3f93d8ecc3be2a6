// Command lab measures lockgate as docs/PERFORMANCE.md reports it. It
// starts what it measures (a redis-server, gateways in its own process or
// as their own, the HTTP ceilings, etcd) and drives each with lockbench's
// load generator (cmd/lockbench/loadgen): --self is the quick run with
// the gateway in the lab's process, next to the floor, with the memory a
// held lock costs Redis and a parked waiter costs the gateway;
// --processes runs every target as its own process and reports ratios to
// the HTTP ceiling and CPU per cycle, in rounds. It is a module of its own
// so that what only a laboratory needs stays out of lockgate's module.
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
	err := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lab:", err)
		os.Exit(1)
	}
}

// run parses args, benchmarks, and writes the report to stdout; progress
// goes to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig(args, stderr)
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
		rep, err = runProcesses(ctx, cfg, stderr)
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
	return writeSelfMarkdown(stdout, rep)
}

// childMain runs this process as one of the children the lab starts, when
// the environment says it is one.
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
