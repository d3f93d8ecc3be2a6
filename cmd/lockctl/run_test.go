package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/gatewaytest"
	"github.com/lockgate/lockgate/internal/redistest"
)

// TestRunExitCode: run exits with the command's code, 128+N when signal N
// killed it, and releases the lock whatever the outcome.
func TestRunExitCode(t *testing.T) {
	gw := startGateway(t)
	for _, tc := range []struct {
		name   string
		script string
		want   int
	}{
		{name: "success", script: "exit 0", want: 0},
		{name: "failure", script: "exit 3", want: 3},
		// lockctl's own codes come with a line on stderr; the command's not.
		{name: "exit 84", script: "exit 84", want: 84},
		{name: "killed", script: "kill -KILL $$", want: 128 + int(syscall.SIGKILL)},
		{name: "terminated", script: "kill -TERM $$", want: 128 + int(syscall.SIGTERM)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lock := "run/" + strings.ReplaceAll(tc.name, " ", "-")
			// The command sees its lock; it fails with 99 if not.
			script := `test "$LOCKGATE_LOCK" = ` + lock + ` && test "$LOCKGATE_FENCING_TOKEN" -gt 0 || exit 99; ` + tc.script
			r := lockctl(t, gw, nil, "run", lock, "--", "sh", "-c", script).want(t, tc.want)
			if r.stderr != "" {
				t.Errorf("stderr %q, want nothing from lockctl for the command's own code", r.stderr)
			}
			lockctl(t, gw, nil, "status", lock).want(t, exitFree)
		})
	}
	t.Run("not found", func(t *testing.T) {
		t.Parallel()
		r := lockctl(t, gw, nil, "run", "run/missing", "--", "no-such-command-lockctl-test").want(t, exitNotFound)
		if !strings.Contains(r.stderr, "no-such-command-lockctl-test") {
			t.Errorf("stderr %q, want it to name the command", r.stderr)
		}
		lockctl(t, gw, nil, "status", "run/missing").want(t, exitFree)
	})
	t.Run("not executable", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "script")
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		lockctl(t, gw, nil, "run", "run/noexec", "--", path).want(t, exitCannotExec)
		lockctl(t, gw, nil, "status", "run/noexec").want(t, exitFree)
	})
}

// TestRunNoWait: --no-wait on a held lock fails at once with 80 and never
// starts the command; without it, run waits server-side for the lock.
func TestRunNoWait(t *testing.T) {
	gw := startGateway(t)
	lockctl(t, gw, nil, "acquire", "run/busy", "--ttl", "1m").want(t, exitOK)
	marker := filepath.Join(t.TempDir(), "ran")
	start := time.Now()
	r := lockctl(t, gw, nil, "run", "run/busy", "--no-wait", "--", "touch", marker).want(t, exitHeld)
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("--no-wait took %s", d)
	}
	if !strings.Contains(r.stderr, "lock_held") {
		t.Errorf("stderr %q, want it to say lock_held", r.stderr)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the command ran although the lock was held (stat: %v)", err)
	}
}

// TestRunWaitsForLock: a held lock whose lease runs out is run's after a
// server-side wait.
func TestRunWaitsForLock(t *testing.T) {
	gw := startGateway(t)
	lockctl(t, gw, nil, "acquire", "run/later", "--ttl", "300ms").want(t, exitOK)
	lockctl(t, gw, nil, "run", "run/later", "--wait", "20s", "--", "true").want(t, 0)
}

