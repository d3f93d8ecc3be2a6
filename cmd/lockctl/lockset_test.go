package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
)

// adminEnv is the environment of a lockctl whose token administers every
// namespace (it may break locks).
func adminEnv(t *testing.T) map[string]string {
	t.Helper()
	r := lockctl(t, nil, map[string]string{"LOCKGATE_JWT_SECRET": secret}, "token", "--sub", "ops", "--ns", "*", "--admin", "*").want(t, exitOK)
	return map[string]string{"LOCKGATE_TOKEN": strings.TrimSpace(r.stdout)}
}

// TestLockSetCommands: lockset acquire takes every lock or none and prints
// the set's token; renew renews them all; release releases them all, and
// exits 81 when the set no longer held one of them (a break).
func TestLockSetCommands(t *testing.T) {
	for name, args := range map[string][]string{"embedded": nil, "redis": {"--redis-url", ""}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if args != nil {
				args[1] = redistest.Start(t).URL()
			}
			gw := startGateway(t, args...)
			tok := strings.TrimSpace(lockctl(t, gw, nil, "lockset", "acquire", "sets/a", "sets/b,sets/c", "--ttl", "1m").want(t, exitOK).stdout)
			if tok == "" || strings.ContainsAny(tok, " \n") {
				t.Fatalf("lockset acquire printed %q, want the set's token", tok)
			}
			for _, l := range []string{"sets/a", "sets/b", "sets/c"} {
				lockctl(t, gw, nil, "status", l).want(t, exitOK)
			}

			// A set with one lock held gets none: sets/d stays free.
			if r := lockctl(t, gw, nil, "lockset", "acquire", "sets/d", "sets/c", "--no-wait").want(t, exitHeld); !strings.Contains(r.stderr, "lock_held") {
				t.Fatalf("an overlapping set: stderr %q, want lock_held", r.stderr)
			}
			lockctl(t, gw, nil, "status", "sets/d").want(t, exitFree)

			var renewed lockSet
			out := lockctl(t, gw, nil, "lockset", "renew", "sets/a,sets/b,sets/c", "--token", tok, "--ttl", "2m", "--json").want(t, exitOK).stdout
			if err := json.Unmarshal([]byte(out), &renewed); err != nil {
				t.Fatal(err)
			}
			if len(renewed.Locks) != 3 || renewed.TTLMs != 120000 || renewed.Token != "" {
				t.Fatalf("renew: got %s, want 3 locks for 120000 ms and no token", out)
			}
			lockctl(t, gw, nil, "lockset", "renew", "sets/a", "sets/b", "sets/c", "--token", "not-the-token").want(t, exitNotHolder)

			lockctl(t, gw, adminEnv(t), "break", "sets/b").want(t, exitOK)
			r := lockctl(t, gw, nil, "lockset", "release", "sets/a", "sets/b", "sets/c", "--token", tok, "--json").want(t, exitNotHolder)
			var rel setReleased
			if err := json.Unmarshal([]byte(r.stdout), &rel); err != nil {
				t.Fatal(err)
			}
			if strings.Join(rel.Released, ",") != "sets/a,sets/c" || strings.Join(rel.Gone, ",") != "sets/b" || !strings.Contains(r.stderr, "no longer held sets/b") {
				t.Fatalf("release after a break: got %+v, stderr %q; want a and c released, b gone", rel, r.stderr)
			}
			for _, l := range []string{"sets/a", "sets/b", "sets/c"} {
				lockctl(t, gw, nil, "status", l).want(t, exitFree)
			}
			if strings.Contains(r.stderr, tok) {
				t.Fatal("stderr holds the set's token")
			}
		})
	}
}

