package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/cmd/lockbench/loadgen"
	"github.com/lockgate/lockgate/internal/gatewaytest"
	"github.com/lockgate/lockgate/internal/redistest"
)

// TestRemoteSmoke runs lockbench --url against a real gateway on a real
// redis-server, once per mode, with --redis-url so that the floor and the
// Redis command counts are measured too, and checks that the report has
// every figure. It asserts presence, never speed.
func TestRemoteSmoke(t *testing.T) {
	rs := redistest.Start(t)
	secret := "lockbench-remote-test-secret-0123456789"
	gw := gatewaytest.Start(t, map[string]string{"LOCKGATE_JWT_SECRET": secret}, "--redis-url", rs.URL())
	token := signToken(t, secret)
	env := map[string]string{"LOCKGATE_URL": gw.URL, "LOCKGATE_TOKEN": token, "LOCKGATE_REDIS_URL": rs.URL()}
	getenv := func(k string) string { return env[k] }

	for _, mode := range []string{loadgen.ModeUncontended, loadgen.ModeContended, loadgen.ModeSemaphore, loadgen.ModeMixed} {
		t.Run(mode, func(t *testing.T) {
			args := []string{"lockbench", "--json", "--mode", mode, "--clients", "4", "--duration", "300ms",
				"--semaphore-limit", "2", "--shared-ratio", "0.5", "--namespace", "remote-" + mode}
			var out, progress bytes.Buffer
			if err := run(t.Context(), args, getenv, &out, &progress); err != nil {
				t.Fatalf("lockbench --url: %v\nprogress:\n%s", err, &progress)
			}
			if strings.Contains(out.String()+progress.String(), token) {
				t.Errorf("the output contains the token:\n%s\n%s", &out, &progress)
			}
			var rep loadgen.Report
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				t.Fatalf("the --json report does not parse: %v\n%s", err, &out)
			}
			if rep.Target != gw.URL || rep.RedisVersion == "" || len(rep.Scenarios) != 1 {
				t.Fatalf("report of %s, Redis %q, %d scenarios; want %s, a version, 1", rep.Target, rep.RedisVersion, len(rep.Scenarios), gw.URL)
			}
			s := rep.Scenarios[0]
			if s.Mode != mode || s.Clients != 4 {
				t.Errorf("scenario %s with %d clients, want %s with 4", s.Mode, s.Clients, mode)
			}
			for _, r := range []*loadgen.Result{&s.Gateway, s.Floor} {
				if r == nil {
					t.Fatalf("%s: no floor result", s.Name)
				}
				checkResult(t, s, r)
			}
		})
	}

	t.Run("markdown without the floor", func(t *testing.T) {
		delete(env, "LOCKGATE_REDIS_URL")
		args := []string{"lockbench", "--clients", "2", "--duration", "200ms"}
		var out, progress bytes.Buffer
		if err := run(t.Context(), args, getenv, &out, &progress); err != nil {
			t.Fatalf("lockbench --url: %v\nprogress:\n%s", err, &progress)
		}
		for _, want := range []string{"- target: the gateway at " + gw.URL, "- floor: not measured", "| uncontended, 2 clients | gateway |"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("the markdown report lacks %q:\n%s", want, &out)
			}
		}
		if strings.Contains(out.String(), "| | floor |") {
			t.Errorf("a floor row without --redis-url:\n%s", &out)
		}
	})
}

// checkResult checks that r has the figures of its scenario's mode, and
// the Redis command counts.
func checkResult(t *testing.T, s loadgen.ScenarioReport, r *loadgen.Result) {
	t.Helper()
	if r.Cycles <= 0 || r.CyclesPerSec <= 0 || r.Acquire.N == 0 || r.Release.N == 0 || len(r.Errors) != 0 {
		t.Errorf("%s %s: want cycles, latencies and no errors, got %+v", s.Name, r.Path, r)
	}
	if r.Redis == nil || r.Redis.Total <= 0 || r.Redis.ScriptsPerHandoff <= 0 {
		t.Errorf("%s %s: want Redis command counts, got %+v", s.Name, r.Path, r.Redis)
	}
	switch s.Mode {
	case loadgen.ModeContended:
		if r.Fairness == nil || r.Fairness.Grants <= 0 || r.Handoff == nil || r.Handoff.N == 0 {
			t.Errorf("%s %s: want fairness and handoffs, got %+v, %+v", s.Name, r.Path, r.Fairness, r.Handoff)
		}
	case loadgen.ModeSemaphore:
		if st := r.Semaphore; st == nil || st.Limit != 2 || st.MostHolders < 1 || st.MostHolders > 2 {
			t.Errorf("%s %s: want at most 2 holders of 2 permits, got %+v", s.Name, r.Path, st)
		}
	case loadgen.ModeMixed:
		if m := r.Mixed; m == nil || m.SharedGrants <= 0 || m.ExclusiveGrants <= 0 || m.Conflicts != 0 {
			t.Errorf("%s %s: want shared and exclusive grants and no conflict, got %+v", s.Name, r.Path, m)
		}
	}
}

// signToken signs, with the gateway's HS256 secret, a token for every
// namespace.
func signToken(t *testing.T, secret string) string {
	t.Helper()
	claims := jwt.MapClaims{"sub": "lockbench-test", "ns": []string{"*"}, "exp": time.Now().Add(time.Hour).Unix()}
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return token
}
