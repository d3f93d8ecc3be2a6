package clients

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPythonWatch: the Python client's poll answers a lock's index at once
// when it has moved on, and its watch, resumed after index 0, yields every
// event since, in order.
func TestPythonWatch(t *testing.T) {
	t.Parallel()
	lookPaths(t, "python3")
	gw := startGateway(t)
	_, g := gw.acquire(t, "python/watched", time.Minute)
	if status, _ := gw.call(t, "DELETE", "python/watched", "", g.Token); status != 204 {
		t.Fatalf("release: %d", status)
	}
	script := `
import os, sys
sys.path.insert(0, sys.argv[1])
from lockgate_example import Client
c = Client(os.environ["LOCKGATE_URL"], os.environ["LOCKGATE_TOKEN"])
print("poll", *c.poll("python/watched", 0, 30000))
for n, (kind, eid, data) in enumerate(c.watch("python/watched", last_event_id=0)):
    print("event", eid, kind, data["index"])
    if n == 1:
        break
`
	p := start(t, gw, exec.Command("python3", "-B", "-c", script, filepath.Join(examples, "python")))
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("python watch: exit %d\nstdout: %s\nstderr: %s", code, p.stdout, p.stderr)
	}
	// The history's first event is numbered from the clock (see
	// locks.Watcher): the poll answers the second's index.
	var index int64
	if _, err := fmt.Sscanf(p.stdout.String(), "poll %d None\n", &index); err != nil {
		t.Fatalf("stdout %q: no poll line: %v", p.stdout, err)
	}
	if got, want := p.stdout.String(), fmt.Sprintf("poll %d None\nevent %d acquired %d\nevent %d released %d\n", index, index-1, index-1, index, index); got != want {
		t.Fatalf("stdout %q, want %q", got, want)
	}
	if strings.Contains(p.stdout.String(), g.Token) {
		t.Fatal("the watch printed a token")
	}
}
