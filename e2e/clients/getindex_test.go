package clients

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPythonInspectIndex: the Python client's inspect_index answers the
// lock's index with its holders, and a poll from it waits while nothing
// changes, and answers with the next change, another caller's release
// (#39).
func TestPythonInspectIndex(t *testing.T) {
	t.Parallel()
	lookPaths(t, "python3")
	gw := startGateway(t)
	_, g := gw.acquire(t, "python/indexed", time.Minute)
	script := `
import os, sys, threading
sys.path.insert(0, sys.argv[1])
from lockgate_example import Client
c = Client(os.environ["LOCKGATE_URL"], os.environ["LOCKGATE_TOKEN"])
index, holders = c.inspect_index("python/indexed")
print("inspect", index, holders["fencing_token"])
print("unchanged", *c.poll("python/indexed", index, 200)[:1])
got = []
poller = threading.Thread(target=lambda: got.append(c.poll("python/indexed", index, 30000)))
poller.start()
c.call("DELETE", "python/indexed", lock_token=os.environ["HOLDER_TOKEN"])
poller.join()
print("changed", *got[0])
print("free", *c.inspect_index("python/indexed"))
`
	p := start(t, gw, exec.Command("python3", "-B", "-c", script, filepath.Join(examples, "python")), "HOLDER_TOKEN="+g.Token)
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("python inspect_index: exit %d\nstdout: %s\nstderr: %s", code, p.stdout, p.stderr)
	}
	var index, fence int64
	if _, err := fmt.Sscanf(p.stdout.String(), "inspect %d %d\n", &index, &fence); err != nil || fence != g.FencingToken {
		t.Fatalf("stdout %q: want an inspect line with an index and fencing token %d (%v)", p.stdout, g.FencingToken, err)
	}
	want := fmt.Sprintf("inspect %d %d\nunchanged %d\nchanged %d None\nfree %d None\n", index, fence, index, index+1, index+1)
	if got := p.stdout.String(); got != want {
		t.Fatalf("stdout %q, want %q", got, want)
	}
	if strings.Contains(p.stdout.String()+p.stderr.String(), g.Token) {
		t.Fatal("the script printed a token")
	}
}
