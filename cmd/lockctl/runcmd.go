package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// forwarded are the signals run passes on to its command. After SIGINT or
// SIGTERM the command has --kill-after to exit before it gets SIGKILL.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// releaseTimeout bounds the release after the command exits; past it the
// lock is left to expire.
const releaseTimeout = 10 * time.Second

// cmdRun is the watchdog for scripts: it holds the lock while a command
// runs, and makes sure the command does not run on without it.
func cmdRun(ctx context.Context, c cli, args []string) error {
	const usage = "run namespace/name [namespace/name...] [--session | --set] [--shared | --limit N] [--ttl 30s] [--wait 5m | --no-wait] [--value V] [--max-hold D] [--priority N] [--once-per 10m] [--kill-after 10s] [--no-token-env] -- command [args...]"
	fset := c.newFlagSet("run", usage)
	cf := addClientFlags(fset)
	af := addAcquireFlags(fset, 5*time.Minute)
	killAfter := fset.Duration("kill-after", 10*time.Second, "how long the command has between SIGTERM and SIGKILL, when lockctl stops it: after a lost lease, or after SIGINT or SIGTERM to lockctl")
	noToken := fset.Bool("no-token-env", false, "do not pass LOCKGATE_TOKEN on to the command (a nested lockctl in it then needs a token of its own)")
	inSession := fset.Bool("session", false, "hold the lock in a session, as run does with several locks: one keep-alive for all, one end")
	oncePer := fset.Duration("once-per", 0, "run the command at most once per this period, however many hosts run lockctl on the lock: "+
		"no wait, and the lock stays taken for the period from the grant, released or not; when the command ran within the period, "+
		"exit 80 quietly without running it")
	asSet := fset.Bool("set", false, "hold the locks (up to 16, also separated by commas) as one lock set: every one or none, taken in one call, so runs that name them in any order never deadlock")
	pos, argv, dashes, err := parseArgs(fset, args)
	if err != nil {
		return err
	}
	switch {
	case !dashes || len(argv) == 0:
		return usagef("run needs a command after --: lockctl %s", usage)
	case len(pos) == 0:
		return usagef("run takes a lock, namespace/name, before --; or several, held in one session")
	case *killAfter < 0:
		return usagef("--kill-after must not be negative")
	}
	var ls []lockName
	if *asSet {
		if ls, err = parseSetLocks(pos); err != nil {
			return err
		}
	} else {
		ls = make([]lockName, len(pos))
		for i, p := range pos {
			if ls[i], err = parseLockName(p); err != nil {
				return err
			}
			ls[i].semaphore = af.limit > 0
		}
	}
	l := ls[0]
	if err := af.check(); err != nil {
		return err
	}
	if *oncePer != 0 {
		if *oncePer < time.Millisecond || *asSet || *inSession || len(ls) > 1 || af.shared || af.limit > 0 {
			return usagef("--once-per takes a period of at least 1ms, and one exclusive lock: not with --set, --session, --shared or --limit")
		}
		if af.maxHold > 0 && af.maxHold < *oncePer {
			return usagef("--max-hold must be at least --once-per: the period is the grant's min hold")
		}
		af.wait, af.minHold = 0, *oncePer
	}
	if *asSet && (*inSession || af.shared || af.limit > 0 || af.value != "") {
		return usagef("--set takes exclusive locks of their own lease: not with --session, --shared, --limit or --value")
	}
	if af.ttl < 3*time.Millisecond {
		return usagef("run needs --ttl of at least 3ms: it renews every third of it")
	}
	cl, err := cf.client(c.getenv)
	if err != nil {
		return err
	}

	// Listen before acquiring: a Ctrl-C while waiting must not leave a
	// grant behind.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	if *asSet {
		return runLockSet(ctx, c, cl, ls, af, argv, childEnv(os.Environ(), *noToken), sigs, *killAfter)
	}

	// Inside a run of the same lock, re-enter the outer run's grant rather
	// than wait on ourselves. The outer run keeps renewing the lease while
	// this one runs (it is our ancestor), so this one does not renew: a
	// second keeper with a shorter TTL would shorten the outer lease.
	if outer := c.getenv("LOCKGATE_LOCK_TOKEN"); outer != "" && !l.semaphore && c.getenv("LOCKGATE_LOCK") == l.String() {
		return runReentered(ctx, c, cl, l, outer, af, argv, childEnv(os.Environ(), *noToken), sigs, *killAfter)
	}

	if len(ls) > 1 || *inSession {
		return runInSession(ctx, c, cl, ls, af, argv, childEnv(os.Environ(), *noToken), sigs, *killAfter)
	}

	g, sent, err := acquireOrSignal(ctx, cl, l, af, sigs)
	if err != nil {
		if af.minHold > 0 && isCode(err, "lock_held") {
			// Run within the period, here or elsewhere (or running now):
			// not this time, and nothing to say about it.
			return exitStatus(exitHeld)
		}
		return err
	}
	// A new grant has one hold, the acquire's: any other answer is not one
	// this lockctl understands, and no command runs under it.
	if g.Holds > 1 {
		releaseQuietly(ctx, c, cl, l, g.Token, "")
		return fmt.Errorf("acquire %s: the gateway answered a new grant with %d holds, want 1", l, g.Holds)
	}

	env := append(childEnv(os.Environ(), *noToken), "LOCKGATE_FENCING_TOKEN="+strconv.FormatInt(g.FencingToken, 10))
	if l.semaphore {
		// Neither LOCKGATE_LOCK nor LOCKGATE_LOCK_TOKEN: a nested run of
		// the lock of the same name must not re-enter with a permit.
		env = append(env, "LOCKGATE_SEMAPHORE="+l.String())
	} else {
		env = append(env, "LOCKGATE_LOCK="+l.String(), "LOCKGATE_LOCK_TOKEN="+g.Token)
	}
	ch, err := startChild(argv, env, c.stdin, c.stdout, c.stderr)
	if err != nil {
		releaseQuietly(ctx, c, cl, l, g.Token, "")
		return fmt.Errorf("run %s: %w", argv[0], startError(err))
	}

	k := &keeper{what: l.String(), renew: lockRenewer(cl, l, g.Token), ttl: time.Duration(g.TTLMs) * time.Millisecond,
		interval: renewAfter(g.TTLMs, g.RenewAfterMs), stderr: c.stderr}
	k.deadline = sent.Add(k.ttl)
	code, lostErr := supervise(ctx, c, ch, k, sigs, *killAfter)
	if lostErr != nil {
		// Renewals may have failed with the lock still ours: free it if so.
		releaseQuietly(ctx, c, cl, l, g.Token, "")
		return exitStatus(exitLeaseLost)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	left, err := cl.releaseHold(rctx, l, g.Token, "")
	if err != nil {
		if isCode(err, "not_holder") && code == 0 {
			return fmt.Errorf("%w: the command exited 0, but %s had been lost before it finished", errLeaseLost, l)
		}
		fmt.Fprintf(c.stderr, "lockctl: release %s: %v; the lock is left to expire\n", l, err)
	} else if left > 0 {
		// Our hold ended, and holds someone took with our token (a nested
		// run that did not end its own) keep the lock until the lease ends.
		fmt.Fprintf(c.stderr, "lockctl: released %s, but %d other holds of its grant remain: the lock stays held until its lease ends\n", l, left)
	}
	return exitStatus(code)
}

