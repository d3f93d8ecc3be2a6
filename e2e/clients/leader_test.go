package clients

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// leaderLineRE is a line of examples/python/leader.py.
var leaderLineRE = regexp.MustCompile(`(?m)^(leading|following|lost) (\S+) fencing_token=(\d+)$`)

// term is one line a replica printed: what it saw, whose value, which term.
type term struct {
	what, value string
	fence       int64
}

func termsOf(out string) []term {
	var ts []term
	for _, m := range leaderLineRE.FindAllStringSubmatch(out, -1) {
		f, _ := strconv.ParseInt(m[3], 10, 64)
		ts = append(ts, term{m[1], m[2], f})
	}
	return ts
}

// TestPythonLeaderElection: three replicas of examples/python/leader.py
// campaign for one lock; one leads, the others follow it. Killed (its
// renewals stop), the leader is followed by another within the lease; a
// leader that resigns hands over at once. Every replica's observations
// agree with each other and with the fencing order: terms only increase,
// and each term (fencing token) has one leader, the one that says it leads.
func TestPythonLeaderElection(t *testing.T) {
	t.Parallel()
	lookPaths(t, "python3")
	gw := startGateway(t)
	const ttl = 2 * time.Second
	replicas := map[string]*proc{}
	for _, me := range []string{"10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"} {
		cmd := exec.Command("python3", "-B", filepath.Join(examples, "python", "leader.py"))
		replicas[me] = start(t, gw, cmd, "LOCK=python/leader", "ME="+me, "TTL_MS="+strconv.FormatInt(ttl.Milliseconds(), 10))
	}
	// leaderAfter polls until a replica other than those in gone leads in a
	// term past fence, and returns it and its term.
	leaderAfter := func(fence int64, gone ...string) (string, int64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			for me, p := range replicas {
				if strings.Contains(strings.Join(gone, " "), me) {
					continue
				}
				for _, tm := range termsOf(p.stdout.String()) {
					if tm.what == "leading" && tm.fence > fence {
						return me, tm.fence
					}
				}
			}
			time.Sleep(5 * time.Millisecond) // poll interval, not synchronisation
		}
		t.Fatalf("no new leader after term %d within 30s", fence)
		return "", 0
	}
	first, f1 := leaderAfter(0)
	for me, p := range replicas {
		if me != first {
			p.waitOutput(t, "following "+first+" fencing_token="+strconv.FormatInt(f1, 10))
		}
	}

	// The leader dies: its renewals stop, and its lease, at most ttl, ends.
	killed := time.Now()
	syscall.Kill(-replicas[first].cmd.Process.Pid, syscall.SIGKILL)
	second, f2 := leaderAfter(f1, first)
	if took := time.Since(killed); took > ttl+time.Second {
		// The lease the dead leader last renewed ends within ttl; the
		// hand-off to the waiter at the head of the queue is immediate.
		t.Errorf("a new leader %s after the leader died, want within the lease (%s)", took, ttl)
	}

	// The new leader resigns: the last replica leads at once.
	syscall.Kill(replicas[second].cmd.Process.Pid, syscall.SIGTERM)
	if code := replicas[second].wait(t, 30*time.Second); code != 0 {
		t.Fatalf("the resigning leader exited %d\nstderr: %s", code, replicas[second].stderr)
	}
	third, f3 := leaderAfter(f2, first, second)
	syscall.Kill(replicas[third].cmd.Process.Pid, syscall.SIGTERM)
	if code := replicas[third].wait(t, 30*time.Second); code != 0 {
		t.Fatalf("the last leader exited %d\nstderr: %s", code, replicas[third].stderr)
	}
	if gw.held(t, "python/leader") {
		t.Fatal("the lock is still held after every live replica resigned")
	}

	// Every observation agrees: a term has one value, the leader's, and
	// each replica sees terms in increasing order.
	leaderOf := map[int64]string{f1: first, f2: second, f3: third}
	for me, p := range replicas {
		var last int64
		for _, tm := range termsOf(p.stdout.String()) {
			if tm.fence < last {
				t.Errorf("%s saw term %d after %d", me, tm.fence, last)
			}
			last = tm.fence
			if want, ok := leaderOf[tm.fence]; !ok || tm.value != want {
				t.Errorf("%s: %s %s in term %d, whose leader is %q", me, tm.what, tm.value, tm.fence, want)
			}
		}
		p.noSecrets(t)
	}
}

// TestPythonLeaderLeadsAFreshLockAtOnce: a replica of
// examples/python/leader.py alone on a lock never taken leads on its
// first look, not after a long-poll's wait (its TTL, two minutes here,
// longer than the test waits for the line).
func TestPythonLeaderLeadsAFreshLockAtOnce(t *testing.T) {
	t.Parallel()
	lookPaths(t, "python3")
	gw := startGateway(t)
	cmd := exec.Command("python3", "-B", filepath.Join(examples, "python", "leader.py"))
	p := start(t, gw, cmd, "LOCK=python/fresh", "ME=10.0.0.1:8080", "TTL_MS=120000")
	p.waitOutput(t, "leading 10.0.0.1:8080 fencing_token=")
	syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("the leader exited %d\nstderr: %s", code, p.stderr)
	}
	if gw.held(t, "python/fresh") {
		t.Fatal("the lock is still held after the leader resigned")
	}
}
