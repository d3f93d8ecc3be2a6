package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunSeveralLocksInOneSession: run holds several locks in one
// session, kept alive by one call per interval past their TTL, and ends
// them all when the command exits.
func TestRunSeveralLocksInOneSession(t *testing.T) {
	gw := startGateway(t)
	dir := t.TempDir()
	ready, stop := filepath.Join(dir, "ready"), filepath.Join(dir, "stop")
	const ttl = 300 * time.Millisecond
	done := lockctlAsync(t, gw, nil, "run", "sess/a", "sess/b", "sess/c", "--ttl", ttl.String(), "--",
		"sh", "-c", `echo "$LOCKGATE_SESSION $LOCKGATE_FENCING_TOKENS" > `+shq(ready)+`; while [ ! -e `+shq(stop)+` ]; do sleep 0.05; done`)
	env := strings.TrimSpace(waitFile(t, ready))
	if !strings.Contains(env, "sess/a=") || !strings.Contains(env, "sess/c=") || strings.HasPrefix(env, " ") {
		t.Fatalf("the command's LOCKGATE_SESSION and LOCKGATE_FENCING_TOKENS: %q", env)
	}
	start := time.Now()
	for time.Since(start) < 4*ttl {
		for _, l := range []string{"sess/a", "sess/b", "sess/c"} {
			lockctl(t, gw, nil, "status", l).want(t, exitOK)
		}
		time.Sleep(ttl / 10) // pace the probes; not synchronisation
	}
	touch(t, stop)
	select {
	case r := <-done:
		r.want(t, 0)
		if r.stderr != "" {
			t.Errorf("stderr %q, want nothing", r.stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not return within 20s of the command's end")
	}
	for _, l := range []string{"sess/a", "sess/b", "sess/c"} {
		lockctl(t, gw, nil, "status", l).want(t, exitFree)
	}
}

// TestSessionCommands: open, acquire --session, keep, show, end.
func TestSessionCommands(t *testing.T) {
	gw := startGateway(t)
	h := strings.TrimSpace(lockctl(t, gw, nil, "session", "open", "--ttl", "1m").want(t, exitOK).stdout)
	if !strings.Contains(h, ".") {
		t.Fatalf("session open printed %q, want ID.TOKEN", h)
	}
	env := map[string]string{"LOCKGATE_SESSION": h}
	lockctl(t, gw, nil, "acquire", "sess/x", "--session", h).want(t, exitOK)
	lockctl(t, gw, nil, "acquire", "sess/y", "--session", h, "--limit", "2").want(t, exitOK)
	var kept session
	if err := json.Unmarshal([]byte(lockctl(t, gw, env, "session", "keep", "--ttl", "2m", "--json").want(t, exitOK).stdout), &kept); err != nil {
		t.Fatal(err)
	}
	if len(kept.Renewed) != 2 || kept.TTLMs != 120000 {
		t.Fatalf("keep: got %+v, want 2 renewed, ttl 120000", kept)
	}
	if show := lockctl(t, gw, env, "session", "show").want(t, exitOK).stdout; !strings.Contains(show, "sess/x") || strings.Contains(show, "token") {
		t.Fatalf("show: got %q, want the holds and no token", show)
	}
	lockctl(t, gw, env, "session", "end").want(t, exitOK)
	lockctl(t, gw, nil, "status", "sess/x").want(t, exitFree)
	lockctl(t, gw, env, "session", "keep").want(t, exitNotHolder)
}
