package main

import (
	"encoding/json"
	"testing"
	"time"
)

// TestMaxHold: --max-hold sends max_hold_ms; acquire --json shows the
// grant's hold_until; a cap below --ttl is a usage error; and run stops
// the command at the cap as on a lost lease (exit 84), however often it
// renews, leaving the lock free.
func TestMaxHold(t *testing.T) {
	gw := startGateway(t)
	start := time.Now()
	r := lockctl(t, gw, nil, "acquire", "maxhold/json", "--ttl", "1s", "--max-hold", "1m", "--json").want(t, 0)
	var g grant
	if err := json.Unmarshal([]byte(r.stdout), &g); err != nil {
		t.Fatal(err)
	}
	if g.HoldUntil == nil || g.HoldUntil.After(start.Add(time.Minute+time.Second)) || g.HoldUntil.Before(start.Add(50*time.Second)) {
		t.Fatalf("hold_until %v, want about a minute after %v", g.HoldUntil, start)
	}
	lockctl(t, gw, nil, "acquire", "maxhold/bad", "--ttl", "2s", "--max-hold", "1s").want(t, exitUsage)
	r = lockctl(t, gw, nil, "acquire", "maxhold/permit", "--limit", "2", "--max-hold", "1m", "--json").want(t, 0)
	if err := json.Unmarshal([]byte(r.stdout), &g); err != nil || g.HoldUntil == nil {
		t.Fatalf("a permit with --max-hold: %s, %v; want hold_until", r.stdout, err)
	}

	// The command would run for a minute; the cap ends it after a second.
	lockctl(t, gw, nil, "run", "maxhold/run", "--ttl", "300ms", "--max-hold", "1s", "--kill-after", "1s", "--", "sleep", "60").want(t, exitLeaseLost)
	lockctl(t, gw, nil, "status", "maxhold/run").want(t, exitFree)
}

// TestLockSetMaxHold: lockset acquire and run --set take --max-hold as
// acquire does: it sends the set's max_hold_ms, --json shows each lock's
// hold_until, a cap below --ttl is a usage error, and run --set stops the
// command at the cap as on a lost lease (exit 84), leaving the locks free.
func TestLockSetMaxHold(t *testing.T) {
	gw := startGateway(t)
	start := time.Now()
	r := lockctl(t, gw, nil, "lockset", "acquire", "maxhold/s1", "maxhold/s2", "--ttl", "1s", "--max-hold", "1m", "--json").want(t, 0)
	var s lockSet
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || len(s.Locks) != 2 {
		t.Fatalf("lockset acquire --json: %s, %v; want both locks", r.stdout, err)
	}
	for _, l := range s.Locks {
		if l.HoldUntil == nil || l.HoldUntil.After(start.Add(time.Minute+time.Second)) || l.HoldUntil.Before(start.Add(50*time.Second)) {
			t.Fatalf("%s: hold_until %v, want about a minute after %v", l.Lock, l.HoldUntil, start)
		}
	}
	lockctl(t, gw, nil, "lockset", "acquire", "maxhold/s3", "--ttl", "2s", "--max-hold", "1s").want(t, exitUsage)

	// The command would run for a minute; the cap ends it after a second.
	lockctl(t, gw, nil, "run", "--set", "maxhold/r1,maxhold/r2", "--ttl", "300ms", "--max-hold", "1s", "--kill-after", "1s", "--", "sleep", "60").want(t, exitLeaseLost)
	for _, l := range []string{"maxhold/r1", "maxhold/r2"} {
		lockctl(t, gw, nil, "status", l).want(t, exitFree)
	}
}
