package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpConnect connects the MCP SDK's client to gw's /mcp with tok.
func mcpConnect(t *testing.T, gw *gateway, tok string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint:   gw.URL + "/mcp",
		HTTPClient: &http.Client{Transport: headerTransport{"Authorization": "Bearer " + tok}},
	}, nil)
	if err != nil {
		t.Fatalf("connect to /mcp: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// mcpCall calls a tool; ok says whether it succeeded, and v receives its
// result, or its problem when it failed.
func mcpCall(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, v any) (ok bool) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if err := json.Unmarshal([]byte(text.String()), v); err != nil {
		t.Fatalf("%s: decode %s: %v", tool, text.String(), err)
	}
	return !res.IsError
}

// TestMCP drives the gateway's MCP tools with the protocol's own client,
// on each backend: the six tools are listed; a lock is acquired, inspected,
// watched, renewed and released through them; a second agent meets the
// API's problems (lock_held, not_holder); a namespace the token does not
// grant is refused with forbidden; and no token reaches the logs.
func TestMCP(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, b.args(t)...)
		tok := token(t, jwt.MapClaims{"sub": "agent-1", "ns": []string{"agents"}})
		cs := mcpConnect(t, gw, tok)

		tools, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range tools.Tools {
			names = append(names, tool.Name)
		}
		slices.Sort(names)
		if want := []string{"acquire_lock", "inspect_lock", "list_locks", "release_lock", "renew_lease", "wait_for_change"}; !slices.Equal(names, want) {
			t.Fatalf("tools: got %v, want %v", names, want)
		}

		lockArgs := map[string]any{"namespace": "agents", "name": "migrate"}
		var g grant
		if !mcpCall(t, cs, "acquire_lock", map[string]any{"namespace": "agents", "name": "migrate", "ttl_ms": 60000, "owner": "agent one"}, &g) {
			t.Fatalf("acquire_lock failed: %+v", g)
		}
		if g.Token == "" || g.FencingToken <= 0 || g.Lock != "agents/migrate" || !g.ExpiresAt.After(time.Now()) {
			t.Fatalf("acquire_lock: got %+v, want a token and a fencing token of agents/migrate", g)
		}
		// The API sees the MCP grant as its own.
		var info struct {
			Held         bool   `json:"held"`
			FencingToken int64  `json:"fencing_token"`
			Owner        string `json:"owner"`
		}
		wantJSON(t, call(t, "GET", gw.URL+"/locks/agents/migrate", "", bearer(tok)...), http.StatusOK, &info)
		if !info.Held || info.FencingToken != g.FencingToken || info.Owner != "agent one" {
			t.Fatalf("GET of the lock: got %+v, want held with fencing token %d by agent one", info, g.FencingToken)
		}

		var inspected struct {
			Held         bool   `json:"held"`
			FencingToken int64  `json:"fencing_token"`
			Subject      string `json:"subject"`
		}
		if !mcpCall(t, cs, "inspect_lock", lockArgs, &inspected) || !inspected.Held || inspected.FencingToken != g.FencingToken || inspected.Subject != "agent-1" {
			t.Fatalf("inspect_lock: got %+v, want held by agent-1 with fencing token %d", inspected, g.FencingToken)
		}

		var change struct {
			Index   int64 `json:"index"`
			Held    bool  `json:"held"`
			Changed bool  `json:"changed"`
		}
		if !mcpCall(t, cs, "wait_for_change", lockArgs, &change) || !change.Held || change.Index <= 0 {
			t.Fatalf("wait_for_change: got %+v, want the held lock and its index", change)
		}

		// A second agent, with a token of its own.
		other := mcpConnect(t, gw, token(t, jwt.MapClaims{"sub": "agent-2", "ns": []string{"agents"}}))
		var p problem
		if mcpCall(t, other, "acquire_lock", lockArgs, &p) || p.Code != "lock_held" || p.Status != http.StatusConflict || p.RetryAfterMs == nil {
			t.Fatalf("second acquire_lock: got %+v, want lock_held with retry_after_ms", p)
		}
		p = problem{}
		if mcpCall(t, other, "release_lock", map[string]any{"namespace": "agents", "name": "migrate", "token": "bm90LXRoZS10b2tlbi1hdC1hbGw"}, &p) ||
			p.Code != "not_holder" || p.Reason != "unknown" {
			t.Fatalf("release_lock with another token: got %+v, want not_holder, reason unknown", p)
		}

		var lease struct {
			FencingToken int64 `json:"fencing_token"`
			TTLMs        int64 `json:"ttl_ms"`
		}
		if !mcpCall(t, cs, "renew_lease", map[string]any{"namespace": "agents", "name": "migrate", "token": g.Token, "ttl_ms": 90000}, &lease) ||
			lease.FencingToken != g.FencingToken || lease.TTLMs != 90000 {
			t.Fatalf("renew_lease: got %+v, want fencing token %d for 90000 ms", lease, g.FencingToken)
		}

		var released struct {
			Released bool `json:"released"`
		}
		if !mcpCall(t, cs, "release_lock", map[string]any{"namespace": "agents", "name": "migrate", "token": g.Token}, &released) || !released.Released {
			t.Fatalf("release_lock: got %+v, want released", released)
		}
		call404 := call(t, "GET", gw.URL+"/locks/agents/migrate", "", bearer(tok)...)
		wantProblem(t, call404, http.StatusNotFound, "not_held")

		var after struct {
			Index   int64 `json:"index"`
			Held    bool  `json:"held"`
			Changed bool  `json:"changed"`
		}
		// The renewal is a change after change.Index too: the gateway may
		// answer it first, when the release's hint has not reached it yet;
		// then the release comes from the renewal's index.
		from := change.Index
		for range 2 {
			if !mcpCall(t, cs, "wait_for_change", map[string]any{"namespace": "agents", "name": "migrate", "index": from, "wait_ms": 30000}, &after) ||
				!after.Changed || after.Index <= from {
				t.Fatalf("wait_for_change from %d: got %+v, want changed, past that index", from, after)
			}
			if !after.Held {
				break
			}
			from = after.Index
		}
		if after.Held {
			t.Fatalf("wait_for_change after the renewal and the release: got %+v, want free", after)
		}

		// Outside the token's namespaces: forbidden, and nothing taken.
		for _, tc := range []struct {
			tool string
			args map[string]any
		}{
			{"acquire_lock", map[string]any{"namespace": "payroll", "name": "migrate"}},
			{"inspect_lock", map[string]any{"namespace": "payroll", "name": "migrate"}},
			{"list_locks", map[string]any{"namespace": "payroll"}},
		} {
			p = problem{}
			if mcpCall(t, cs, tc.tool, tc.args, &p) || p.Code != "forbidden" || p.Status != http.StatusForbidden || !strings.Contains(p.Detail, `"payroll"`) {
				t.Fatalf("%s in payroll: got %+v, want forbidden naming payroll", tc.tool, p)
			}
		}
		wantProblem(t, call(t, "GET", gw.URL+"/locks/payroll/migrate", "", bearer(token(t, nil))...), http.StatusNotFound, "not_held")

		if logs := gw.logs.String(); strings.Contains(logs, g.Token) || strings.Contains(logs, tok) || !strings.Contains(logs, `"path":"/mcp"`) {
			t.Fatalf("logs: want the access log of /mcp and no token; logs:\n%s", logs)
		}
	})
}

