package main

import (
	"testing"
)

// TestRunChildEnvironment: the command gets the lock's variables and
// lockctl's environment, never LOCKGATE_JWT_SECRET; LOCKGATE_TOKEN passes
// (nested runs need it) unless --no-token-env.
func TestRunChildEnvironment(t *testing.T) {
	gw := startGateway(t)
	t.Setenv("LOCKGATE_JWT_SECRET", secret)
	t.Setenv("LOCKGATE_TOKEN", jwtFor(t, secret))
	t.Setenv("LOCKGATE_TEST_OTHER", "kept")
	t.Setenv("LOCKGATE_URL", gw.URL) // for the nested run
	const seen = `test -n "$LOCKGATE_LOCK_TOKEN" && test "$LOCKGATE_TEST_OTHER" = kept || exit 97; ` +
		`test -z "$LOCKGATE_JWT_SECRET" || exit 98; `
	lockctl(t, gw, nil, "run", "env/secret", "--", "sh", "-c", seen+`test -n "$LOCKGATE_TOKEN" || exit 99`).want(t, 0)
	lockctl(t, gw, nil, "run", "env/no-token", "--no-token-env", "--", "sh", "-c", seen+`test -z "$LOCKGATE_TOKEN" || exit 99`).want(t, 0)
	// A nested run re-enters with the token it inherits, and gives its
	// own child the same environment.
	lockctl(t, gw, nil, "run", "env/nested", "--", "sh", "-c",
		`"$0" run env/nested -- sh -c '`+seen+`test "$LOCKGATE_LOCK" = env/nested'`, lockctlBinary(t)).want(t, 0)
}
