package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/embedded"
)

// mcpTestServer is a gateway with MCP on mem, through a real listener.
func mcpTestServer(t *testing.T, mem *embedded.Backend) (*Server, *httptest.Server) {
	t.Helper()
	s, h := newTestHandler(t, Config{Backend: mem, MCP: true, History: 10})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return s, ts
}

// bearerTransport adds a bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession connects the SDK's client to ts's /mcp with token.
func mcpSession(t *testing.T, ts *httptest.Server, token string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint:   ts.URL + MCPPath,
		HTTPClient: &http.Client{Transport: bearerTransport{token}},
	}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls a tool that must succeed, and decodes its structured result.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	res := callToolRaw(t, cs, name, args)
	if res.IsError {
		t.Fatalf("%s: got a tool error %s, want success", name, resultText(res))
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("%s: decode %s: %v", name, data, err)
	}
	var text any
	if err := json.Unmarshal([]byte(resultText(res)), &text); err != nil || !reflect.DeepEqual(text, res.StructuredContent) {
		t.Errorf("%s: text content %s, want the structured content %s", name, resultText(res), data)
	}
}

func callToolRaw(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// toolProblem calls a tool that must fail, and returns its problem.
func toolProblem(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) problemBody {
	t.Helper()
	res := callToolRaw(t, cs, name, args)
	if !res.IsError {
		t.Fatalf("%s: got success %s, want a tool error", name, resultText(res))
	}
	var p problemBody
	if err := json.Unmarshal([]byte(resultText(res)), &p); err != nil {
		t.Fatalf("%s: the error %q is not a problem: %v", name, resultText(res), err)
	}
	if p.Type != "urn:lockgate:problem:"+string(p.Code) || p.Status == 0 || p.Detail == "" {
		t.Errorf("%s: problem %+v lacks its type, status or detail", name, p)
	}
	return p
}

// TestMCPLockCycle: a client lists the six tools, each with an input and
// an output schema, and acquires, inspects, watches and releases a lock
// through them, as the engine sees it.
func TestMCPLockCycle(t *testing.T) {
	mem := embedded.New(embedded.Options{History: 10})
	_, ts := mcpTestServer(t, mem)
	cs := mcpSession(t, ts, nsToken(t, "agent", "agents"))

	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if tool.InputSchema == nil || tool.OutputSchema == nil || tool.Description == "" {
			t.Errorf("tool %s: want an input schema, an output schema and a description", tool.Name)
		}
		if tool.Name == "acquire_lock" {
			// An optional argument is of its type, not "null or" it, as in
			// the API's schemas.
			data, _ := json.Marshal(tool.InputSchema)
			var in struct {
				Properties map[string]struct {
					Type    any      `json:"type"`
					Minimum *float64 `json:"minimum"`
				} `json:"properties"`
				Required []string `json:"required"`
			}
			if err := json.Unmarshal(data, &in); err != nil {
				t.Fatal(err)
			}
			ttl := in.Properties["ttl_ms"]
			if ttl.Type != "integer" || ttl.Minimum == nil || *ttl.Minimum != 1 || !slices.Equal(in.Required, []string{"namespace", "name"}) {
				t.Errorf("acquire_lock's input schema %s: want ttl_ms an integer from 1, namespace and name required", data)
			}
		}
	}
	slices.Sort(names)
	want := []string{"acquire_lock", "inspect_lock", "list_locks", "release_lock", "renew_lease", "wait_for_change"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools: got %v, want %v", names, want)
	}

	var g mcpGrant
	callTool(t, cs, "acquire_lock", map[string]any{"namespace": "agents", "name": "deploy", "ttl_ms": 60000, "owner": "bot"}, &g)
	if g.Token == "" || g.FencingToken <= 0 || g.Lock != "agents/deploy" || g.TTLMs != 60000 || !g.ExpiresAt.After(time.Now()) {
		t.Fatalf("grant: got %+v, want a token, a fencing token, agents/deploy for 60000 ms", g)
	}
	key := locks.Key{Namespace: "agents", Name: "deploy"}
	if info, err := mem.Inspect(t.Context(), key); err != nil || info.FencingToken != g.FencingToken || info.Owner != "bot" {
		t.Fatalf("engine: got %+v, %v; want held with fencing token %d by owner bot", info, err, g.FencingToken)
	}

	var l mcpLock
	callTool(t, cs, "inspect_lock", map[string]any{"namespace": "agents", "name": "deploy"}, &l)
	if !l.Held || l.FencingToken != g.FencingToken || l.Owner != "bot" || l.Subject == "" {
		t.Fatalf("inspect: got %+v, want held by bot with fencing token %d", l, g.FencingToken)
	}

	var list mcpList
	callTool(t, cs, "list_locks", map[string]any{"namespace": "agents"}, &list)
	if len(list.Locks) != 1 || list.Locks[0].Lock != "agents/deploy" || list.Locks[0].FencingToken != g.FencingToken {
		t.Fatalf("list: got %+v, want agents/deploy alone", list)
	}

	var lease mcpLease
	callTool(t, cs, "renew_lease", map[string]any{"namespace": "agents", "name": "deploy", "token": g.Token, "ttl_ms": 120000}, &lease)
	if lease.FencingToken != g.FencingToken || lease.TTLMs != 120000 {
		t.Fatalf("renew: got %+v, want fencing token %d for 120000 ms", lease, g.FencingToken)
	}

	var now mcpChange
	callTool(t, cs, "wait_for_change", map[string]any{"namespace": "agents", "name": "deploy"}, &now)
	if now.Index <= 0 || !now.Held || now.FencingToken != g.FencingToken {
		t.Fatalf("wait_for_change at once: got %+v, want the held lock and its index", now)
	}

	changed := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "wait_for_change",
			Arguments: map[string]any{"namespace": "agents", "name": "deploy", "index": now.Index, "wait_ms": 60000}})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		changed <- res
	}()

	var rel mcpRelease
	callTool(t, cs, "release_lock", map[string]any{"namespace": "agents", "name": "deploy", "token": g.Token}, &rel)
	if !rel.Released || rel.Holds != 0 {
		t.Fatalf("release: got %+v, want released", rel)
	}
	if _, err := mem.Inspect(t.Context(), key); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("engine after release: got %v, want not held", err)
	}

	select {
	case res := <-changed:
		var c mcpChange
		if res.IsError {
			t.Fatalf("wait_for_change: %s", resultText(res))
		}
		data, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(data, &c); err != nil {
			t.Fatal(err)
		}
		if !c.Changed || c.Held || c.Index <= now.Index {
			t.Fatalf("wait_for_change after release: got %+v, want changed, not held, index past %d", c, now.Index)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("wait_for_change did not answer within 30 s of the release")
	}

	callTool(t, cs, "inspect_lock", map[string]any{"namespace": "agents", "name": "deploy"}, &l)
	if l.Held || l.Lock != "agents/deploy" {
		t.Fatalf("inspect after release: got %+v, want not held", l)
	}
}