// TestRunRenews: with a 500ms TTL, a command that runs for well over four
// TTLs keeps the lock the whole time (another client gets 409, and the
// fencing token never changes), and run exits 0 and releases.
func TestRunRenews(t *testing.T) {
	rs := redistest.Start(t)
	gw := startGateway(t, "--redis-url", rs.URL())
	dir := t.TempDir()
	ready, stop := filepath.Join(dir, "ready"), filepath.Join(dir, "stop")
	// A lease that a renewal every third of it keeps on a machine busy
	// with other work: at 500 ms it was lost under a load of 20.
	const ttl = 3 * time.Second
	done := lockctlAsync(t, gw, nil, "run", "renew/x", "--ttl", ttl.String(), "--",
		"sh", "-c", `echo "$LOCKGATE_FENCING_TOKEN" > `+shq(ready)+`; while [ ! -e `+shq(stop)+` ]; do sleep 0.05; done`)
	fence := waitFile(t, ready)
	start := time.Now()
	attempts := 0
	// Probes over two leases, so that the lock outlives its first only by
	// run's renewals.
	for range 8 {
		lockctl(t, gw, nil, "acquire", "renew/x", "--no-wait").want(t, exitHeld)
		var info lockInfo
		json.Unmarshal([]byte(lockctl(t, gw, nil, "status", "renew/x", "--json").want(t, exitOK).stdout), &info)
		if strconv.FormatInt(info.FencingToken, 10) != fence {
			t.Fatalf("fencing token %d while the command runs with %s: the lock changed hands", info.FencingToken, fence)
		}
		attempts++
		time.Sleep(ttl / 4) // pace the probes; not synchronisation
	}
	touch(t, stop)
	select {
	case r := <-done:
		r.want(t, 0)
		if r.stderr != "" {
			t.Errorf("stderr %q, want nothing: no renewal should have failed", r.stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not return within 20s of the command's end")
	}
	lockctl(t, gw, nil, "status", "renew/x").want(t, exitFree)
	t.Logf("%d probes over %s, all 409", attempts, time.Since(start).Round(time.Millisecond))
}

// TestRunLeaseLost: once the lease is gone, run stops the command and
// exits 84, whether the gateway says so or stops answering.
func TestRunLeaseLost(t *testing.T) {
	// The command traps SIGTERM, writes a marker and exits 0, so that 84
	// can only come from run.
	trapping := func(dir string) string {
		return `trap 'echo term > ` + shq(filepath.Join(dir, "term")) + `; exit 0' TERM; echo $$ > ` + shq(filepath.Join(dir, "ready")) +
			`; while :; do sleep 0.05; done`
	}
	t.Run("not holder", func(t *testing.T) {
		// Redis forgets the lock (as a failover without persistence can):
		// the next renewal answers not_holder.
		t.Parallel()
		rs := redistest.Start(t)
		gw := startGateway(t, "--redis-url", rs.URL())
		dir := t.TempDir()
		done := lockctlAsync(t, gw, nil, "run", "lost/x", "--ttl", "1s", "--", "sh", "-c", trapping(dir))
		waitFile(t, filepath.Join(dir, "ready"))
		if err := rs.Client(t).FlushAll(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		r := waitRun(t, done).want(t, exitLeaseLost)
		if got := waitFile(t, filepath.Join(dir, "term")); got != "term" {
			t.Fatalf("marker: got %q, want term", got)
		}
		if !strings.Contains(r.stderr, "no longer holds") {
			t.Errorf("stderr %q, want it to say the lock is no longer held", r.stderr)
		}
	})
	t.Run("gateway gone", func(t *testing.T) {
		// Renewals fail until the lease may have ended.
		t.Parallel()
		gw := startGateway(t)
		dir := t.TempDir()
		done := lockctlAsync(t, gw, nil, "run", "lost/y", "--ttl", "300ms", "--", "sh", "-c", trapping(dir))
		waitFile(t, filepath.Join(dir, "ready"))
		gw.stop(t)
		r := waitRun(t, done).want(t, exitLeaseLost)
		if got := waitFile(t, filepath.Join(dir, "term")); got != "term" {
			t.Fatalf("marker: got %q, want term", got)
		}
		if !strings.Contains(r.stderr, "may have ended") {
			t.Errorf("stderr %q, want it to say renewals failed", r.stderr)
		}
	})
	t.Run("command ignores SIGTERM", func(t *testing.T) {
		// SIGKILL after --kill-after, to the whole process group: the
		// shell's own children die too. The shell and its children ignore
		// SIGTERM (trap '', inherited), so only SIGKILL can end them: a
		// trap that noted the SIGTERM raced the SIGKILL on a busy machine.
		t.Parallel()
		rs := redistest.Start(t)
		gw := startGateway(t, "--redis-url", rs.URL())
		dir := t.TempDir()
		script := `trap '' TERM; echo $$ > ` + shq(filepath.Join(dir, "ready")) +
			`; sleep 60 & while :; do sleep 0.05; done`
		done := lockctlAsync(t, gw, nil, "run", "lost/z", "--ttl", "1s", "--kill-after", "200ms", "--", "sh", "-c", script)
		pgid, err := strconv.Atoi(waitFile(t, filepath.Join(dir, "ready")))
		if err != nil {
			t.Fatal(err)
		}
		if err := rs.Client(t).FlushAll(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		waitRun(t, done).want(t, exitLeaseLost)
		// Nothing of the group survives, the background sleep included.
		deadline := time.Now().Add(20 * time.Second)
		for syscall.Kill(-pgid, 0) == nil {
			if time.Now().After(deadline) {
				t.Fatal("the command's process group still exists 20s after run returned")
			}
			time.Sleep(5 * time.Millisecond) // poll interval
		}
	})
}

// waitRun waits for an asynchronous lockctl.
func waitRun(t *testing.T, done <-chan result) result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return within 30s")
		return result{}
	}
}

// TestRunForwardsSignals: SIGTERM or SIGINT to the lockctl process reaches
// the command, which decides what to do; run then exits with its code and
// releases the lock.
func TestRunForwardsSignals(t *testing.T) {
	bin := lockctlBinary(t)
	gw := startGateway(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		name := strings.ToLower(strings.TrimPrefix(unixSignalName(sig), "SIG"))
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			marker, ready := filepath.Join(dir, "marker"), filepath.Join(dir, "ready")
			lock := "sig/" + name
			script := `trap 'echo got-` + name + ` > ` + shq(marker) + `; exit 42' ` + unixSignalName(sig)[3:] +
				`; echo $$ > ` + shq(ready) + `; while :; do sleep 0.05; done`
			cmd := exec.Command(bin, "run", lock, "--", "sh", "-c", script)
			cmd.Env = append(os.Environ(), "LOCKGATE_URL="+gw.URL, "LOCKGATE_TOKEN="+jwtFor(t, secret))
			var stderr gatewaytest.Buffer
			cmd.Stderr = &stderr
			exited := startProcess(t, cmd)
			t.Cleanup(func() { killGroup(ready) })
			waitFile(t, ready)
			lockctl(t, gw, nil, "status", lock).want(t, exitOK)
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
			case <-time.After(20 * time.Second):
				t.Fatal("lockctl did not exit within 20s of the signal")
			}
			if got := cmd.ProcessState.ExitCode(); got != 42 {
				t.Fatalf("exit code: got %d, want the command's 42; stderr %s", got, stderr.String())
			}
			if got := waitFile(t, marker); got != "got-"+name {
				t.Fatalf("marker: got %q, want got-%s", got, name)
			}
			lockctl(t, gw, nil, "status", lock).want(t, exitFree)
		})
	}
}

