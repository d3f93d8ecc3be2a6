package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/internal/gatewaytest"
)

// TestAcquireStatusRenewRelease walks one lock through its life with the
// plain commands, and checks the code of each outcome.
func TestAcquireStatusRenewRelease(t *testing.T) {
	gw := startGateway(t)
	lockctl(t, gw, nil, "status", "cmds/x").want(t, exitFree)

	tok := strings.TrimSpace(lockctl(t, gw, nil, "acquire", "cmds/x", "--ttl", "1m", "--owner", "nightly").want(t, exitOK).stdout)
	if tok == "" || strings.ContainsAny(tok, " \n") {
		t.Fatalf("acquire printed %q, want the owner token alone", tok)
	}

	st := lockctl(t, gw, nil, "status", "cmds/x").want(t, exitOK)
	if !strings.Contains(st.stdout, "held by tester") || !strings.Contains(st.stdout, `"nightly"`) {
		t.Fatalf("status: got %q, want the subject and the owner", st.stdout)
	}
	var info lockInfo
	if err := json.Unmarshal([]byte(lockctl(t, gw, nil, "status", "cmds/x", "--json").want(t, exitOK).stdout), &info); err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Lock != "cmds/x" {
		t.Fatalf("status --json: got %+v, want cmds/x held", info)
	}

	held := lockctl(t, gw, nil, "acquire", "cmds/x").want(t, exitHeld)
	if !strings.Contains(held.stderr, "lock_held") {
		t.Fatalf("acquire of a held lock: stderr %q, want it to say lock_held", held.stderr)
	}

	var ls lease
	if err := json.Unmarshal([]byte(lockctl(t, gw, nil, "renew", "cmds/x", "--token", tok, "--ttl", "2m", "--json").want(t, exitOK).stdout), &ls); err != nil {
		t.Fatal(err)
	}
	if ls.TTLMs != 120000 || ls.FencingToken != info.FencingToken {
		t.Fatalf("renew: got %+v, want ttl 120000 and fencing token %d", ls, info.FencingToken)
	}

	lockctl(t, gw, nil, "renew", "cmds/x", "--token", "not-the-token").want(t, exitNotHolder)
	lockctl(t, gw, nil, "release", "cmds/x", "--token", "not-the-token").want(t, exitNotHolder)
	lockctl(t, gw, map[string]string{"LOCKGATE_LOCK_TOKEN": tok}, "release", "cmds/x").want(t, exitOK)
	lockctl(t, gw, nil, "status", "cmds/x").want(t, exitFree)
	lockctl(t, gw, nil, "release", "cmds/x", "--token", tok).want(t, exitOK) // releases are idempotent
	r := lockctl(t, gw, nil, "renew", "cmds/x", "--token", tok).want(t, exitNotHolder)
	if !strings.Contains(r.stderr, "released") {
		t.Fatalf("renew of a released grant: stderr %q, want the reason", r.stderr)
	}
}

// TestAcquireValue: --value goes with the grant, and status shows it.
func TestAcquireValue(t *testing.T) {
	gw := startGateway(t)
	lockctl(t, gw, nil, "acquire", "cmds/leader", "--ttl", "1m", "--value", "10.0.0.7:8080").want(t, exitOK)
	st := lockctl(t, gw, nil, "status", "cmds/leader").want(t, exitOK)
	if !strings.Contains(st.stdout, `value "10.0.0.7:8080"`) {
		t.Fatalf("status: got %q, want the value", st.stdout)
	}
	var info lockInfo
	if err := json.Unmarshal([]byte(lockctl(t, gw, nil, "status", "cmds/leader", "--json").want(t, exitOK).stdout), &info); err != nil {
		t.Fatal(err)
	}
	if info.Value != "10.0.0.7:8080" {
		t.Fatalf("status --json: got value %q, want 10.0.0.7:8080", info.Value)
	}
	t.Setenv("LOCKGATE_URL", gw.URL) // for the status inside run
	t.Setenv("LOCKGATE_TOKEN", jwtFor(t, secret))
	run := lockctl(t, gw, nil, "run", "cmds/follower", "--value", "10.0.0.8:8080", "--", "sh", "-c", `"$0" status cmds/follower`, lockctlBinary(t))
	if !strings.Contains(run.want(t, exitOK).stdout, `value "10.0.0.8:8080"`) {
		t.Fatalf("status inside run: got %q, want the run's value", run.stdout)
	}
}

