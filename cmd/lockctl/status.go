package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// cmdStatus exits 0 when the lock is held and 1 when it is free, so that
// "if lockctl status ns/x; then" reads as it should.
func cmdStatus(ctx context.Context, c cli, args []string) error {
	fs := c.newFlagSet("status", "status namespace/name [--semaphore] [--json]")
	cf := addClientFlags(fs)
	asJSON := fs.Bool("json", false, "print the holder as JSON (nothing when free)")
	sem := addSemaphoreFlag(fs)
	l, err := oneLock(fs, args)
	if err != nil {
		return err
	}
	l.semaphore = *sem
	cl, err := cf.client(c.getenv)
	if err != nil {
		return err
	}
	if l.semaphore {
		return semaphoreStatus(ctx, c, cl, l, *asJSON)
	}
	info, err := cl.inspect(ctx, l)
	if isCode(err, "not_held") {
		if !*asJSON {
			fmt.Fprintf(c.stdout, "%s is free\n", l)
		}
		return exitStatus(exitFree)
	}
	if err != nil {
		return fmt.Errorf("status %s: %w", l, err)
	}
	if *asJSON {
		return json.NewEncoder(c.stdout).Encode(info)
	}
	if info.Mode == "shared" {
		fmt.Fprintf(c.stdout, "%s is held shared by %d holders, %d waiting\n", l, len(info.Holders), info.Waiters)
		printHolders(c, info.Holders)
		return nil
	}
	_, err = fmt.Fprintf(c.stdout, "%s is held by %s (owner %q), fencing token %d, lease ends in %s (%s)\n",
		l, printable(info.Subject), info.Owner, info.FencingToken, // %q escapes the owner
		(time.Duration(info.TTLMs) * time.Millisecond).String(), info.ExpiresAt.UTC().Format(time.RFC3339))
	if err == nil && info.Value != "" {
		_, err = fmt.Fprintf(c.stdout, "  value %q\n", info.Value) // %q escapes it, as the owner
	}
	return err
}
