package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/redistest"
)

// TestSemaphoreCommands: acquire --limit, status, renew and release
// --semaphore, with the exit codes of locks.
func TestSemaphoreCommands(t *testing.T) {
	gw := startGateway(t)
	lockctl(t, gw, nil, "status", "sem/x", "--semaphore").want(t, exitFree)

	var g grant
	r := lockctl(t, gw, nil, "acquire", "sem/x", "--limit", "2", "--ttl", "1m", "--owner", "a", "--json").want(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &g); err != nil || g.Semaphore != "sem/x" || g.Limit != 2 || g.Lock != "" || g.Token == "" {
		t.Fatalf("acquire --limit --json: got %q (%v), want a permit of sem/x with limit 2", r.stdout, err)
	}
	tok2 := strings.TrimSpace(lockctl(t, gw, nil, "acquire", "sem/x", "--limit", "2", "--owner", "b").want(t, exitOK).stdout)

	// Neither a lock nor a permit of another name: the lock sem/x is free.
	lockctl(t, gw, nil, "status", "sem/x").want(t, exitFree)
	st := lockctl(t, gw, nil, "status", "sem/x", "--semaphore").want(t, exitOK)
	if !strings.Contains(st.stdout, "2 of 2 permits held") || !strings.Contains(st.stdout, `"a"`) || !strings.Contains(st.stdout, `"b"`) {
		t.Fatalf("status --semaphore: got %q, want both holders", st.stdout)
	}
	var info semaphoreInfo
	if err := json.Unmarshal([]byte(lockctl(t, gw, nil, "status", "sem/x", "--semaphore", "--json").want(t, exitOK).stdout), &info); err != nil {
		t.Fatal(err)
	}
	if info.Limit != 2 || len(info.Holders) != 2 {
		t.Fatalf("status --semaphore --json: got %+v", info)
	}

	full := lockctl(t, gw, nil, "acquire", "sem/x", "--limit", "2").want(t, exitHeld)
	if !strings.Contains(full.stderr, "semaphore_full") {
		t.Fatalf("acquire of a full semaphore: stderr %q, want it to say semaphore_full", full.stderr)
	}
	mismatch := lockctl(t, gw, nil, "acquire", "sem/x", "--limit", "3").want(t, exitUsage)
	if !strings.Contains(mismatch.stderr, "limit_mismatch") || !strings.Contains(mismatch.stderr, "limit 2") {
		t.Fatalf("acquire with another limit: stderr %q, want limit_mismatch and the limit in force", mismatch.stderr)
	}
	lockctl(t, gw, nil, "acquire", "sem/x", "--limit", "10001").want(t, exitUsage)

	var ls lease
	if err := json.Unmarshal([]byte(lockctl(t, gw, nil, "renew", "sem/x", "--semaphore", "--token", g.Token, "--ttl", "2m", "--json").want(t, exitOK).stdout), &ls); err != nil {
		t.Fatal(err)
	}
	if ls.Semaphore != "sem/x" || ls.TTLMs != 120000 || ls.FencingToken != g.FencingToken {
		t.Fatalf("renew --semaphore: got %+v, want ttl 120000 and fencing token %d", ls, g.FencingToken)
	}
	// A permit's token does nothing to the lock of the same name.
	lockctl(t, gw, nil, "release", "sem/x", "--token", g.Token).want(t, exitNotHolder)
	lockctl(t, gw, nil, "release", "sem/x", "--semaphore", "--token", g.Token).want(t, exitOK)
	lockctl(t, gw, nil, "release", "sem/x", "--semaphore", "--token", g.Token).want(t, exitOK) // idempotent
	lockctl(t, gw, nil, "renew", "sem/x", "--semaphore", "--token", g.Token).want(t, exitNotHolder)
	lockctl(t, gw, nil, "release", "sem/x", "--semaphore", "--token", tok2).want(t, exitOK)
	lockctl(t, gw, nil, "status", "sem/x", "--semaphore").want(t, exitFree)
}

