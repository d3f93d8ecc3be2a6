package clients

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// semaphoreHolders returns how many hold and wait for sem, over HTTP.
func (g *gateway) semaphoreHolders(t *testing.T, sem string) (holders, waiters int) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", g.URL+"/semaphores/"+sem, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+jwtFor(t))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return 0, 0
	}
	var info struct {
		Holders []json.RawMessage `json:"holders"`
		Waiters int               `json:"waiters"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&info) != nil {
		t.Fatalf("inspect %s: %d", sem, resp.StatusCode)
	}
	return len(info.Holders), info.Waiters
}

// TestCurlRunAtMostN: four runs of the recipe with N = 2: two commands run,
// two wait for a permit, and all four run once permits free up; a
// different N is refused (exit 2), and a wait that runs out exits 1.
func TestCurlRunAtMostN(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)
	dir := t.TempDir()
	goOn := filepath.Join(dir, "go-on")
	const jobs = 4
	var procs []*proc
	for i := range jobs {
		started := filepath.Join(dir, "started-"+strconv.Itoa(i))
		cmd := `test "$LOCKGATE_SEMAPHORE" = curl/encoders && test "$LOCKGATE_FENCING_TOKEN" -gt 0 || exit 99; touch ` + shq(started) +
			`; while [ ! -e ` + shq(goOn) + ` ]; do sleep 0.05; done; exit 3`
		procs = append(procs, start(t, gw, script(t, "run-at-most-n.sh", "curl/encoders", "2", "sh", "-c", cmd), "WAIT_MS=60000"))
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if h, w := gw.semaphoreHolders(t, "curl/encoders"); h == 2 && w == jobs-2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not 2 holders and 2 waiters within 30s")
		}
		time.Sleep(10 * time.Millisecond) // poll interval, not synchronisation
	}
	n := 0
	for i := range jobs {
		if _, err := os.Stat(filepath.Join(dir, "started-"+strconv.Itoa(i))); err == nil {
			n++
		}
	}
	if n > 2 {
		t.Fatalf("%d commands started with N = 2", n)
	}

	other := start(t, gw, script(t, "run-at-most-n.sh", "curl/encoders", "3", "true"))
	if code := other.wait(t, 30*time.Second); code != 2 || !strings.Contains(other.stderr.String(), "limit 2") {
		t.Fatalf("a different N: exit %d, stderr %q; want 2 and the limit in force", code, other.stderr)
	}
	late := start(t, gw, script(t, "run-at-most-n.sh", "curl/encoders", "2", "true"), "WAIT_MS=100")
	if code := late.wait(t, 30*time.Second); code != 1 || !strings.Contains(late.stderr.String(), "still taken") {
		t.Fatalf("a wait that runs out: exit %d, stderr %q; want 1", code, late.stderr)
	}

	touch(t, goOn)
	for i, p := range procs {
		if code := p.wait(t, 60*time.Second); code != 3 {
			t.Fatalf("run %d: exit %d, want the command's 3; stderr %s", i, code, p.stderr)
		}
		p.noSecrets(t)
	}
	if h, w := gw.semaphoreHolders(t, "curl/encoders"); h != 0 || w != 0 {
		t.Fatalf("after the runs: %d holders, %d waiters; want none", h, w)
	}
}
