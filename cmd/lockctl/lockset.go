package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// lockSet is the gateway's answer about a lock set: an acquire's 201
// (with the set's token) or a renewal's 200 (without). TTLMs,
// RenewAfterMs and ExpiresAt are those of the lease that ends first.
type lockSet struct {
	Token        string    `json:"token,omitempty"`
	Locks        []lease   `json:"locks"`
	TTLMs        int64     `json:"ttl_ms"`
	RenewAfterMs *int64    `json:"renew_after_ms,omitempty"`
	ExpiresAt    time.Time `json:"expires_at"`
}

// setReleased is a set's release: the locks it released, and those the
// set no longer held (a lease that ended, a break).
type setReleased struct {
	Released []string `json:"released"`
	Gone     []string `json:"gone"`
}

// setList is the set's locks as the API names them: namespace/name,
// separated by commas.
func setList(ls []lockName) string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.String()
	}
	return strings.Join(out, ",")
}

// setQuery is the query that names the set's locks in a renewal or a
// release.
func setQuery(ls []lockName) string { return url.Values{"locks": {setList(ls)}}.Encode() }

// parseSetLocks parses a set's locks: each argument one lock, or several
// separated by commas, as the API writes them.
func parseSetLocks(args []string) ([]lockName, error) {
	var ls []lockName
	for _, a := range args {
		for _, s := range strings.Split(a, ",") {
			l, err := parseLockName(s)
			if err != nil {
				return nil, err
			}
			ls = append(ls, l)
		}
	}
	if len(ls) == 0 {
		return nil, usagef("a lock set names at least one lock, namespace/name")
	}
	return ls, nil
}

// acquireSet asks for every lock of ls or none, waiting server-side up to
// wait.
func (c *client) acquireSet(ctx context.Context, ls []lockName, af *acquireFlags, wait time.Duration) (lockSet, error) {
	body := map[string]any{"locks": setList(ls), "ttl_ms": af.ttl.Milliseconds()}
	if wait > 0 {
		body["wait_ms"] = wait.Milliseconds()
	}
	if af.owner != "" {
		body["owner"] = af.owner
	}
	if af.maxHold > 0 {
		body["max_hold_ms"] = af.maxHold.Milliseconds()
	}
	if af.priority > 0 && wait > 0 {
		body["priority"] = af.priority
	}
	var s lockSet
	err := c.do(ctx, http.MethodPost, "/lock-sets", body, "", c.timeout+wait, http.StatusCreated, &s)
	return s, err
}

// renewSet resets the lease of every lock of the set of token to the TTL
// it was acquired with, or to ttl when it is positive. One lock whose
// grant ended is a 409 not_holder: the set is no longer whole.
func (c *client) renewSet(ctx context.Context, ls []lockName, token string, ttl time.Duration) (lockSet, error) {
	var body any
	if ttl > 0 {
		body = map[string]any{"ttl_ms": ttl.Milliseconds()}
	}
	var s lockSet
	err := c.do(ctx, http.MethodPut, "/lock-sets/lease?"+setQuery(ls), body, token, c.timeout, http.StatusOK, &s)
	return s, err
}

// releaseSet releases every lock of the set of token.
func (c *client) releaseSet(ctx context.Context, ls []lockName, token string) (setReleased, error) {
	var r setReleased
	err := c.do(ctx, http.MethodDelete, "/lock-sets?"+setQuery(ls), nil, token, c.timeout, http.StatusOK, &r)
	return r, err
}

// acquireSetWaiting takes the set, waiting for it up to af.wait in
// server-side waits of at most af.serverWaitMax, as acquireWaiting does
// for one lock. A set whose wait runs out holds nothing, so asking again
// starts afresh.
func acquireSetWaiting(ctx context.Context, c *client, ls []lockName, af *acquireFlags) (s lockSet, sent time.Time, err error) {
	deadline := time.Now().Add(af.wait)
	for {
		wait := min(max(time.Until(deadline), 0), af.serverWaitMax)
		sent = time.Now()
		s, err = c.acquireSet(ctx, ls, af, wait)
		if err == nil || !isCode(err, "lock_held") || time.Until(deadline) <= 0 {
			return s, sent, err
		}
	}
}

