package app

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestMCPFlag: the gateway serves /mcp unless --mcp=false (or
// LOCKGATE_MCP=false) says not to.
func TestMCPFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want int // POST /mcp without a token
	}{
		{"default", nil, nil, http.StatusUnauthorized},
		{"--mcp=false", []string{"--mcp=false"}, nil, http.StatusNotFound},
		{"LOCKGATE_MCP", nil, map[string]string{"LOCKGATE_MCP": "false"}, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string {
				if v, ok := tc.env[k]; ok {
					return v
				}
				return startEnv(k)
			}
			g, err := Start(t.Context(), append(append([]string{}, startArgs...), tc.args...), getenv, io.Discard)
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			defer g.Stop()
			resp, err := http.Post(g.URL+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("POST /mcp: got %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}