// TestRunSignalWhileWaiting: a Ctrl-C while run waits for the lock ends it
// as a shell would (130), and leaves no grant behind.
func TestRunSignalWhileWaiting(t *testing.T) {
	bin := lockctlBinary(t)
	gw := startGateway(t)
	tok := strings.TrimSpace(lockctl(t, gw, nil, "acquire", "sig/wait", "--ttl", "1m").want(t, exitOK).stdout)
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := exec.Command(bin, "run", "sig/wait", "--wait", "1m", "--", "touch", marker)
	cmd.Env = append(os.Environ(), "LOCKGATE_URL="+gw.URL, "LOCKGATE_TOKEN="+jwtFor(t, secret))
	exited := startProcess(t, cmd)
	waitForWaiters(t, gw, 1)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		t.Fatal("lockctl did not exit within 20s of SIGINT")
	}
	if got := cmd.ProcessState.ExitCode(); got != 128+int(syscall.SIGINT) {
		t.Fatalf("exit code: got %d, want 130", got)
	}
	waitForWaiters(t, gw, 0)
	lockctl(t, gw, nil, "release", "sig/wait", "--token", tok).want(t, exitOK)
	lockctl(t, gw, nil, "status", "sig/wait").want(t, exitFree)
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the command ran (stat: %v)", err)
	}
}

// startProcess starts cmd and kills it by PID when the test ends, if it
// has not exited by then. The channel is closed once it has.
func startProcess(t *testing.T, cmd *exec.Cmd) <-chan struct{} {
	t.Helper()
	cmd.WaitDelay = time.Second // a leftover child must not hold Wait on our pipes
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill() // harmless once it has exited
		<-exited
	})
	return exited
}