// TestMCPErrors: a tool that fails answers a tool error whose text is the
// API's problem, with the API's code, and never the token it was given.
func TestMCPErrors(t *testing.T) {
	mem := embedded.New(embedded.Options{})
	_, ts := mcpTestServer(t, mem)
	cs := mcpSession(t, ts, nsToken(t, "agent", "agents", "ops-*"))
	var g mcpGrant
	callTool(t, cs, "acquire_lock", map[string]any{"namespace": "agents", "name": "db"}, &g)
	const stranger = "c3RyYW5nZXItdG9rZW4tdmFsdWU"

	for _, tc := range []struct {
		name string
		tool string
		args map[string]any
		code ProblemCode
		in   string // in the detail
	}{
		{"held", "acquire_lock", map[string]any{"namespace": "agents", "name": "db"}, ProblemCodeLockHeld, "lease ends in"},
		{"not holder", "release_lock", map[string]any{"namespace": "agents", "name": "db", "token": stranger}, ProblemCodeNotHolder, ""},
		{"renew not holder", "renew_lease", map[string]any{"namespace": "agents", "name": "db", "token": stranger}, ProblemCodeNotHolder, ""},
		{"other namespace", "acquire_lock", map[string]any{"namespace": "billing", "name": "db"}, ProblemCodeForbidden, `"billing"`},
		{"list other namespace", "list_locks", map[string]any{"namespace": "billing"}, ProblemCodeForbidden, `"billing"`},
		{"inspect other namespace", "inspect_lock", map[string]any{"namespace": "billing", "name": "db"}, ProblemCodeForbidden, `"billing"`},
		{"watch other namespace", "wait_for_change", map[string]any{"namespace": "billing", "name": "db"}, ProblemCodeForbidden, `"billing"`},
		{"release other namespace", "release_lock", map[string]any{"namespace": "billing", "name": "db", "token": stranger}, ProblemCodeForbidden, `"billing"`},
		{"invalid namespace before forbidden", "acquire_lock", map[string]any{"namespace": "Bad/NS", "name": "db"}, ProblemCodeInvalidRequest, "namespace"},
		{"unknown argument", "acquire_lock", map[string]any{"namespace": "agents", "name": "x", "ttl": 5}, ProblemCodeInvalidRequest, `unknown argument "ttl"`},
		{"missing argument", "release_lock", map[string]any{"namespace": "agents", "name": "db"}, ProblemCodeInvalidRequest, `missing argument "token"`},
		{"wrong type", "acquire_lock", map[string]any{"namespace": "agents", "name": "x", "ttl_ms": "long"}, ProblemCodeInvalidRequest, `"ttl_ms" must be an integer`},
		{"token type", "release_lock", map[string]any{"namespace": "agents", "name": "db", "token": 12}, ProblemCodeInvalidRequest, `"token" must be a string`},
		{"ttl bound", "acquire_lock", map[string]any{"namespace": "agents", "name": "x", "ttl_ms": 0}, ProblemCodeInvalidRequest, "ttl_ms must be between 1"},
		{"wait bound", "acquire_lock", map[string]any{"namespace": "agents", "name": "x", "wait_ms": 999999999}, ProblemCodeInvalidRequest, "--max-wait"},
		{"owner bound", "acquire_lock", map[string]any{"namespace": "agents", "name": "x", "owner": strings.Repeat("o", locks.MaxOwnerLen+1)}, ProblemCodeInvalidRequest, "owner"},
		{"empty token", "release_lock", map[string]any{"namespace": "agents", "name": "db", "token": ""}, ProblemCodeInvalidRequest, "token"},
		{"limit bound", "list_locks", map[string]any{"namespace": "agents", "limit": 1001}, ProblemCodeInvalidRequest, "limit"},
		{"bad cursor", "list_locks", map[string]any{"namespace": "agents", "cursor": "nonsense"}, ProblemCodeInvalidRequest, "cursor"},
		{"watch wait bound", "wait_for_change", map[string]any{"namespace": "agents", "name": "db", "wait_ms": 0}, ProblemCodeInvalidRequest, "wait_ms"},
		{"no history", "wait_for_change", map[string]any{"namespace": "agents", "name": "db"}, ProblemCodeInvalidRequest, "history"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := callToolRaw(t, cs, tc.tool, tc.args)
			if strings.Contains(resultText(res), stranger) || strings.Contains(resultText(res), g.Token) {
				t.Errorf("the error %s shows a token", resultText(res))
			}
			p := toolProblem(t, cs, tc.tool, tc.args)
			if p.Code != tc.code || !strings.Contains(p.Detail, tc.in) {
				t.Fatalf("got %s %q, want %s with %q in the detail", p.Code, p.Detail, tc.code, tc.in)
			}
		})
	}
	// Nothing was taken in a namespace the token does not grant.
	if _, err := mem.Inspect(t.Context(), locks.Key{Namespace: "billing", Name: "db"}); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("billing/db: got %v, want not held", err)
	}
}

