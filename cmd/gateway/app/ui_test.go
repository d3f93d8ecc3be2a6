package app

import (
	"io"
	"testing"
)

// TestUIFlag: the dashboard is off unless asked; --dev turns it on, unless
// --ui=false says otherwise.
func TestUIFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want bool
	}{
		{"default", startArgs, nil, false},
		{"--ui", append(append([]string{}, startArgs...), "--ui"), nil, true},
		{"LOCKGATE_UI", startArgs, map[string]string{"LOCKGATE_UI": "true"}, true},
		{"--dev", []string{"gateway", "--dev"}, nil, true},
		{"--dev --ui=false", []string{"gateway", "--dev", "--ui=false"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string {
				if v, ok := tc.env[k]; ok {
					return v
				}
				return startEnv(k)
			}
			if tc.args[1] == "--dev" {
				getenv = func(k string) string { return tc.env[k] }
			}
			c, err := parseConfig(tc.args, getenv, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if c.ui != tc.want {
				t.Errorf("ui: got %v, want %v", c.ui, tc.want)
			}
		})
	}
}
