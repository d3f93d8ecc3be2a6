package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// runLockSet runs a command while it holds every lock of ls as one lock
// set: taken in one call, every one or none (so two runs that name the
// same locks in any order never deadlock), renewed by one call and
// released by one. The command gets the set's locks in LOCKGATE_LOCK_SET
// ("ns/a,ns/b"), and their fencing tokens in LOCKGATE_FENCING_TOKENS
// ("ns/a=12 ns/b=7"; LOCKGATE_FENCING_TOKEN is the first lock's); never
// the set's token, so a nested run does not re-enter these locks.
func runLockSet(ctx context.Context, c cli, cl *client, ls []lockName, af *acquireFlags,
	argv, env []string, sigs <-chan os.Signal, killAfter time.Duration) error {
	s, sent, err := orSignal(ctx, sigs, "acquire set "+names(ls),
		func(ctx context.Context) (lockSet, time.Time, error) { return acquireSetWaiting(ctx, cl, ls, af) },
		func(ctx context.Context, s lockSet) { cl.releaseSet(ctx, ls, s.Token) })
	if err != nil {
		return err
	}
	release := func() (setReleased, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		return cl.releaseSet(rctx, ls, s.Token)
	}
	releaseQuietly := func() {
		if _, err := release(); err != nil && !isCode(err, "not_holder") {
			fmt.Fprintf(c.stderr, "lockctl: release set %s: %v; its locks are left to expire\n", names(ls), err)
		}
	}
	// Every lock, each once, or this is not the set that was asked for:
	// no command runs under it.
	if len(s.Locks) != len(ls) {
		releaseQuietly()
		return fmt.Errorf("acquire set %s: the gateway answered %d locks, want %d", names(ls), len(s.Locks), len(ls))
	}

	fences := make([]string, len(s.Locks))
	for i, l := range s.Locks {
		fences[i] = l.Lock + "=" + strconv.FormatInt(l.FencingToken, 10)
	}
	env = append(env, "LOCKGATE_LOCK_SET="+setList(ls), "LOCKGATE_FENCING_TOKENS="+strings.Join(fences, " "),
		"LOCKGATE_FENCING_TOKEN="+strconv.FormatInt(s.Locks[0].FencingToken, 10))
	ch, err := startChild(argv, env, c.stdin, c.stdout, c.stderr)
	if err != nil {
		releaseQuietly()
		return fmt.Errorf("run %s: %w", argv[0], startError(err))
	}
	k := &keeper{what: "lock set " + names(ls), renew: setRenewer(cl, ls, s.Token),
		ttl: time.Duration(s.TTLMs) * time.Millisecond, interval: renewAfter(s.TTLMs, s.RenewAfterMs), stderr: c.stderr}
	k.deadline = sent.Add(k.ttl)
	code, lostErr := supervise(ctx, c, ch, k, sigs, killAfter)
	if lostErr != nil {
		// The locks still held (all but the one that ended) are freed now,
		// not at the end of their leases.
		releaseQuietly()
		return exitStatus(exitLeaseLost)
	}
	rel, err := release()
	switch {
	case isCode(err, "not_holder") && code == 0:
		return fmt.Errorf("%w: the command exited 0, but the set %s had been lost before it finished", errLeaseLost, names(ls))
	case err != nil:
		fmt.Fprintf(c.stderr, "lockctl: release set %s: %v; its locks are left to expire\n", names(ls), err)
	case len(rel.Gone) > 0 && code == 0:
		return fmt.Errorf("%w: the command exited 0, but %s of the set had been lost before it finished",
			errLeaseLost, printable(strings.Join(rel.Gone, ", ")))
	}
	return exitStatus(code)
}

// setRenewer renews every lock of the set of token. A lock of it found
// ended is a lost lease: the set is no longer whole.
func setRenewer(cl *client, ls []lockName, token string) func(context.Context) (lease, error) {
	return func(ctx context.Context) (lease, error) {
		s, err := cl.renewSet(ctx, ls, token, 0)
		if isCode(err, "not_holder") {
			return lease{}, fmt.Errorf("%w (%w)", errGone, err)
		}
		if err != nil {
			return lease{}, err
		}
		return lease{TTLMs: s.TTLMs, RenewAfterMs: s.RenewAfterMs}, nil
	}
}