// TestMCPNeedsToken: /mcp admits a request as the API does: no token is a
// 401 problem, and a client without one cannot connect. GET, a stateful
// session's stream, is not served.
func TestMCPNeedsToken(t *testing.T) {
	_, ts := mcpTestServer(t, embedded.New(embedded.Options{}))
	resp, err := http.Post(ts.URL+MCPPath, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Content-Type") != "application/problem+json" ||
		!strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("POST without a token: got %d %q %q, want a 401 problem with WWW-Authenticate: Bearer",
			resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("WWW-Authenticate"))
	}

	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	if cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: ts.URL + MCPPath, MaxRetries: -1}, nil); err == nil {
		cs.Close()
		t.Fatal("a client without a token connected")
	}

	req, _ := http.NewRequestWithContext(t.Context(), "GET", ts.URL+MCPPath, nil)
	req.Header.Set("Authorization", "Bearer "+testToken(t))
	req.Header.Set("Accept", "text/event-stream")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Fatalf("GET: got %d, Allow %q; want 405, Allow POST", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// TestMCPOff: without Config.MCP there is no /mcp.
func TestMCPOff(t *testing.T) {
	_, ts := newTestServer(t, embedded.New(embedded.Options{}))
	req, _ := http.NewRequestWithContext(t.Context(), "POST", ts.URL+MCPPath, strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+testToken(t))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("POST /mcp: got %d, want 404", resp.StatusCode)
	}
}