// headerTransport adds headers to every request.
type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPReadmeConfig: the client configuration of the README's "Locks
// for AI agents", its URL pointed at a gateway and its ${LOCKGATE_TOKEN}
// expanded as clients expand it, connects and takes a lock.
func TestMCPReadmeConfig(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Locks for AI agents\n")
	if !ok {
		t.Fatal(`the README has no section "Locks for AI agents"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```json\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal(`the README's "Locks for AI agents" has no json block`)
	}
	var cfg struct {
		MCPServers map[string]struct {
			Type    string            `json:"type"`
			URL     string            `json:"url"`
			Headers map[string]string `json:"headers"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(block), &cfg); err != nil {
		t.Fatalf("the README's MCP configuration is not JSON: %v\n%s", err, block)
	}
	server, ok := cfg.MCPServers["lockgate"]
	if !ok || server.Type != "http" || !strings.HasSuffix(server.URL, "/mcp") {
		t.Fatalf("the README's MCP configuration: got %+v, want a server lockgate of type http at .../mcp", cfg)
	}

	gw := startGateway(t)
	tok := token(t, jwt.MapClaims{"sub": "readme-agent", "ns": []string{"agents"}})
	headers := headerTransport{}
	for k, v := range server.Headers {
		headers[k] = os.Expand(v, func(name string) string {
			if name != "LOCKGATE_TOKEN" {
				t.Fatalf("the README's configuration names ${%s}; want only ${LOCKGATE_TOKEN}", name)
			}
			return tok
		})
	}
	u, err := url.Parse(server.URL)
	if err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "readme", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint:   gw.URL + u.Path,
		HTTPClient: &http.Client{Transport: headers},
	}, nil)
	if err != nil {
		t.Fatalf("connect with the README's configuration: %v", err)
	}
	defer cs.Close()
	var g grant
	if !mcpCall(t, cs, "acquire_lock", map[string]any{"namespace": "agents", "name": "readme"}, &g) || g.Token == "" {
		t.Fatalf("acquire_lock with the README's configuration: got %+v", g)
	}
}