// TestRunLockSet: run --set holds every lock while its command runs,
// renewed past their TTL by one call per interval, gives the command the
// set and its fencing tokens, and releases them all when it exits. Two
// runs that name the same locks in opposite orders both run, one after
// the other: neither waits on the other forever.
func TestRunLockSet(t *testing.T) {
	rs := redistest.Start(t)
	gw := startGateway(t, "--redis-url", rs.URL())
	dir := t.TempDir()
	ready, stop := filepath.Join(dir, "ready"), filepath.Join(dir, "stop")
	// A lease a busy machine's scheduling cannot outlast between two
	// renewals (300 ms failed at load 10: a lock of the set ran out, and
	// 'lockset acquire run/z run/y --no-wait' got it).
	const ttl = 3 * time.Second
	done := lockctlAsync(t, gw, nil, "run", "--set", "run/x", "run/y", "--ttl", ttl.String(), "--",
		"sh", "-c", `echo "$LOCKGATE_LOCK_SET $LOCKGATE_FENCING_TOKEN $LOCKGATE_FENCING_TOKENS" > `+shq(ready)+
			`; while [ ! -e `+shq(stop)+` ]; do sleep 0.05; done`)
	env := strings.Fields(waitFile(t, ready))
	if len(env) != 4 || env[0] != "run/x,run/y" || !strings.HasPrefix(env[2], "run/x=") || env[2] != "run/x="+env[1] || !strings.HasPrefix(env[3], "run/y=") {
		t.Fatalf("the command's LOCKGATE_LOCK_SET, LOCKGATE_FENCING_TOKEN and LOCKGATE_FENCING_TOKENS: %q", env)
	}
	start := time.Now()
	for time.Since(start) < 3*ttl/2 { // past the TTL: renewed
		for _, l := range []string{"run/x", "run/y"} {
			lockctl(t, gw, nil, "status", l).want(t, exitOK)
		}
		time.Sleep(ttl / 10) // pace the probes; not synchronisation
	}
	// All or none, while the run holds its set: run/z stays free.
	lockctl(t, gw, nil, "lockset", "acquire", "run/z", "run/y", "--no-wait").want(t, exitHeld)
	lockctl(t, gw, nil, "status", "run/z").want(t, exitFree)
	touch(t, stop)
	if r := waitRun(t, done).want(t, 0); r.stderr != "" {
		t.Errorf("stderr %q, want nothing", r.stderr)
	}
	for _, l := range []string{"run/x", "run/y"} {
		lockctl(t, gw, nil, "status", l).want(t, exitFree)
	}

	// Opposite orders, at once, each holding its set for a moment.
	var runs []<-chan result
	for _, set := range []string{"run/p,run/q", "run/q,run/p"} {
		runs = append(runs, lockctlAsync(t, gw, nil, "run", "--set", set, "--wait", "20s", "--", "sh", "-c", "sleep 0.2"))
	}
	for _, r := range runs {
		waitRun(t, r).want(t, 0)
	}
}

// TestRunLockSetLeaseLost: a lock of the set broken under a run makes the
// next renewal find the set no longer whole: run stops the command, exits
// 84, and releases the locks the set still held.
func TestRunLockSetLeaseLost(t *testing.T) {
	gw := startGateway(t)
	dir := t.TempDir()
	ready, term := filepath.Join(dir, "ready"), filepath.Join(dir, "term")
	done := lockctlAsync(t, gw, nil, "run", "--set", "lost/a,lost/b", "--ttl", "600ms", "--",
		"sh", "-c", `trap 'echo term > `+shq(term)+`; exit 0' TERM; echo $$ > `+shq(ready)+`; while :; do sleep 0.05; done`)
	waitFile(t, ready)
	lockctl(t, gw, adminEnv(t), "break", "lost/b").want(t, exitOK)
	r := waitRun(t, done).want(t, exitLeaseLost)
	if got := waitFile(t, term); got != "term" {
		t.Fatalf("marker: got %q, want term", got)
	}
	if !strings.Contains(r.stderr, "no longer holds lock set lost/a, lost/b") {
		t.Errorf("stderr %q, want it to say the set is no longer held", r.stderr)
	}
	lockctl(t, gw, nil, "status", "lost/a").want(t, exitFree)
}

// TestLockSetUsage: mistakes in a set's command line are 2, before any
// call.
func TestLockSetUsage(t *testing.T) {
	url := closedURL(t) // a call would be 83, not 2
	for name, args := range map[string][]string{
		"no verb":          {"lockset"},
		"unknown verb":     {"lockset", "take", "a/b"},
		"no lock":          {"lockset", "acquire"},
		"bad lock":         {"lockset", "acquire", "a/b,Bad/c"},
		"empty in list":    {"lockset", "acquire", "a/b,"},
		"renew no token":   {"lockset", "renew", "a/b"},
		"release no token": {"lockset", "release", "a/b"},
		"shared flag":      {"lockset", "acquire", "a/b", "--shared"},
		"run set shared":   {"run", "--set", "a/b", "a/c", "--shared", "--", "true"},
		"run set limit":    {"run", "--set", "a/b", "--limit", "2", "--", "true"},
		"run set session":  {"run", "--set", "a/b", "--session", "--", "true"},
		"run set value":    {"run", "--set", "a/b", "--value", "v", "--", "true"},
	} {
		t.Run(name, func(t *testing.T) {
			lockctl(t, nil, map[string]string{"LOCKGATE_URL": url}, args...).want(t, exitUsage)
		})
	}
	// The gateway's 400 (a lock named twice) is a usage error too.
	gw := startGateway(t)
	if r := lockctl(t, gw, nil, "lockset", "acquire", "u/a", "u/a").want(t, exitUsage); !strings.Contains(r.stderr, "twice") {
		t.Fatalf("stderr %q, want the gateway's reason", r.stderr)
	}
}
