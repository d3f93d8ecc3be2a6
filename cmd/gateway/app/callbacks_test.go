package app

import (
	"io"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/lockgate/lockgate/callbacks"
)

// TestCallbackFlags: --callback-allow needs --callback-secret and the
// other way round; a bad pattern or secret stops the start, and no error
// quotes the secret.
func TestCallbackFlags(t *testing.T) {
	good := callbacks.NewSecret().Encode()
	badSecret := "whsec_c2hvcnQtYnV0LXNlY3JldA=="
	for _, tc := range []struct {
		name    string
		env     map[string]string
		enabled bool
		err     string // a word of the error; "" for none
	}{
		{"Neither", nil, false, ""},
		{"Both", map[string]string{"LOCKGATE_CALLBACK_ALLOW": "https://*.example.com/* http://127.0.0.1:9000/*", "LOCKGATE_CALLBACK_SECRET": good}, true, ""},
		{"AllowWithoutSecret", map[string]string{"LOCKGATE_CALLBACK_ALLOW": "https://*/*"}, false, "--callback-secret"},
		{"SecretWithoutAllow", map[string]string{"LOCKGATE_CALLBACK_SECRET": good}, false, "--callback-allow"},
		{"BadPattern", map[string]string{"LOCKGATE_CALLBACK_ALLOW": "ftp://x/*", "LOCKGATE_CALLBACK_SECRET": good}, false, "--callback-allow"},
		{"IPWithoutPort", map[string]string{"LOCKGATE_CALLBACK_ALLOW": "http://127.0.0.1:*/*", "LOCKGATE_CALLBACK_SECRET": good}, false, "must name its port"},
		{"BadSecret", map[string]string{"LOCKGATE_CALLBACK_ALLOW": "https://*/*", "LOCKGATE_CALLBACK_SECRET": badSecret}, false, "--callback-secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string {
				if v, ok := tc.env[k]; ok {
					return v
				}
				return startEnv(k)
			}
			cfg, err := parseConfig(startArgs, getenv, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			n, err := callbackNotifier(cfg, zerolog.Nop())
			if n != nil {
				defer n.Close()
			}
			if tc.err == "" {
				if err != nil || (n != nil) != tc.enabled {
					t.Fatalf("got %v, %v; want enabled %v", n, err, tc.enabled)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %v, want an error naming %s", err, tc.err)
			}
			for _, s := range []string{good, badSecret, good[6:], badSecret[6:]} {
				if strings.Contains(err.Error(), s) {
					t.Fatalf("the error %q quotes the secret", err)
				}
			}
		})
	}
}
