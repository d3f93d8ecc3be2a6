package e2e

import (
	"bytes"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/lockgate/lockgate/internal/redistest"
)

// TestEveryStatusIsDeclared sends every operation of openapi.yaml the
// failures any call can meet (no token, a token for another namespace,
// no headers or body, a broken body, a body too large, a malformed id, a
// Redis that is gone, a caller over its rate) and fails on an answer whose
// status the operation does not declare by itself: its `default` response
// does not count, since a generated client decodes only what is declared.
func TestEveryStatusIsDeclared(t *testing.T) {
	t.Parallel()
	spec, err := openapi3.NewLoader().LoadFromFile(filepath.Join("..", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rs := redistest.Start(t)
	gw := startGateway(t, "--redis-url", rs.URL(), "--ui")
	limited := startGateway(t, "--subject-rate", "1", "--subject-burst", "1", "--ui")
	gone := redistest.Start(t)
	t.Cleanup(func() { waitRedialsEnd(t) }) // after the gateway stops
	down := startGateway(t, "--redis-url", gone.URL(), "--ui")
	gone.Stop()

	auth := bearer(token(t, nil))
	elsewhere := bearer(token(t, map[string]any{"ns": []string{"elsewhere"}}))
	const id = "AAAAAAAAAAAAAAAAAAAAAA"
	headers := []string{"Lock-Token", "t", "Ticket-Token", "t", "Session-Token", "t", "Content-Type", "application/json"}
	bodies := map[string]string{ // enough to pass the gate
		"acquireSemaphore": `{"limit":2}`, "resizeSemaphore": `{"limit":2}`, "openSession": `{"ttl_ms":60000}`,
		"acquireLockSet": `{"locks":"ops/a,ops/b"}`, "setLockValue": `{"value":"v"}`,
	}
	queries := map[string]string{"renewLockSet": "?locks=ops/a,ops/b", "releaseLockSet": "?locks=ops/a,ops/b"}

	seen := map[string]map[int]bool{} // operation -> statuses answered
	paths := spec.Paths.InMatchingOrder()
	sort.Strings(paths)
	for _, path := range paths {
		for method, op := range spec.Paths.Find(path).Operations() {
			declared := map[int]bool{}
			for code := range op.Responses.Map() {
				if n, err := strconv.Atoi(code); err == nil {
					declared[n] = true
				}
			}
			url := func(bad bool) string {
				r := strings.NewReplacer("{namespace}", "ops", "{name}", "x", "{ticket}", id, "{session}", id)
				if bad {
					r = strings.NewReplacer("{namespace}", "Ops", "{name}", "-x", "{ticket}", "t", "{session}", "s")
				}
				return r.Replace(path) + queries[op.OperationID]
			}
			// The headers the operation requires, and no other: a
			// Lock-Token beside a Session-Token is a 400 of its own.
			required := []string{"Content-Type", "application/json"}
			for _, p := range append(spec.Paths.Find(path).Parameters, op.Parameters...) {
				if p.Value.In == openapi3.ParameterInHeader && p.Value.Required {
					required = append(required, p.Value.Name, "t")
				}
			}
			body := bodies[op.OperationID]
			if body == "" && op.RequestBody != nil {
				body = "{}"
			}
			type try struct {
				name, url, body string
				gw              *gateway
				headers         []string
			}
			tries := []try{
				{"no token", url(false), body, gw, headers},
				{"another namespace", url(false), body, gw, with(elsewhere, headers)},
				{"no headers, no body", url(false), "", gw, auth},
				{"malformed ids", url(true), body, gw, with(auth, headers)},
				{"redis gone", url(false), body, down, with(auth, required)},
				{"over its rate", url(false), body, limited, with(auth, required)},
				{"over its rate, again", url(false), body, limited, with(auth, required)},
			}
			if op.RequestBody != nil {
				tries = append(tries,
					try{"broken body", url(false), `{"ttl_ms":`, gw, with(auth, required)},
					try{"body too large", url(false), `{"owner":"` + strings.Repeat("x", 17<<10) + `"}`, gw, with(auth, required)})
			}
			for _, tr := range tries {
				r := call(t, method, tr.gw.URL+tr.url, tr.body, tr.headers...)
				if seen[method+" "+path] == nil {
					seen[method+" "+path] = map[int]bool{}
				}
				seen[method+" "+path][r.status] = true
				if !declared[r.status] {
					t.Errorf("%s %s (%s), %s: answered %d, which it does not declare (it declares %v); body %s",
						method, path, op.OperationID, tr.name, r.status, sortedStatuses(declared), r.body)
				}
			}
		}
	}
	// The tries reach what they are for: a test that answers 404 to
	// everything would declare nothing wrong.
	for _, want := range []struct {
		op     string
		status int
	}{{"POST /locks/{namespace}/{name}", 401}, {"POST /locks/{namespace}/{name}", 403}, {"POST /locks/{namespace}/{name}", 413},
		{"POST /locks/{namespace}/{name}", 503}, {"POST /locks/{namespace}/{name}", 429}, {"GET /sessions/{session}", 400}} {
		if !seen[want.op][want.status] {
			t.Errorf("%s never answered %d: got %v", want.op, want.status, seen[want.op])
		}
	}
}

// waitRedialsEnd polls until no go-redis pool redials a Redis that is
// gone: a closed pool's redial loop ends after its next pause (1 s), and
// the package's leak check would count it.
func waitRedialsEnd(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if n := runtime.Stack(buf, true); !bytes.Contains(buf[:n], []byte("pool.(*ConnPool).tryDial")) {
			return
		}
		if time.Now().After(deadline) {
			t.Error("a redial of the Redis that is gone still runs 10s after its gateway stopped")
			return
		}
		time.Sleep(10 * time.Millisecond) // poll interval, not synchronisation
	}
}

func sortedStatuses(m map[int]bool) []int {
	var s []int
	for k := range m {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}
