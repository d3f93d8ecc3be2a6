package clients

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// script returns an exec.Cmd for one of examples/curl, run with bash.
func script(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	lookPaths(t, "bash", "curl", "jq")
	path, err := filepath.Abs(filepath.Join(examples, "curl", name))
	if err != nil {
		t.Fatal(err)
	}
	return exec.Command("bash", append([]string{path}, args...)...)
}

// shq quotes s for sh.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestCurlAcquireOrExitAndInspect: the first acquire gets the lock and
// prints the grant; the second exits 1 and says so; inspect shows the
// holder, then, after a release, that the lock is free.
func TestCurlAcquireOrExitAndInspect(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)
	first := start(t, gw, script(t, "acquire-or-exit.sh", "curl/once", "60000"))
	if code := first.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("acquire-or-exit.sh: exit %d, want 0; stderr %s", code, first.stderr)
	}
	var g grant
	if err := json.Unmarshal([]byte(first.stdout.String()), &g); err != nil || g.Token == "" || g.Lock != "curl/once" || g.FencingToken <= 0 {
		t.Fatalf("acquire-or-exit.sh printed %q (%v), want the grant as JSON", first.stdout, err)
	}

	second := start(t, gw, script(t, "acquire-or-exit.sh", "curl/once"))
	if code := second.wait(t, 30*time.Second); code != 1 {
		t.Fatalf("acquire-or-exit.sh on a held lock: exit %d, want 1; stderr %s", code, second.stderr)
	}
	if !strings.Contains(second.stderr.String(), "held by someone else") || second.stdout.String() != "" {
		t.Fatalf("acquire-or-exit.sh on a held lock: stdout %q stderr %q, want only a message on stderr", second.stdout, second.stderr)
	}

	held := start(t, gw, script(t, "inspect.sh", "curl/once"))
	if code := held.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("inspect.sh: exit %d, want 0; stderr %s", code, held.stderr)
	}
	want := "curl/once is held by tester"
	if out := held.stdout.String(); !strings.Contains(out, want) || !strings.Contains(out, strconv.FormatInt(g.FencingToken, 10)) || strings.Contains(out, g.Token) {
		t.Fatalf("inspect.sh printed %q, want %q and the fencing token, never the owner token", out, want)
	}

	if status, body := gw.call(t, "DELETE", "curl/once", "", g.Token); status != http.StatusNoContent {
		t.Fatalf("release the recipe's grant: %d %s", status, body)
	}
	free := start(t, gw, script(t, "inspect.sh", "curl/once"))
	if code := free.wait(t, 30*time.Second); code != 1 || strings.TrimSpace(free.stdout.String()) != "curl/once is free" {
		t.Fatalf("inspect.sh on a free lock: exit %d, stdout %q; want 1 and \"curl/once is free\"", code, free.stdout)
	}
	for _, p := range []*proc{first, second, held, free} {
		p.noSecrets(t)
	}
}

// TestCurlRunWithLock: the recipe holds the lock over several TTLs by
// renewing it, hands the command its fencing token, exits with the
// command's code and releases.
func TestCurlRunWithLock(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)
	dir := t.TempDir()
	ready, stop := filepath.Join(dir, "ready"), filepath.Join(dir, "stop")
	// Each renewal starts a subshell, a sleep and a curl: up to seconds
	// on a machine busy with other work (it failed at 1.5 s under a load
	// of 20 on two cores, and at 4 s beside make test's other packages
	// there), so renewals every 3 s, each with 6 s to spare.
	const ttl = 9 * time.Second
	cmd := `echo "lock=$LOCKGATE_LOCK fence=$LOCKGATE_FENCING_TOKEN"; touch ` + shq(ready) +
		`; while [ ! -e ` + shq(stop) + ` ]; do sleep 0.05; done; exit 3`
	p := start(t, gw, script(t, "run-with-lock.sh", "curl/job", "sh", "-c", cmd),
		"TTL_MS="+strconv.Itoa(int(ttl.Milliseconds())))
	p.waitOutput(t, "lock=curl/job fence=")
	granted := time.Now() // the grant came before: its first lease ends before granted+ttl
	waitFile(t, ready)
	// Probes until one past the first lease's end: the lock outlives it
	// only by the recipe's renewals.
	for past := false; !past; {
		past = time.Since(granted) > ttl
		if status, _ := gw.acquire(t, "curl/job", time.Minute); status != http.StatusConflict {
			t.Fatalf("acquire while the recipe runs: got %d, want 409; recipe stderr: %s", status, p.stderr)
		}
		time.Sleep(ttl / 8) // pace the probes; not synchronisation
	}
	touch(t, stop)
	if code := p.wait(t, 30*time.Second); code != 3 {
		t.Fatalf("run-with-lock.sh: exit %d, want the command's 3; stderr %s", code, p.stderr)
	}
	if gw.held(t, "curl/job") {
		t.Fatal("the lock is still held after run-with-lock.sh exited")
	}
	if p.stderr.String() != "" {
		t.Errorf("stderr %q, want nothing", p.stderr)
	}
	p.noSecrets(t)
}