// TestRunLimit: run --limit N runs at most N commands at once; the others
// wait their turn, and each command sees LOCKGATE_SEMAPHORE, not
// LOCKGATE_LOCK.
func TestRunLimit(t *testing.T) {
	rs := redistest.Start(t)
	gw := startGateway(t, "--redis-url", rs.URL())
	dir := t.TempDir()
	release := filepath.Join(dir, "go")
	const limit, jobs = 2, 4
	done := make([]<-chan result, jobs)
	for i := range jobs {
		started := filepath.Join(dir, "started-"+strconv.Itoa(i))
		script := `test "$LOCKGATE_SEMAPHORE" = jobs/pool && test -z "$LOCKGATE_LOCK" && test "$LOCKGATE_FENCING_TOKEN" -gt 0 || exit 99; ` +
			`echo "$LOCKGATE_FENCING_TOKEN" > ` + shq(started) + `; while [ ! -e ` + shq(release) + ` ]; do sleep 0.02; done`
		done[i] = lockctlAsync(t, gw, nil, "run", "jobs/pool", "--limit", strconv.Itoa(limit), "--ttl", "3s", "--", "sh", "-c", script)
	}
	// Two run; the other two wait for a permit. The gateway's waiter gauge
	// counts an acquire before its script has queued it, so the semaphore's
	// own status is what to wait for.
	info := waitForSemaphoreWaiters(t, gw, "jobs/pool", jobs-limit)
	running := 0
	for i := range jobs {
		if _, err := os.Stat(filepath.Join(dir, "started-"+strconv.Itoa(i))); err == nil {
			running++
		}
	}
	if running > limit {
		t.Fatalf("%d commands started with --limit %d", running, limit)
	}
	if len(info.Holders) != limit {
		t.Fatalf("status: got %d holders beside %d waiters, want %d", len(info.Holders), info.Waiters, limit)
	}
	touch(t, release)
	for i, ch := range done {
		select {
		case r := <-ch:
			r.want(t, 0)
		case <-time.After(30 * time.Second):
			t.Fatalf("run %d did not return within 30s", i)
		}
	}
	lockctl(t, gw, nil, "status", "jobs/pool", "--semaphore").want(t, exitFree)

	// --no-wait on a full semaphore is 80, and the command never starts.
	holder := strings.TrimSpace(lockctl(t, gw, nil, "acquire", "jobs/pool", "--limit", "1", "--ttl", "1m").want(t, exitOK).stdout)
	marker := filepath.Join(dir, "ran")
	lockctl(t, gw, nil, "run", "jobs/pool", "--limit", "1", "--no-wait", "--", "touch", marker).want(t, exitHeld)
	lockctl(t, gw, nil, "run", "jobs/pool", "--limit", "5", "--", "touch", marker).want(t, exitUsage)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran without a permit")
	}
	lockctl(t, gw, nil, "release", "jobs/pool", "--semaphore", "--token", holder).want(t, exitOK)
}

// TestRunLimitInsideLockRun: inside a run of the lock a/b, a run --limit
// of the semaphore a/b takes a permit: it neither re-enters the lock nor
// hands the command the lock's token.
func TestRunLimitInsideLockRun(t *testing.T) {
	gw := startGateway(t)
	tok := strings.TrimSpace(lockctl(t, gw, nil, "acquire", "nest/x", "--ttl", "1m").want(t, exitOK).stdout)
	outer := map[string]string{"LOCKGATE_LOCK": "nest/x", "LOCKGATE_LOCK_TOKEN": tok, "LOCKGATE_FENCING_TOKEN": "1"}
	script := `test "$LOCKGATE_SEMAPHORE" = nest/x && test "$LOCKGATE_FENCING_TOKEN" != 1 || exit 99`
	lockctl(t, gw, outer, "run", "nest/x", "--limit", "2", "--", "sh", "-c", script).want(t, 0)
	lockctl(t, gw, nil, "status", "nest/x", "--semaphore").want(t, exitFree)
	lockctl(t, gw, nil, "release", "nest/x", "--token", tok).want(t, exitOK)
}

// waitForSemaphoreWaiters polls lockctl status until the semaphore has n
// queued waiters, and returns that status.
func waitForSemaphoreWaiters(t *testing.T, gw *gateway, sem string, n int) semaphoreInfo {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var info semaphoreInfo
		json.Unmarshal([]byte(lockctl(t, gw, nil, "status", sem, "--semaphore", "--json").stdout), &info)
		if info.Waiters == n {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d waiters after 20s, want %d", sem, info.Waiters, n)
		}
		time.Sleep(5 * time.Millisecond) // poll interval, not synchronisation
	}
}
