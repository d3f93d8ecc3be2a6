package clients

import (
	"bufio"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/internal/gatewaytest"
)

// TestNodeClientNames: every operation that names a lock or a semaphore,
// sent by the client generated from openapi.yaml, which percent-encodes
// path parameters (a:b goes as a%3Ab), on both backends. A name the
// grammar allows (letters, digits, '_', '.', ':', '-') works in every
// operation; a name with '%' or a non-ASCII letter, which the grammar
// refuses, gets a 400 invalid_request that names the parameter, in every
// operation, and not a 5xx or a lock under another name.
func TestNodeClientNames(t *testing.T) {
	startNodeBuild()
	t.Parallel()
	code, err := os.ReadFile("testdata/names.mjs")
	if err != nil {
		t.Fatal(err)
	}
	nodeSnippet(t, "") // skips early without node or npm
	const ns = "names"
	good := []string{"job:1", "a:b:c.d_e-F"}
	bad := []string{"50%", "50%25", "café", "żółw:1"}

	for name, startGW := range map[string]func(t *testing.T) *gateway{
		"redis": startGateway,
		"memory": func(t *testing.T) *gateway {
			g := gatewaytest.Start(t, map[string]string{"LOCKGATE_JWT_SECRET": secret}, "--log-level", "warn")
			return &gateway{URL: g.URL}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			gw := startGW(t)
			got := runNames(t, gw, string(code), ns, append(append([]string{}, good...), bad...))
			for _, n := range good {
				for i, r := range got[n] {
					want := wantGood[i]
					if r.Op != want.op || r.Status != want.status || (want.names && r.Lock != ns+"/"+n) {
						t.Errorf("%s %q: got %d %s %s (lock %q), want %d and lock %s/%s",
							r.Op, n, r.Status, r.Code, r.Detail, r.Lock, want.status, ns, n)
					}
				}
			}
			for _, n := range bad {
				wantRefused(t, got[n], "name")
			}
			// The same for a namespace: "dé%" goes as d%C3%A9%25.
			for _, rs := range runNames(t, gw, string(code), "dé%", good[:1]) {
				wantRefused(t, rs, "namespace")
			}
		})
	}
}

// nameResult is one line that testdata/names.mjs printed.
type nameResult struct {
	Op, Name, Code, Detail, Lock string
	Status                       int
}

// runNames runs testdata/names.mjs (code) on gw for names in ns, as an
// administrator of every namespace, and returns its calls by name, each
// name's in order, after checking that there are as many as wantGood.
func runNames(t *testing.T, gw *gateway, code, ns string, names []string) map[string][]nameResult {
	t.Helper()
	list, _ := json.Marshal(names)
	p := start(t, gw, nodeSnippet(t, code), "NS="+ns, "NAMES="+string(list), "LOCKGATE_TOKEN="+adminJWT(t))
	if code := p.wait(t, 120*time.Second); code != 0 {
		t.Fatalf("node: exit %d\nstdout: %s\nstderr: %s", code, p.stdout, p.stderr)
	}
	got := map[string][]nameResult{}
	sc := bufio.NewScanner(strings.NewReader(p.stdout.String()))
	for sc.Scan() {
		var r nameResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("node printed %q: %v", sc.Text(), err)
		}
		got[r.Name] = append(got[r.Name], r)
	}
	for _, n := range names {
		if len(got[n]) != len(wantGood) {
			t.Fatalf("%s/%s: %d calls, want %d:\n%s", ns, n, len(got[n]), len(wantGood), p.stdout)
		}
	}
	return got
}

// wantRefused checks that every call of rs that names param (a path
// parameter; lock sets name the locks in "locks") was refused with a 400
// that names it, and that the others, which name no lock, found none.
func wantRefused(t *testing.T, rs []nameResult, param string) {
	t.Helper()
	for _, r := range rs {
		want := strconv.Quote(param)
		switch {
		case strings.HasSuffix(r.Op, "LockSet"):
			want = "locks"
		case r.Op == "describeSession" || (r.Op == "listLocks" && param == "name"):
			if r.Status != 200 || r.Lock != "" {
				t.Errorf("%s %q: got %d, lock %q; want 200 and no such lock", r.Op, r.Name, r.Status, r.Lock)
			}
			continue
		}
		if r.Status != 400 || r.Code != "invalid_request" || !strings.Contains(r.Detail, want) {
			t.Errorf("%s %q: got %d %s %q, want 400 invalid_request naming %s", r.Op, r.Name, r.Status, r.Code, r.Detail, want)
		}
	}
}

// wantGood is what each call of testdata/names.mjs answers, in order, for
// a name the grammar allows; names: the answer names the lock or semaphore.
var wantGood = []struct {
	op     string
	status int
	names  bool
}{
	{"acquireLock", 201, true},
	{"inspectLock", 200, true},
	{"inspectLock?index", 200, true},
	{"renewLease", 200, true},
	{"setLockValue", 200, true},
	{"acquireLock (ticket)", 202, true},
	{"pollTicket", 200, true},
	{"closeTicket", 204, false},
	{"listLocks", 200, true},
	{"releaseLock", 204, false},
	{"lockHistory", 200, true},
	{"breakLock", 200, true},
	{"acquireSemaphore", 201, true},
	{"inspectSemaphore", 200, true},
	{"renewSemaphoreLease", 200, true},
	{"resizeSemaphore", 200, true},
	{"releaseSemaphore", 204, false},
	{"acquireLock (session)", 201, true},
	{"describeSession", 200, true},
	{"acquireLockSet", 201, true},
	{"renewLockSet", 200, true},
	{"releaseLockSet", 200, false},
}