// addSetAcquireFlags are acquire's flags that a lock set takes: its locks
// are exclusive, without a value, and in no session.
func addSetAcquireFlags(fs *flag.FlagSet, defaultWait time.Duration) *acquireFlags {
	af := &acquireFlags{}
	fs.DurationVar(&af.ttl, "ttl", 30*time.Second, "lease length of every lock")
	fs.DurationVar(&af.wait, "wait", defaultWait, "how long to wait for every lock to be free (server-side)")
	fs.BoolVar(&af.noWait, "no-wait", false, "fail at once if a lock is held (same as --wait 0)")
	fs.StringVar(&af.owner, "owner", defaultOwner(), "label shown by status on each lock")
	fs.DurationVar(&af.serverWaitMax, "server-wait-max", time.Minute,
		"the gateway's --max-wait: a longer --wait is made of several server-side waits of at most this")
	fs.DurationVar(&af.maxHold, "max-hold", 0, "a hard cap on each lock's grant: no renewal of the set carries it past its acquisition plus this (at least --ttl; 0: none, or the gateway's --max-hold)")
	fs.IntVar(&af.priority, "priority", 0, "the set's priority as a waiter in each lock's queue, 0 to 9: a higher one is served first, and every --priority-aging of the gateway's (30s) of waiting raises a waiter one level")
	return af
}

// cmdLockSet acquires, renews and releases lock sets: up to 16 locks
// taken in one call, every one or none, with one token for all.
func cmdLockSet(ctx context.Context, c cli, args []string) error {
	const usage = "lockset acquire namespace/name... [--ttl 30s] [--wait 0 | --no-wait] [--owner label] [--max-hold D] [--priority N] [--json] | " +
		"lockset renew namespace/name... --token T [--ttl D] [--json] | lockset release namespace/name... --token T [--json]"
	if len(args) == 0 {
		return usagef("lockset needs acquire, renew or release: lockctl %s", usage)
	}
	verb := args[0]
	fs := c.newFlagSet("lockset "+verb, usage)
	cf := addClientFlags(fs)
	asJSON := fs.Bool("json", false, "print the gateway's answer as JSON")
	var (
		af      *acquireFlags
		tokFlag *string
		ttl     *time.Duration
	)
	switch verb {
	case "acquire":
		af = addSetAcquireFlags(fs, 0)
	case "renew", "release":
		tokFlag = fs.String("token", "", "the set's token, as lockset acquire printed it; - reads it from stdin (default $LOCKGATE_LOCK_TOKEN)")
		if verb == "renew" {
			ttl = fs.Duration("ttl", 0, "new lease length from now (default: the TTL the set was acquired with)")
		}
	default:
		return usagef("lockset needs acquire, renew or release, not %q", verb)
	}
	pos, rest, _, err := parseArgs(fs, args[1:])
	if err != nil {
		return err
	}
	ls, err := parseSetLocks(append(pos, rest...))
	if err != nil {
		return err
	}
	var out any
	switch verb {
	case "acquire":
		if err := af.check(); err != nil {
			return err
		}
		cl, err := cf.client(c.getenv)
		if err != nil {
			return err
		}
		s, _, err := acquireSetWaiting(ctx, cl, ls, af)
		if err != nil {
			return fmt.Errorf("acquire set %s: %w", names(ls), err)
		}
		if !*asJSON {
			// The token goes to stdout, which the user asked for; never to stderr.
			_, err = fmt.Fprintln(c.stdout, printable(s.Token))
			return err
		}
		out = s
	case "renew":
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
		s, err := cl.renewSet(ctx, ls, tok, *ttl)
		if err != nil {
			return fmt.Errorf("renew set %s: %w", names(ls), err)
		}
		out = s
	case "release":
		tok, err := readLockToken(c, *tokFlag)
		if err != nil {
			return err
		}
		cl, err := cf.client(c.getenv)
		if err != nil {
			return err
		}
		r, err := cl.releaseSet(ctx, ls, tok)
		if err != nil {
			return fmt.Errorf("release set %s: %w", names(ls), err)
		}
		if *asJSON {
			if err := json.NewEncoder(c.stdout).Encode(r); err != nil {
				return err
			}
		}
		if len(r.Gone) > 0 {
			// Released, but the set was not whole until now: as a release
			// of a lock whose lease had ended, the holder did not hold it.
			fmt.Fprintf(c.stderr, "lockctl: released set %s, but the set no longer held %s (its lease ended, or it was broken)\n",
				names(ls), printable(strings.Join(r.Gone, ", ")))
			return exitStatus(exitNotHolder)
		}
		return nil
	}
	if *asJSON {
		return json.NewEncoder(c.stdout).Encode(out)
	}
	return nil
}
