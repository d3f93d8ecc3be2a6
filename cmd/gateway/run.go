package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/lockgate/lockgate/cmd/gateway/app"
)

// run serves until SIGINT or SIGTERM, then drains; SIGHUP reads the TLS
// certificate again. The work is in package app so that tests outside this
// package (e2e) can run the same code in-process.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	return app.Run(app.WithReload(ctx, hup), args, getenv, stdout, stderr)
}
