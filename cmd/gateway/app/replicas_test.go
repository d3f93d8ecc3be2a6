package app

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestConfigMinReplicas(t *testing.T) {
	env := func(k string) string {
		return map[string]string{"LOCKGATE_JWT_SECRET": "config-test-secret-at-least-32-bytes"}[k]
	}
	const url = "redis://127.0.0.1:1"
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"off by default":   {[]string{"--redis-url", url}, ""},
		"one":              {[]string{"--redis-url", url, "--redis-min-replicas", "1"}, ""},
		"no redis":         {[]string{"--redis-min-replicas", "1"}, "needs --redis-url"},
		"negative":         {[]string{"--redis-url", url, "--redis-min-replicas", "-1"}, "0 (none asked) or positive"},
		"zero timeout":     {[]string{"--redis-url", url, "--redis-min-replicas", "1", "--redis-replica-timeout", "0"}, "at least 1ms"},
		"timeout too long": {[]string{"--redis-url", url, "--redis-min-replicas", "1", "--redis-replica-timeout", "2s"}, "shorter than --redis-timeout"},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := parseConfig(append([]string{"gateway"}, tc.args...), env, io.Discard)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error mentioning %q", err, tc.want)
			case tc.want == "" && c.replicaTimeout != 100*time.Millisecond:
				t.Fatalf("--redis-replica-timeout: got %s, want the default 100ms", c.replicaTimeout)
			}
		})
	}
}