// TestReleaseTokenFromStdin: --token - keeps the owner token out of argv.
func TestReleaseTokenFromStdin(t *testing.T) {
	gw := startGateway(t)
	tok := strings.TrimSpace(lockctl(t, gw, nil, "acquire", "cmds/stdin").want(t, exitOK).stdout)
	var stdout, stderr gatewaytest.Buffer
	env := map[string]string{"LOCKGATE_URL": gw.URL, "LOCKGATE_TOKEN": jwtFor(t, secret)}
	code := run(t.Context(), []string{"lockctl", "release", "cmds/stdin", "--token", "-"},
		func(k string) string { return env[k] }, strings.NewReader(tok+"\n"), &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("release --token -: got %d, want 0; stderr %s", code, stderr.String())
	}
	lockctl(t, gw, nil, "status", "cmds/stdin").want(t, exitFree)
}

// TestAcquireWaits: a wait longer than --server-wait-max is several
// server-side waits, and ends with the grant once the holder's lease runs
// out.
func TestAcquireWaits(t *testing.T) {
	gw := startGateway(t)
	lockctl(t, gw, nil, "acquire", "cmds/wait", "--ttl", "400ms").want(t, exitOK)
	r := lockctl(t, gw, nil, "acquire", "cmds/wait", "--wait", "20s", "--server-wait-max", "100ms", "--json").want(t, exitOK)
	var g grant
	if err := json.Unmarshal([]byte(r.stdout), &g); err != nil || g.Token == "" {
		t.Fatalf("acquire --json: got %q (%v), want a grant", r.stdout, err)
	}
	// And a wait that runs out is "held".
	lockctl(t, gw, nil, "acquire", "cmds/wait", "--wait", "150ms", "--server-wait-max", "100ms").want(t, exitHeld)
}

// TestAuthFailure: a bad token, a missing one and a namespace not granted
// each exit 82 with a message that says why and never shows the token.
func TestAuthFailure(t *testing.T) {
	gw := startGateway(t)
	forged := jwtFor(t, "another-secret-that-is-32-bytes-long")
	other := jwtFor(t, secret, "billing")
	for _, tc := range []struct {
		name, jwt, want string
	}{
		{name: "bad signature", jwt: forged, want: "signature"},
		{name: "not a JWT", jwt: "hunter2", want: "not a JWT"},
		{name: "namespace not granted", jwt: other, want: `namespace "auth"`},
		{name: "no token", jwt: "", want: "LOCKGATE_TOKEN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, args := range [][]string{
				{"status", "auth/x"},
				{"acquire", "auth/x"},
				{"run", "auth/x", "--", "true"},
			} {
				r := lockctl(t, gw, map[string]string{"LOCKGATE_TOKEN": tc.jwt}, args...).want(t, exitAuth)
				if !strings.Contains(r.stderr, tc.want) {
					t.Errorf("%s: stderr %q, want it to say %q", args[0], r.stderr, tc.want)
				}
				if tc.jwt != "" && strings.Contains(r.stderr+r.stdout, tc.jwt) {
					t.Errorf("%s: the output shows the JWT", args[0])
				}
			}
		})
	}
	// The flag overrides the environment.
	lockctl(t, gw, map[string]string{"LOCKGATE_TOKEN": forged}, "status", "auth/x", "--jwt", jwtFor(t, secret)).want(t, exitFree)
}