// runReentered runs a command under a re-entrant hold of the lock an outer
// run holds with token: it takes one more hold, runs the command, passes
// signals on, and takes its hold away when the command exits.
func runReentered(ctx context.Context, c cli, cl *client, l lockName, token string, af *acquireFlags,
	argv, env []string, sigs <-chan os.Signal, killAfter time.Duration) error {
	g, err := cl.reenter(ctx, l, token, af.ttl, af.shared)
	if err != nil {
		return fmt.Errorf("re-enter %s: %w", l, err)
	}
	// The outer hold and ours, at least, and ours by its id: a gateway
	// that answers otherwise would have us end a hold that is not ours.
	if g.Holds < 2 || g.Hold == "" {
		releaseQuietly(ctx, c, cl, l, token, g.Hold)
		return fmt.Errorf("re-enter %s: the gateway answered %d holds and hold id %q; want at least 2 and an id (is it older than lockctl?)", l, g.Holds, g.Hold)
	}
	ch, err := startChild(argv, env, c.stdin, c.stdout, c.stderr)
	if err != nil {
		releaseQuietly(ctx, c, cl, l, token, g.Hold)
		return fmt.Errorf("run %s: %w", argv[0], startError(err))
	}
	var kill <-chan time.Time
	ctxDone := ctx.Done()
	end := func(sig syscall.Signal) {
		ch.signal(sig)
		if kill == nil {
			kill = time.After(killAfter)
		}
	}
wait:
	for {
		select {
		case <-ch.done:
			break wait
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				ch.signal(sig)
				continue
			}
			end(sig.(syscall.Signal))
		case <-ctxDone:
			ctxDone = nil
			end(syscall.SIGTERM)
		case <-ch.stopped: // the outer run keeps the lease; nothing to do
		case <-kill:
			kill = nil
			ch.signal(syscall.SIGKILL)
		}
	}
	ch.release()
	releaseQuietly(ctx, c, cl, l, token, g.Hold) // our hold: the outer run's stays
	return exitStatus(ch.exitCode())
}