// TestMCPCallerLeaves: a caller that leaves while acquire_lock waits stops
// waiting, as an HTTP caller does, instead of waiting out its wait_ms; and
// the lock, once free, is nobody's.
func TestMCPCallerLeaves(t *testing.T) {
	mem := embedded.New(embedded.Options{})
	s, ts := mcpTestServer(t, mem)
	key := locks.Key{Namespace: "agents", Name: "db"}
	held, err := mem.Acquire(t.Context(), key, locks.AcquireRequest{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	cs := mcpSession(t, ts, testToken(t))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "acquire_lock",
			Arguments: map[string]any{"namespace": "agents", "name": "db", "wait_ms": 60000}})
		done <- err
	}()
	waitFor(t, func() bool { return gaugeValue(t, s) == 1 })
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled call returned no error")
	}
	waitFor(t, func() bool { return gaugeValue(t, s) == 0 })
	if _, err := mem.Release(t.Context(), key, held.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Inspect(t.Context(), key); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("after the holder released: got %v, want free (the caller left)", err)
	}
}

// TestMCPBoundsAgreeWithSpec: the tools bound what the spec bounds as the
// spec does.
func TestMCPBoundsAgreeWithSpec(t *testing.T) {
	spec, err := GetSwagger()
	if err != nil {
		t.Fatal(err)
	}
	param := func(name string) *openapi3.Schema { return spec.Components.Parameters[name].Value.Schema.Value }
	if got := param("LockToken").MaxLength; got == nil || *got != mcpTokenMaxLen {
		t.Errorf("LockToken maxLength %v, mcpTokenMaxLen %d", got, mcpTokenMaxLen)
	}
	if got := param("Cursor").MaxLength; got == nil || *got != mcpCursorMaxLen {
		t.Errorf("Cursor maxLength %v, mcpCursorMaxLen %d", got, mcpCursorMaxLen)
	}
	if got := param("Limit").Max; got == nil || *got != mcpListMax {
		t.Errorf("Limit maximum %v, mcpListMax %d", got, mcpListMax)
	}
	if got := spec.Components.Schemas["AcquireRequest"].Value.Properties["owner"].Value.MaxLength; got == nil || *got != locks.MaxOwnerLen {
		t.Errorf("owner maxLength %v, locks.MaxOwnerLen %d", got, locks.MaxOwnerLen)
	}
}