// TestUnreachable: no gateway is 83, fast, whatever the command.
func TestUnreachable(t *testing.T) {
	url := closedURL(t)
	for _, args := range [][]string{
		{"status", "down/x"},
		{"acquire", "down/x"},
		{"release", "down/x", "--token", "t"},
		{"run", "down/x", "--", "true"},
	} {
		r := lockctl(t, nil, map[string]string{"LOCKGATE_URL": url}, args...).want(t, exitUnavail)
		if !strings.Contains(r.stderr, "unreachable") {
			t.Errorf("%s: stderr %q, want it to say unreachable", args[0], r.stderr)
		}
	}
	// --url overrides LOCKGATE_URL.
	gw := startGateway(t)
	lockctl(t, nil, map[string]string{"LOCKGATE_URL": url}, "status", "down/x", "--url", gw.URL).want(t, exitFree)
}

// TestUsage: mistakes in the command line are 2, before any call.
func TestUsage(t *testing.T) {
	url := closedURL(t) // a call would be 83, not 2
	for name, args := range map[string][]string{
		"no command":        {},
		"unknown command":   {"frobnicate"},
		"no lock":           {"acquire"},
		"no slash":          {"acquire", "justname"},
		"bad namespace":     {"status", "Billing/x"},
		"bad name":          {"status", "billing/-x"},
		"two locks":         {"status", "a/b", "c/d"},
		"unknown flag":      {"acquire", "a/b", "--frob"},
		"run without --":    {"run", "a/b", "true"},
		"run without cmd":   {"run", "a/b", "--"},
		"release no token":  {"release", "a/b"},
		"tiny ttl":          {"run", "a/b", "--ttl", "1ms", "--", "true"},
		"token short key":   {"token", "--secret", "short", "--sub", "x", "--ns", "*"},
		"token weak key":    {"token", "--secret", strings.Repeat("ab", 20), "--sub", "x", "--ns", "*"},
		"token key, space":  {"token", "--secret", secret + " ", "--sub", "x", "--ns", "*"},
		"token no ns":       {"token", "--secret", secret, "--sub", "x"},
		"token stray arg":   {"token", "--secret", secret, "--sub", "x", "--ns", "*", "extra"},
		"negative wait":     {"acquire", "a/b", "--wait", "-1s"},
		"bad url":           {"status", "a/b", "--url", "ftp://x"},
		"renew bad ttl":     {"renew", "a/b", "--token", "t", "--ttl", "-1s"},
		"run negative kill": {"run", "a/b", "--kill-after", "-1s", "--", "true"},
		"long value":        {"acquire", "a/b", "--value", strings.Repeat("v", 1025)},
		"shared value":      {"acquire", "a/b", "--shared", "--value", "v"},
		"permit value":      {"run", "a/b", "--limit", "2", "--value", "v", "--", "true"},
	} {
		t.Run(name, func(t *testing.T) {
			lockctl(t, nil, map[string]string{"LOCKGATE_URL": url}, args...).want(t, exitUsage)
		})
	}
	// The gateway's 400 is a usage error too.
	gw := startGateway(t)
	r := lockctl(t, gw, nil, "acquire", "usage/x", "--ttl", "2h").want(t, exitUsage)
	if !strings.Contains(r.stderr, "invalid_request") {
		t.Fatalf("stderr %q, want the gateway's reason", r.stderr)
	}
}

// TestHelp lists the commands and the exit codes on stdout.
func TestHelp(t *testing.T) {
	r := lockctl(t, nil, nil, "help").want(t, exitOK)
	for _, want := range []string{"acquire", "release", "renew", "status", "list", "run", "token", "Exit codes:", "84"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("help does not mention %q", want)
		}
	}
	lockctl(t, nil, nil, "run", "-h").want(t, exitOK)
}

