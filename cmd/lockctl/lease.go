package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

func cmdRelease(ctx context.Context, c cli, args []string) error {
	fs := c.newFlagSet("release", "release namespace/name [--semaphore] --token T")
	cf := addClientFlags(fs)
	tokFlag := fs.String("token", "", "the owner token acquire printed; - reads it from stdin (default $LOCKGATE_LOCK_TOKEN)")
	sem := addSemaphoreFlag(fs)
	l, err := oneLock(fs, args)
	if err != nil {
		return err
	}
	l.semaphore = *sem
	tok, err := readLockToken(c, *tokFlag)
	if err != nil {
		return err
	}
	cl, err := cf.client(c.getenv)
	if err != nil {
		return err
	}
	if err := cl.release(ctx, l, tok); err != nil {
		return fmt.Errorf("release %s: %w", l, err)
	}
	return nil
}

func cmdRenew(ctx context.Context, c cli, args []string) error {
	fs := c.newFlagSet("renew", "renew namespace/name [--semaphore] --token T [--ttl D] [--json]")
	cf := addClientFlags(fs)
	tokFlag := fs.String("token", "", "the owner token acquire printed; - reads it from stdin (default $LOCKGATE_LOCK_TOKEN)")
	ttl := fs.Duration("ttl", 0, "new lease length from now (default: the TTL the lock was acquired with)")
	asJSON := fs.Bool("json", false, "print the new lease as JSON")
	sem := addSemaphoreFlag(fs)
	l, err := oneLock(fs, args)
	if err != nil {
		return err
	}
	l.semaphore = *sem
	if *ttl < 0 || (*ttl > 0 && *ttl < time.Millisecond) {
		return usagef("--ttl must be at least 1ms")
	}
	tok, err := readLockToken(c, *tokFlag)
	if err != nil {
		return err
	}
	cl, err := cf.client(c.getenv)
	if err != nil {
		return err
	}
	ls, err := cl.renew(ctx, l, tok, *ttl)
	if err != nil {
		return fmt.Errorf("renew %s: %w", l, err)
	}
	if *asJSON {
		return json.NewEncoder(c.stdout).Encode(ls)
	}
	return nil
}
