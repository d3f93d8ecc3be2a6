package main

import (
	"encoding/json"
	"net/http"
	"os/user"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// TestStatusJSONHasHolds: status --json shows how many holds the holder
// has, and their ids, as GET does.
func TestStatusJSONHasHolds(t *testing.T) {
	gw := startGateway(t)
	tok := strings.TrimSpace(lockctl(t, gw, nil, "acquire", "holds/x", "--ttl", "1m").want(t, exitOK).stdout)
	req, err := http.NewRequestWithContext(t.Context(), "POST", gw.URL+"/locks/holds/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+jwtFor(t, secret))
	req.Header.Set("Lock-Token", tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("re-enter: %d, want 200", resp.StatusCode)
	}
	out := lockctl(t, gw, nil, "status", "holds/x", "--json").want(t, exitOK).stdout
	var info struct {
		Holds   int `json:"holds"`
		Holders []struct {
			Holds   int      `json:"holds"`
			HoldIDs []string `json:"hold_ids"`
		} `json:"holders"`
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatal(err)
	}
	if info.Holds != 2 || len(info.Holders) != 1 || info.Holders[0].Holds != 2 || len(info.Holders[0].HoldIDs) != 2 {
		t.Fatalf("status --json: got %s, want holds 2 and the holder's two hold ids", out)
	}
}

// TestListNothingHeld: list says so when the namespace holds no lock,
// and --json prints nothing.
func TestListNothingHeld(t *testing.T) {
	gw := startGateway(t)
	if out := lockctl(t, gw, nil, "list", "empty").want(t, exitOK).stdout; out != "no lock of namespace empty is held\n" {
		t.Fatalf("list of an empty namespace: got %q, want a line that says so", out)
	}
	if out := lockctl(t, gw, nil, "list", "empty", "--json").want(t, exitOK).stdout; out != "" {
		t.Fatalf("list --json of an empty namespace: got %q, want nothing", out)
	}
}

// TestTokenSubjectDefaultsToTheUser: where USER is unset (containers,
// cron), token takes the login name of the process's uid, as id -un does;
// with USER set, that.
func TestTokenSubjectDefaultsToTheUser(t *testing.T) {
	u, err := user.Current()
	if err != nil || u.Username == "" {
		t.Skipf("this process's uid has no user name (%v)", err)
	}
	for name, tc := range map[string]struct {
		env  map[string]string
		args []string
		want string
	}{
		"USER unset":  {map[string]string{}, nil, u.Username},
		"USER set":    {map[string]string{"USER": "alice"}, nil, "alice"},
		"--sub empty": {map[string]string{}, []string{"--sub", ""}, u.Username},
		"--sub wins":  {map[string]string{"USER": "alice"}, []string{"--sub", "ci"}, "ci"},
	} {
		t.Run(name, func(t *testing.T) {
			env := map[string]string{"LOCKGATE_JWT_SECRET": secret}
			for k, v := range tc.env {
				env[k] = v
			}
			tok := strings.TrimSpace(lockctl(t, nil, env, append([]string{"token", "--ns", "*"}, tc.args...)...).want(t, exitOK).stdout)
			var c tokenClaims
			if _, err := jwt.ParseWithClaims(tok, &c, func(*jwt.Token) (any, error) { return []byte(secret), nil }); err != nil {
				t.Fatal(err)
			}
			if c.Subject != tc.want {
				t.Fatalf("sub %q, want %q", c.Subject, tc.want)
			}
		})
	}
}

// TestRunHelpKillAfter: run -h says --kill-after covers every stop, not
// only a lost lease.
func TestRunHelpKillAfter(t *testing.T) {
	out := lockctl(t, nil, nil, "run", "-h")
	for _, w := range []string{"SIGINT or SIGTERM", "lost lease"} {
		if !strings.Contains(out.stdout+out.stderr, w) {
			t.Fatalf("run -h: want --kill-after to mention %q:\n%s", w, out.stdout+out.stderr)
		}
	}
}
