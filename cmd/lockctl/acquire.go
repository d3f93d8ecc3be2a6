package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"
)

// acquireFlags are shared by acquire and run.
type acquireFlags struct {
	ttl           time.Duration
	wait          time.Duration
	noWait        bool
	owner         string
	serverWaitMax time.Duration
	// limit, when positive, takes one of the permits of the semaphore of
	// that name instead of the lock.
	limit int
	// shared asks for a shared (read) hold of the lock.
	shared bool
	// value is the grant's value, which status shows ("" for none).
	value string
	// session is the token of the session the grant joins, taking its
	// lease ("" for none).
	session string
	// maxHold is the grant's hard cap (max_hold_ms; 0 for none): no
	// renewal carries it past its acquisition plus this.
	maxHold time.Duration
	// minHold keeps the lock from others until that long after the grant,
	// released or not (min_hold_ms; run --once-per); 0 for none.
	minHold time.Duration
	// priority is the waiter's priority, 0 to 9 (0: the default): a
	// higher one is served first.
	priority int
}

func addAcquireFlags(fs *flag.FlagSet, defaultWait time.Duration) *acquireFlags {
	af := &acquireFlags{}
	fs.DurationVar(&af.ttl, "ttl", 30*time.Second, "lease length")
	fs.DurationVar(&af.wait, "wait", defaultWait, "how long to wait for a held lock (server-side)")
	fs.BoolVar(&af.noWait, "no-wait", false, "fail at once if the lock is held (same as --wait 0)")
	fs.StringVar(&af.owner, "owner", defaultOwner(), "label shown by status")
	fs.DurationVar(&af.serverWaitMax, "server-wait-max", time.Minute,
		"the gateway's --max-wait: a longer --wait is made of several server-side waits of at most this")
	fs.IntVar(&af.limit, "limit", 0, "take one of this many permits of the semaphore namespace/name instead of the lock (1 to 10000)")
	fs.BoolVar(&af.shared, "shared", false, "take a shared (read) hold: shared holders hold the lock together, an exclusive one alone")
	fs.DurationVar(&af.maxHold, "max-hold", 0, "a hard cap on the grant (or permit): no renewal carries it past its acquisition plus this (at least --ttl; 0: none, or the gateway's --max-hold)")
	fs.IntVar(&af.priority, "priority", 0, "the waiter's priority, 0 to 9: a higher one is served first, and every --priority-aging of the gateway's (30s) of waiting raises a waiter one level, so none waits forever")
	fs.StringVar(&af.value, "value", "", "a value the grant carries, shown by status (an address, say; at most 1024 bytes; exclusive holds only; visible to anyone who may read the namespace)")
	return af
}

func (af *acquireFlags) check() error {
	switch {
	case af.ttl < time.Millisecond:
		return usagef("--ttl must be at least 1ms")
	case af.wait < 0:
		return usagef("--wait must not be negative")
	case af.serverWaitMax < time.Millisecond:
		return usagef("--server-wait-max must be at least 1ms")
	case len(af.owner) > 128:
		return usagef("--owner is longer than 128 bytes")
	case af.limit < 0 || af.limit > maxLimit:
		return usagef("--limit must be 1 to %d (or 0: the lock)", maxLimit)
	case af.shared && af.limit > 0:
		return usagef("--shared is for locks; a semaphore permit has no mode")
	case af.maxHold < 0 || af.maxHold > 0 && af.maxHold < af.ttl:
		return usagef("--max-hold must be 0 (none) or at least --ttl")
	case af.priority < 0 || af.priority > 9:
		return usagef("--priority must be 0 to 9")
	case len(af.value) > 1024:
		return usagef("--value is longer than 1024 bytes")
	case af.value != "" && (af.shared || af.limit > 0):
		return usagef("--value is for exclusive holds of a lock: a shared hold or a permit carries none")
	}
	if af.noWait {
		af.wait = 0
	}
	return nil
}

// acquireWaiting takes the lock, waiting for it up to af.wait in
// server-side waits of at most af.serverWaitMax. sent is when the
// successful request was sent: the lease cannot have started before it.
func acquireWaiting(ctx context.Context, c *client, l lockName, af *acquireFlags) (g grant, sent time.Time, err error) {
	deadline := time.Now().Add(af.wait)
	for {
		wait := min(max(time.Until(deadline), 0), af.serverWaitMax)
		sent = time.Now()
		g, err = c.acquire(ctx, l, af, wait)
		if err == nil || !(isCode(err, "lock_held") || isCode(err, "semaphore_full")) || time.Until(deadline) <= 0 {
			return g, sent, err
		}
	}
}

func cmdAcquire(ctx context.Context, c cli, args []string) error {
	fs := c.newFlagSet("acquire", "acquire namespace/name [--shared | --limit N] [--session ID.TOKEN] [--ttl 30s] [--wait 0 | --no-wait] [--owner label] [--value V] [--max-hold D] [--priority N] [--json]")
	cf := addClientFlags(fs)
	af := addAcquireFlags(fs, 0)
	asJSON := fs.Bool("json", false, "print the whole grant as JSON instead of the token alone")
	inSession := fs.String("session", "", "join this session (as 'lockctl session open' printed it): the grant takes its lease, and its keep-alive renews it")
	l, err := oneLock(fs, args)
	if err != nil {
		return err
	}
	if err := af.check(); err != nil {
		return err
	}
	l.semaphore = af.limit > 0
	if *inSession != "" {
		if _, af.session, err = parseSessionHandle(*inSession); err != nil {
			return err
		}
	}
	cl, err := cf.client(c.getenv)
	if err != nil {
		return err
	}
	g, _, err := acquireWaiting(ctx, cl, l, af)
	if err != nil {
		return fmt.Errorf("acquire %s: %w", l, err)
	}
	// The token goes to stdout, which the user asked for; never to stderr.
	if *asJSON {
		return json.NewEncoder(c.stdout).Encode(g)
	}
	// The gateway's tokens are URL-safe base64; whatever answers at the URL
	// may send something else.
	_, err = fmt.Fprintln(c.stdout, printable(g.Token))
	return err
}
