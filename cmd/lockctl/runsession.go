package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// runInSession runs a command while it holds every lock of ls in one
// session: one keep-alive renews them all, and one end releases them all,
// each atomically on its own lock. The command gets the session's id in
// LOCKGATE_SESSION (never its token), and the fencing tokens in
// LOCKGATE_FENCING_TOKENS ("ns/a=12 ns/b=7"; LOCKGATE_FENCING_TOKEN is the
// first lock's). A nested run does not re-enter these locks.
func runInSession(ctx context.Context, c cli, cl *client, ls []lockName, af *acquireFlags,
	argv, env []string, sigs <-chan os.Signal, killAfter time.Duration) error {
	sent := time.Now()
	s, err := cl.openSession(ctx, af.ttl)
	if err != nil {
		return fmt.Errorf("open session: %w", err)
	}
	end := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		if _, err := cl.endSession(rctx, s.Session, s.SessionToken); err != nil && !isCode(err, "session_ended") {
			fmt.Fprintf(c.stderr, "lockctl: end session %s: %v; its locks are left to expire with its lease\n", s.Session, err)
		}
	}
	k := &keeper{what: "session " + s.Session + " (" + names(ls) + ")", renew: sessionRenewer(cl, s),
		ttl: time.Duration(s.TTLMs) * time.Millisecond, interval: renewAfter(s.TTLMs, s.RenewAfterMs), stderr: c.stderr}
	k.deadline = sent.Add(k.ttl)

	// The session must live while later locks are waited for: keep it
	// alive meanwhile, as the command's keeper does after.
	acquiring, stopAcquiring := context.WithCancel(context.WithoutCancel(ctx))
	kept := make(chan error, 1)
	go func() { kept <- k.keep(acquiring) }()
	sess := *af
	sess.session = s.SessionToken
	fences := make([]string, len(ls))
	var first int64
	for i, l := range ls {
		g, _, err := acquireOrSignal(ctx, cl, l, &sess, sigs)
		if err != nil {
			stopAcquiring()
			<-kept
			end()
			return err
		}
		if i == 0 {
			first = g.FencingToken
		}
		fences[i] = l.String() + "=" + strconv.FormatInt(g.FencingToken, 10)
	}
	stopAcquiring()
	if err := <-kept; err != nil {
		end()
		return fmt.Errorf("acquire in %s: %w", k.what, err)
	}

	env = append(env, "LOCKGATE_SESSION="+s.Session, "LOCKGATE_FENCING_TOKENS="+strings.Join(fences, " "),
		"LOCKGATE_FENCING_TOKEN="+strconv.FormatInt(first, 10))
	ch, err := startChild(argv, env, c.stdin, c.stdout, c.stderr)
	if err != nil {
		end()
		return fmt.Errorf("run %s: %w", argv[0], startError(err))
	}
	code, lostErr := supervise(ctx, c, ch, k, sigs, killAfter)
	end()
	if lostErr != nil {
		return exitStatus(exitLeaseLost)
	}
	return exitStatus(code)
}

// sessionRenewer keeps the session s alive. A grant of it found ended is
// a lost lease, as the session itself ending is.
func sessionRenewer(cl *client, s session) func(context.Context) (lease, error) {
	return func(ctx context.Context) (lease, error) {
		kept, err := cl.keepSession(ctx, s.Session, s.SessionToken, 0)
		if isCode(err, "session_ended") {
			return lease{}, fmt.Errorf("%w (%w)", errGone, err)
		}
		if err != nil {
			return lease{}, err
		}
		if len(kept.Gone) > 0 {
			return lease{}, fmt.Errorf("%w: %s %s ended", errGone, kept.Gone[0].Kind, kept.Gone[0].Resource)
		}
		return lease{TTLMs: kept.TTLMs, RenewAfterMs: kept.RenewAfterMs}, nil
	}
}

// names lists ls for messages.
func names(ls []lockName) string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.String()
	}
	return strings.Join(out, ", ")
}