// TestCurlRunWithLockSignal: SIGTERM to the recipe reaches the command, and
// the trap releases the lock.
func TestCurlRunWithLockSignal(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "term")
	cmd := `trap 'echo term > ` + shq(marker) + `; exit 5' TERM; echo started; while :; do sleep 0.05; done`
	p := start(t, gw, script(t, "run-with-lock.sh", "curl/sig", "sh", "-c", cmd))
	p.waitOutput(t, "started")
	if !gw.held(t, "curl/sig") {
		t.Fatal("the lock is not held while the command runs")
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != 5 {
		t.Fatalf("run-with-lock.sh after SIGTERM: exit %d, want the command's 5; stderr %s", code, p.stderr)
	}
	if got := waitFile(t, marker); got != "term" {
		t.Fatalf("marker %q, want term", got)
	}
	if gw.held(t, "curl/sig") {
		t.Fatal("the lock is still held after run-with-lock.sh was stopped")
	}
}

// TestCurlRunWithLockLeaseLost: when a renewal answers 409, the recipe
// stops the command.
func TestCurlRunWithLockLeaseLost(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "term")
	cmd := `trap 'echo term > ` + shq(marker) + `; exit 7' TERM; echo started; while :; do sleep 0.05; done`
	p := start(t, gw, script(t, "run-with-lock.sh", "curl/lost", "sh", "-c", cmd), "TTL_MS=600")
	p.waitOutput(t, "started")
	// Redis forgets the lock, as a failover without persistence can.
	if err := gw.Redis.Client(t).FlushAll(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != 7 {
		t.Fatalf("run-with-lock.sh after losing the lease: exit %d, want the command's 7; stderr %s", code, p.stderr)
	}
	if got := waitFile(t, marker); got != "term" {
		t.Fatalf("marker %q, want term", got)
	}
	if !strings.Contains(p.stderr.String(), "lease on curl/lost lost") {
		t.Fatalf("stderr %q, want it to say the lease was lost", p.stderr)
	}
}

// waitFile polls until path holds a line, and returns it.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within 30s", filepath.Base(path))
		}
		time.Sleep(5 * time.Millisecond) // poll interval, not synchronisation
	}
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitForWaiters polls the gateway's metrics until n acquirers wait.
func waitForWaiters(t *testing.T, gw *gateway, n int) {
	t.Helper()
	want := "lockgate_active_waiters " + strconv.Itoa(n) + "\n"
	deadline := time.Now().Add(30 * time.Second)
	for {
		if strings.Contains(gw.metrics(), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %d waiters within 30s", n)
		}
		time.Sleep(10 * time.Millisecond) // poll interval, not synchronisation
	}
}

