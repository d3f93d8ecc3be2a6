package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestBreak: a token minted with --admin breaks a lock held by another;
// its holder's next renew says broken; a token without --admin is
// refused; a free lock exits 1.
func TestBreak(t *testing.T) {
	gw := startGateway(t)
	mint := func(args ...string) map[string]string {
		r := lockctl(t, nil, map[string]string{"LOCKGATE_JWT_SECRET": secret}, append([]string{"token", "--sub", "ops"}, args...)...).want(t, exitOK)
		return map[string]string{"LOCKGATE_TOKEN": strings.TrimSpace(r.stdout)}
	}
	admin, plain := mint("--ns", "cmds", "--admin", "cmds"), mint("--ns", "cmds")

	tok := strings.TrimSpace(lockctl(t, gw, nil, "acquire", "cmds/brk", "--ttl", "1m").want(t, exitOK).stdout)
	if r := lockctl(t, gw, plain, "break", "cmds/brk").want(t, exitAuth); !strings.Contains(r.stderr, "administrator") {
		t.Fatalf("break without --admin: stderr %q, want it to say an administrator is needed", r.stderr)
	}
	if r := lockctl(t, gw, admin, "break", "cmds/brk").want(t, exitOK); !strings.Contains(r.stdout, "broke 1 grant") {
		t.Fatalf("break: stdout %q, want one grant broken", r.stdout)
	}
	if r := lockctl(t, gw, nil, "renew", "cmds/brk", "--token", tok).want(t, exitNotHolder); !strings.Contains(r.stderr, "broke the lock") {
		t.Fatalf("renew of a broken grant: stderr %q, want the reason", r.stderr)
	}
	lockctl(t, gw, admin, "break", "cmds/brk").want(t, exitFree)
}

// TestBreakPeriod: break --period lets the holder renew up to the period's
// end only, then the grant ends broken.
func TestBreakPeriod(t *testing.T) {
	gw := startGateway(t)
	r := lockctl(t, nil, map[string]string{"LOCKGATE_JWT_SECRET": secret}, "token", "--sub", "ops", "--ns", "cmds", "--admin", "cmds").want(t, exitOK)
	admin := map[string]string{"LOCKGATE_TOKEN": strings.TrimSpace(r.stdout)}

	tok := strings.TrimSpace(lockctl(t, gw, nil, "acquire", "cmds/slow", "--ttl", "1m").want(t, exitOK).stdout)
	lockctl(t, gw, admin, "break", "cmds/slow", "--period", "-1s").want(t, exitUsage)
	if r := lockctl(t, gw, admin, "break", "cmds/slow", "--period", "700ms").want(t, exitOK); !strings.Contains(r.stdout, "1 grant(s) end in") {
		t.Fatalf("break --period: stdout %q, want when the grant ends", r.stdout)
	}
	var ls lease
	if err := json.Unmarshal([]byte(lockctl(t, gw, nil, "renew", "cmds/slow", "--token", tok, "--ttl", "1m", "--json").want(t, exitOK).stdout), &ls); err != nil {
		t.Fatal(err)
	}
	if ls.TTLMs <= 0 || ls.TTLMs > 700 {
		t.Fatalf("renew during the period: ttl_ms %d, want at most 700", ls.TTLMs)
	}
	deadline := time.Now().Add(10 * time.Second)
	for lockctl(t, gw, nil, "status", "cmds/slow").code != exitFree {
		if time.Now().After(deadline) {
			t.Fatal("the lock is still held 10 s after a break period of 700 ms")
		}
		time.Sleep(20 * time.Millisecond) // poll interval, not synchronisation
	}
	if r := lockctl(t, gw, nil, "renew", "cmds/slow", "--token", tok).want(t, exitNotHolder); !strings.Contains(r.stderr, "broke the lock") {
		t.Fatalf("renew after the period: stderr %q, want the reason", r.stderr)
	}
}
