package main

import (
	"strings"
	"testing"
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