// TestCurlReadersAndMigrator: the "many readers, one migrator" recipe.
// Two MODE=shared runs run together; the exclusive run waits for them; a
// reader that comes after it waits behind it; and each runs in turn.
func TestCurlReadersAndMigrator(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)
	dir := t.TempDir()
	readersGo, migratorGo := filepath.Join(dir, "readers-go"), filepath.Join(dir, "migrator-go")
	started := func(who string) string { return filepath.Join(dir, "started-"+who) }
	job := func(who, goOn string) *exec.Cmd {
		cmd := `touch ` + shq(started(who)) + `; while [ ! -e ` + shq(goOn) + ` ]; do sleep 0.05; done`
		return script(t, "run-with-lock.sh", "curl/schema", "sh", "-c", cmd)
	}
	readers := []*proc{start(t, gw, job("r1", readersGo), "MODE=shared"), start(t, gw, job("r2", readersGo), "MODE=shared")}
	waitFile(t, started("r1"))
	waitFile(t, started("r2")) // both at once
	migrator := start(t, gw, job("m", migratorGo), "WAIT_MS=60000")
	waitForWaiters(t, gw, 1)
	late := start(t, gw, job("r3", readersGo), "MODE=shared", "WAIT_MS=60000")
	waitForWaiters(t, gw, 2) // behind the migrator, not beside the readers
	touch(t, readersGo)
	for i, r := range readers {
		if code := r.wait(t, 30*time.Second); code != 0 {
			t.Fatalf("reader %d: exit %d; stderr %s", i+1, code, r.stderr)
		}
	}
	waitFile(t, started("m"))
	if _, err := os.Stat(started("r3")); err == nil {
		t.Fatal("the late reader ran beside the migrator")
	}
	touch(t, migratorGo)
	if code := migrator.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("migrator: exit %d; stderr %s", code, migrator.stderr)
	}
	if code := late.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("late reader: exit %d; stderr %s", code, late.stderr)
	}
	if gw.held(t, "curl/schema") {
		t.Fatal("the lock is still held after every run")
	}
	for _, p := range []*proc{readers[0], readers[1], migrator, late} {
		p.noSecrets(t)
	}
}

// TestCurlTicket: a ticket taken by one run of the recipe, polled by later
// runs: still waiting while the lock is held, then the grant, whose owner
// token is the ticket token; a closed ticket is gone.
func TestCurlTicket(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)
	status, held := gw.acquire(t, "curl/ticket", time.Minute)
	if status != 201 {
		t.Fatalf("acquire: %d", status)
	}
	open := start(t, gw, script(t, "ticket.sh", "open", "curl/ticket", "60000"))
	if code := open.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("ticket.sh open: exit %d; stderr %s", code, open.stderr)
	}
	var tk struct {
		Location    string `json:"location"`
		TicketToken string `json:"ticket_token"`
		Rank        int    `json:"rank"`
	}
	if err := json.Unmarshal([]byte(open.stdout.String()), &tk); err != nil || tk.TicketToken == "" || !strings.HasPrefix(tk.Location, "/locks/curl/ticket/tickets/") {
		t.Fatalf("ticket.sh open printed %q (%v), want a ticket with its location", open.stdout, err)
	}
	waiting := start(t, gw, script(t, "ticket.sh", "poll", tk.Location), "TICKET_TOKEN="+tk.TicketToken, "WAIT_S=1")
	if code := waiting.wait(t, 30*time.Second); code != 3 || !strings.Contains(waiting.stdout.String(), `"rank":0`) {
		t.Fatalf("ticket.sh poll of a held lock: exit %d, stdout %q, stderr %q; want 3 and rank 0", code, waiting.stdout, waiting.stderr)
	}
	if status, body := gw.call(t, "DELETE", "curl/ticket", "", held.Token); status != http.StatusNoContent {
		t.Fatalf("release: %d %s", status, body)
	}
	got := start(t, gw, script(t, "ticket.sh", "poll", tk.Location), "TICKET_TOKEN="+tk.TicketToken)
	if code := got.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("ticket.sh poll after the release: exit %d; stdout %q stderr %q", code, got.stdout, got.stderr)
	}
	var g grant
	if err := json.Unmarshal([]byte(got.stdout.String()), &g); err != nil || g.Token != tk.TicketToken || g.FencingToken <= held.FencingToken {
		t.Fatalf("ticket.sh poll printed %q (%v), want the grant with the ticket token", got.stdout, err)
	}
	closed := start(t, gw, script(t, "ticket.sh", "close", tk.Location), "TICKET_TOKEN="+tk.TicketToken)
	if code := closed.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("ticket.sh close: exit %d; stderr %s", code, closed.stderr)
	}
	if gw.held(t, "curl/ticket") {
		t.Fatal("the lock is held after closing the ticket that held it")
	}
	gone := start(t, gw, script(t, "ticket.sh", "poll", tk.Location), "TICKET_TOKEN="+tk.TicketToken)
	if code := gone.wait(t, 30*time.Second); code != 1 {
		t.Fatalf("ticket.sh poll of a closed ticket: exit %d, want 1; stderr %s", code, gone.stderr)
	}
	for _, p := range []*proc{open, waiting, got, closed, gone} {
		p.noSecrets(t)
	}
}