// TestToken mints a token the gateway accepts, with the claims asked for.
func TestToken(t *testing.T) {
	gw := startGateway(t)
	r := lockctl(t, nil, map[string]string{"LOCKGATE_JWT_SECRET": secret}, "token", "--sub", "ops", "--ns", "billing, etl-*", "--ttl", "10m").want(t, exitOK)
	tok := strings.TrimSpace(r.stdout)
	if r.stderr != "" {
		t.Fatalf("token wrote to stderr: %q", r.stderr)
	}
	var c tokenClaims
	if _, err := jwt.ParseWithClaims(tok, &c, func(*jwt.Token) (any, error) { return []byte(secret), nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired()); err != nil {
		t.Fatalf("parse the minted token: %v", err)
	}
	if c.Subject != "ops" || strings.Join(c.Namespaces, ",") != "billing,etl-*" {
		t.Fatalf("claims: got sub %q ns %q, want ops and [billing etl-*]", c.Subject, c.Namespaces)
	}
	if left := time.Until(c.ExpiresAt.Time); left <= 9*time.Minute || left > 10*time.Minute {
		t.Fatalf("exp in %s, want 10m", left)
	}
	env := map[string]string{"LOCKGATE_TOKEN": tok}
	lockctl(t, gw, env, "status", "etl-daily/x").want(t, exitFree)
	lockctl(t, gw, env, "status", "etl/x").want(t, exitAuth)
}

// TestTokenWithoutSecret: with no key, token prints no token (a shell's
// $(lockctl token ...) must not become "Bearer "), exits 2, and says on
// stderr where a key comes from, and what a --dev gateway offers instead.
func TestTokenWithoutSecret(t *testing.T) {
	r := lockctl(t, nil, map[string]string{"LOCKGATE_JWT_SECRET": ""}, "token", "--sub", "ops", "--ns", "demo", "--admin", "demo").want(t, exitUsage)
	if r.stdout != "" {
		t.Fatalf("stdout %q, want nothing", r.stdout)
	}
	for _, want := range []string{"LOCKGATE_JWT_SECRET", "--secret", "--dev", "LOCKGATE_ADMIN_TOKEN"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q lacks %q", r.stderr, want)
		}
	}
}

// TestList: list prints every held lock of the namespace, across pages,
// once each, with its subject and owner and never a token; --json prints
// one object a line.
func TestList(t *testing.T) {
	gw := startGateway(t)
	var toks []string
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		toks = append(toks, strings.TrimSpace(lockctl(t, gw, nil, "acquire", "listed/"+name, "--ttl", "1m", "--owner", "job\x1b[2J").want(t, exitOK).stdout))
	}
	lockctl(t, gw, nil, "acquire", "other/a").want(t, exitOK)
	out := lockctl(t, gw, nil, "list", "listed", "--page-size", "2").want(t, exitOK).stdout
	if n := strings.Count(out, "\n"); n != 5 || !strings.Contains(out, "listed/c held by tester") || strings.Contains(out, "other/") {
		t.Fatalf("list: got %q, want the 5 locks of listed, one a line", out)
	}
	if strings.Contains(out, "\x1b") {
		t.Fatalf("list: got %q, want the owner's escape character escaped", out)
	}
	js := lockctl(t, gw, nil, "list", "listed", "--json").want(t, exitOK).stdout
	for line := range strings.Lines(js) {
		var l listedLock
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.Subject != "tester" || l.Holds != 1 {
			t.Fatalf("list --json: got line %q (%v), want a lock held by tester", line, err)
		}
	}
	for _, tok := range toks {
		if strings.Contains(out+js, tok) {
			t.Fatalf("list printed an owner token")
		}
	}
	lockctl(t, gw, nil, "list", "Listed").want(t, exitUsage)
	lockctl(t, gw, nil, "list", "listed", "--page-size", "0").want(t, exitUsage)
	lockctl(t, gw, nil, "list").want(t, exitUsage)
}