// killGroup kills the process group whose leader wrote its PID to the file
// ready: the command of a failed test.
func killGroup(ready string) {
	b, err := os.ReadFile(ready)
	if err != nil {
		return
	}
	if pgid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pgid > 1 {
		syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

func unixSignalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return sig.String()
}

// TestRunReentersItsOwnLock: a run gives its command the lock's name and
// owner token; a run of the same lock inside it (those variables set)
// re-enters the outer hold instead of waiting for it, runs its command,
// and gives only its own hold back: the outer hold stays.
func TestRunReentersItsOwnLock(t *testing.T) {
	gw := startGateway(t)
	const lock = "run/nested"
	lockctl(t, gw, nil, "run", lock, "--", "sh", "-c", `test -n "$LOCKGATE_LOCK_TOKEN" || exit 99`).want(t, 0)

	outer := strings.TrimSpace(lockctl(t, gw, nil, "acquire", lock, "--ttl", "1m").want(t, 0).stdout)
	inside := map[string]string{"LOCKGATE_LOCK": lock, "LOCKGATE_LOCK_TOKEN": outer}
	start := time.Now()
	lockctl(t, gw, inside, "run", lock, "--wait", "20s", "--", "sh", "-c", "exit 7").want(t, 7)
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the nested run took %v: it waited for its own lock", d)
	}
	lockctl(t, gw, nil, "status", lock).want(t, 0) // the outer hold stays
	lockctl(t, gw, nil, "release", lock, "--token", outer).want(t, 0)
	lockctl(t, gw, nil, "status", lock).want(t, exitFree)

	// Another lock's variables change nothing: a plain acquire, released after.
	other := map[string]string{"LOCKGATE_LOCK": "run/other", "LOCKGATE_LOCK_TOKEN": outer}
	lockctl(t, gw, other, "run", lock, "--", "true").want(t, 0)
	lockctl(t, gw, nil, "status", lock).want(t, exitFree)
}

// TestRunShared: --shared runs run side by side and keep an exclusive run
// out; status lists them; inside a --shared run, a nested --shared run
// re-enters and a nested exclusive one is refused (80) without running.
func TestRunShared(t *testing.T) {
	gw := startGateway(t)
	dir := t.TempDir()
	release := filepath.Join(dir, "go")
	const readers = 2
	done := make([]<-chan result, readers)
	for i := range readers {
		started := filepath.Join(dir, "started-"+strconv.Itoa(i))
		script := `touch ` + shq(started) + `; while [ ! -e ` + shq(release) + ` ]; do sleep 0.02; done`
		done[i] = lockctlAsync(t, gw, nil, "run", "cfg/db", "--shared", "--ttl", "10s", "--", "sh", "-c", script)
	}
	for i := range readers { // both run at once: neither waits for the other
		waitForFile(t, filepath.Join(dir, "started-"+strconv.Itoa(i)))
	}
	marker := filepath.Join(dir, "wrote")
	lockctl(t, gw, nil, "run", "cfg/db", "--no-wait", "--", "touch", marker).want(t, exitHeld)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("an exclusive run ran beside shared ones")
	}
	var info lockInfo
	json.Unmarshal([]byte(lockctl(t, gw, nil, "status", "cfg/db", "--json").want(t, 0).stdout), &info)
	if info.Mode != "shared" || len(info.Holders) != readers {
		t.Fatalf("status: got %+v, want %d shared holders", info, readers)
	}
	if out := lockctl(t, gw, nil, "status", "cfg/db").want(t, 0).stdout; !strings.Contains(out, "held shared by 2 holders") {
		t.Fatalf("status: got %q", out)
	}
	touch(t, release)
	for i, ch := range done {
		select {
		case r := <-ch:
			r.want(t, 0)
		case <-time.After(30 * time.Second):
			t.Fatalf("shared run %d did not return within 30s", i)
		}
	}
	lockctl(t, gw, nil, "run", "cfg/db", "--no-wait", "--", "touch", marker).want(t, 0)

	outer := strings.TrimSpace(lockctl(t, gw, nil, "acquire", "cfg/db", "--shared", "--ttl", "1m").want(t, 0).stdout)
	inside := map[string]string{"LOCKGATE_LOCK": "cfg/db", "LOCKGATE_LOCK_TOKEN": outer}
	lockctl(t, gw, inside, "run", "cfg/db", "--shared", "--", "sh", "-c", "exit 7").want(t, 7)
	lockctl(t, gw, inside, "run", "cfg/db", "--", "touch", marker+"2").want(t, exitHeld)
	if _, err := os.Stat(marker + "2"); err == nil {
		t.Fatal("a nested exclusive run ran inside a shared one")
	}
	lockctl(t, gw, nil, "release", "cfg/db", "--token", outer).want(t, 0)
	lockctl(t, gw, nil, "status", "cfg/db").want(t, exitFree)
}

// waitForFile polls until path exists: the way to know that a command
// started by a run has begun.
func waitForFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within 20s", path)
		}
		time.Sleep(10 * time.Millisecond) // polling for a child process
	}
}
