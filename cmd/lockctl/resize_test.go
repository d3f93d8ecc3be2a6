package main

import (
	"strings"
	"testing"
)

// TestResize: a token minted with --admin raises a semaphore's limit, and
// the waiter gets its permit at once; a token without --admin is refused;
// a limit out of range is a usage error before any call; an idle
// semaphore exits 1.
func TestResize(t *testing.T) {
	gw := startGateway(t)
	mint := func(args ...string) map[string]string {
		r := lockctl(t, nil, map[string]string{"LOCKGATE_JWT_SECRET": secret}, append([]string{"token", "--sub", "ops"}, args...)...).want(t, exitOK)
		return map[string]string{"LOCKGATE_TOKEN": strings.TrimSpace(r.stdout)}
	}
	admin, plain := mint("--ns", "cmds", "--admin", "cmds"), mint("--ns", "cmds")

	lockctl(t, gw, nil, "acquire", "cmds/pool", "--limit", "1", "--ttl", "1m").want(t, exitOK)
	waiting := lockctlAsync(t, gw, nil, "acquire", "cmds/pool", "--limit", "1", "--ttl", "1m", "--wait", "1m")
	waitForWaiters(t, gw, 1)

	if r := lockctl(t, gw, plain, "resize", "cmds/pool", "--limit", "2").want(t, exitAuth); !strings.Contains(r.stderr, "administrator") {
		t.Fatalf("resize without --admin: stderr %q, want it to say an administrator is needed", r.stderr)
	}
	lockctl(t, gw, admin, "resize", "cmds/pool", "--limit", "0").want(t, exitUsage)
	lockctl(t, gw, admin, "resize", "cmds/pool", "--limit", "10001").want(t, exitUsage)
	if r := lockctl(t, gw, admin, "resize", "cmds/pool", "--limit", "2").want(t, exitOK); !strings.Contains(r.stdout, "limit 2, 2 permits held, 0 waiting") {
		t.Fatalf("resize: stdout %q, want limit 2 with both permits held", r.stdout)
	}
	if r := (<-waiting).want(t, exitOK); strings.TrimSpace(r.stdout) == "" {
		t.Fatal("the waiter's acquire printed no token")
	}
	lockctl(t, gw, nil, "acquire", "cmds/pool", "--limit", "1").want(t, exitUsage) // limit_mismatch: 2 is in force
	lockctl(t, gw, admin, "resize", "cmds/idle", "--limit", "3").want(t, exitFree)
}