// childEnv is the command's environment: lockctl's own, without
// LOCKGATE_JWT_SECRET (a key that mints tokens for every namespace is
// lockctl token's, never the command's), and without LOCKGATE_TOKEN when
// noToken is set; the caller adds the lock's variables.
func childEnv(environ []string, noToken bool) []string {
	env := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if name == "LOCKGATE_JWT_SECRET" || noToken && name == "LOCKGATE_TOKEN" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// acquireOrSignal acquires the lock, giving up as a shell would (128+N)
// when a forwarded signal arrives first. A grant that races the signal is
// released.
func acquireOrSignal(ctx context.Context, cl *client, l lockName, af *acquireFlags, sigs <-chan os.Signal) (grant, time.Time, error) {
	return orSignal(ctx, sigs, "acquire "+l.String(),
		func(ctx context.Context) (grant, time.Time, error) { return acquireWaiting(ctx, cl, l, af) },
		func(ctx context.Context, g grant) { cl.release(ctx, l, g.Token) })
}

// orSignal runs acquire, which takes what is named what, and gives up as
// a shell would (128+N) when a forwarded signal arrives first. What
// acquire took while the signal came is given back with release.
func orSignal[G any](ctx context.Context, sigs <-chan os.Signal, what string,
	acquire func(context.Context) (G, time.Time, error), release func(context.Context, G)) (G, time.Time, error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		g    G
		sent time.Time
		err  error
	}
	got := make(chan result, 1)
	go func() {
		g, sent, err := acquire(actx)
		got <- result{g, sent, err}
	}()
	var none G
	select {
	case r := <-got:
		if r.err != nil {
			return none, time.Time{}, fmt.Errorf("%s: %w", what, r.err)
		}
		return r.g, r.sent, nil
	case sig := <-sigs:
		cancel()
		if r := <-got; r.err == nil {
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
			defer rcancel()
			release(rctx, r.g)
		}
		return none, time.Time{}, exitStatus(exitSignalBase + signalNumber(sig))
	}
}

// releaseQuietly frees the lock if it is still ours, on a path that
// already has its own outcome.
func releaseQuietly(ctx context.Context, c cli, cl *client, l lockName, token, hold string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if _, err := cl.releaseHold(rctx, l, token, hold); err != nil && !isCode(err, "not_holder") {
		fmt.Fprintf(c.stderr, "lockctl: release %s: %v; the lock is left to expire\n", l, err)
	}
}

// startError gives a command that could not start the shell's exit code:
// 127 when it was not found, 126 otherwise.
func startError(err error) error {
	code := exitCannotExec
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		code = exitNotFound
	}
	return &startErr{err: err, code: code}
}

type startErr struct {
	err  error
	code int
}

func (e *startErr) Error() string { return e.err.Error() }
func (e *startErr) Unwrap() error { return e.err }

// supervise runs until the command ch exits, while k keeps its lease:
// it passes signals on, stops the command when the lease is lost, and
// returns the command's exit code and the loss, if any.
func supervise(ctx context.Context, c cli, ch *child, k *keeper, sigs <-chan os.Signal, killAfter time.Duration) (int, error) {
	keepCtx, stopKeeping := context.WithCancel(context.WithoutCancel(ctx))
	defer stopKeeping()
	lost := make(chan error, 1)
	go func() { lost <- k.keep(keepCtx) }()

	var (
		lostErr error
		kill    <-chan time.Time // SIGKILL when it fires
		killWhy string
		ctxDone = ctx.Done()
	)
	// end asks the command to stop with sig, and gives it --kill-after to
	// do so: whatever the command does with sig, lockctl ends.
	end := func(sig syscall.Signal, why string) {
		ch.signal(sig)
		if kill == nil {
			kill, killWhy = time.After(killAfter), why
		}
	}
watch:
	for {
		select {
		case <-ch.done:
			break watch
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				ch.signal(sig) // the command decides: many reload on it
				continue
			}
			end(sig.(syscall.Signal), "of "+signalName(sig))
		case <-ctxDone: // as a SIGTERM: run was asked to stop
			ctxDone = nil
			end(syscall.SIGTERM, "of SIGTERM")
		case sig := <-ch.stopped:
			if ch.canSuspend() {
				fmt.Fprintf(c.stderr, "lockctl: the command stopped (%s); suspending lockctl with it: "+
					"the lease is not renewed while suspended, and if it ends meanwhile lockctl stops the command once resumed\n", signalName(sig))
				ch.suspend(sig)
				continue
			}
			fmt.Fprintf(c.stderr, "lockctl: the command stopped (%s); lockctl keeps renewing %s until it continues (SIGCONT) or exits; "+
				"SIGINT or SIGTERM to lockctl end both\n", signalName(sig), k.what)
		case lostErr = <-lost:
			lost = nil
			fmt.Fprintf(c.stderr, "lockctl: %v; stopping the command (SIGTERM, then SIGKILL after %s)\n", lostErr, killAfter)
			end(syscall.SIGTERM, "of SIGTERM")
		case <-kill:
			kill = nil
			fmt.Fprintf(c.stderr, "lockctl: the command did not exit within %s %s; sending SIGKILL\n", killAfter, killWhy)
			ch.signal(syscall.SIGKILL)
		}
	}
	ch.release()
	stopKeeping()
	if lost != nil {
		// No renewal may race the release. A loss found just now still
		// counts: the command may have finished its work without the lock.
		if err := <-lost; err != nil {
			lostErr = err
			fmt.Fprintf(c.stderr, "lockctl: %v\n", lostErr)
		}
	}
	return ch.exitCode(), lostErr
}
