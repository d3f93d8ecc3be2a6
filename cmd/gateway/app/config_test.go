package app

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestTicketLivenessFloor: a liveness under 2 s is refused: a long poll
// keeps its ticket alive once a second, and at 100 ms it ran the ticket
// script 30 times a second.
func TestTicketLivenessFloor(t *testing.T) {
	for value, ok := range map[string]bool{"100ms": false, "1999ms": false, "2s": true, "10m": true, "11m": false} {
		_, err := parseConfig(append(append([]string{}, startArgs...), "--ticket-liveness", value), startEnv, io.Discard)
		if ok != (err == nil) || !ok && !strings.Contains(err.Error(), "--ticket-liveness") {
			t.Errorf("--ticket-liveness %s: got %v, want accepted %v", value, err, ok)
		}
	}
}

// TestPriorityAging: --priority-aging, from the flag or its variable, is
// 1ms to 24h.
func TestPriorityAging(t *testing.T) {
	for value, ok := range map[string]bool{"0s": false, "1ms": true, "30s": true, "24h": true, "25h": false} {
		_, err := parseConfig(append(append([]string{}, startArgs...), "--priority-aging", value), startEnv, io.Discard)
		if ok != (err == nil) || !ok && !strings.Contains(err.Error(), "--priority-aging") {
			t.Errorf("--priority-aging %s: got %v, want accepted %v", value, err, ok)
		}
	}
	env := func(k string) string {
		if k == "LOCKGATE_PRIORITY_AGING" {
			return "2s"
		}
		return startEnv(k)
	}
	if c, err := parseConfig(startArgs, env, io.Discard); err != nil || c.priorityAging != 2*time.Second {
		t.Errorf("LOCKGATE_PRIORITY_AGING=2s: got %v, %v; want 2s", c.priorityAging, err)
	}
}

// TestSignGrants: --sign-grants takes on-request (the default) or always,
// from the flag or its variable; always with --grant-keys off, which
// signs nothing, is refused.
func TestSignGrants(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		env   string
		want  string // the config's value, or "" for refused
		words string // what the refusal names
	}{
		{"default", nil, "", signOnRequest, ""},
		{"flag", []string{"--sign-grants", "always"}, "", signAlways, ""},
		{"variable", nil, "always", signAlways, ""},
		{"flag over variable", []string{"--sign-grants", "on-request"}, "always", signOnRequest, ""},
		{"unknown", []string{"--sign-grants", "yes"}, "", "", "--sign-grants \"yes\": want on-request or always"},
		{"always, keys off", []string{"--sign-grants", "always", "--grant-keys", "off"}, "", "", "--grant-keys off"},
		{"on-request, keys off", []string{"--grant-keys", "off"}, "", signOnRequest, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := func(k string) string {
				if k == "LOCKGATE_SIGN_GRANTS" {
					return tc.env
				}
				return startEnv(k)
			}
			c, err := parseConfig(append(append([]string{}, startArgs...), tc.args...), env, io.Discard)
			switch {
			case tc.want == "" && (err == nil || !strings.Contains(err.Error(), tc.words)):
				t.Fatalf("got %v, want an error naming %s", err, tc.words)
			case tc.want != "" && (err != nil || c.signGrants != tc.want):
				t.Fatalf("got %q, %v; want %q", c.signGrants, err, tc.want)
			}
		})
	}
}
