package handlers

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/embedded"
)

// TestMCPHolds: acquire_lock takes max_hold_ms and min_hold_ms, declared
// in its input schema with the API's minimums, and passes them on: a
// capped grant (and its renewal) states hold_until, and a min hold keeps
// the lock after release_lock.
func TestMCPHolds(t *testing.T) {
	mem := embedded.New(embedded.Options{})
	_, ts := mcpTestServer(t, mem)
	cs := mcpSession(t, ts, nsToken(t, "agent", "agents"))

	args := toolArgs(t, cs, "acquire_lock")
	for name, minimum := range map[string]float64{"max_hold_ms": 1, "min_hold_ms": 0} {
		p, ok := args[name]
		if !ok || p.Type != "integer" || p.Minimum == nil || *p.Minimum != minimum {
			t.Errorf("acquire_lock's %s: got %+v (declared %v), want an integer of at least %v", name, p, ok, minimum)
		}
	}

	var g struct {
		Token     string     `json:"token"`
		ExpiresAt time.Time  `json:"expires_at"`
		HoldUntil *time.Time `json:"hold_until"`
	}
	start := time.Now()
	callTool(t, cs, "acquire_lock", map[string]any{"namespace": "agents", "name": "capped", "ttl_ms": 1000, "max_hold_ms": 3000}, &g)
	answered := time.Now()
	if g.HoldUntil == nil || g.HoldUntil.After(answered.Add(3*time.Second+time.Millisecond)) || g.HoldUntil.Before(start.Add(3*time.Second-time.Millisecond)) {
		t.Fatalf("acquire_lock with max_hold_ms 3000: hold_until %v, want about 3s after %v", g.HoldUntil, start)
	}
	var r struct {
		ExpiresAt time.Time  `json:"expires_at"`
		HoldUntil *time.Time `json:"hold_until"`
	}
	callTool(t, cs, "renew_lease", map[string]any{"namespace": "agents", "name": "capped", "token": g.Token, "ttl_ms": 60000}, &r)
	if r.HoldUntil == nil || !r.ExpiresAt.Equal(*r.HoldUntil) {
		t.Fatalf("renew_lease for 60s under a 3s cap: %+v, want its lease up to hold_until", r)
	}
	if p := toolProblem(t, cs, "acquire_lock", map[string]any{"namespace": "agents", "name": "x", "ttl_ms": 5000, "max_hold_ms": 4999}); p.Code != "invalid_request" {
		t.Errorf("max_hold_ms below ttl_ms: code %q, want invalid_request", p.Code)
	}

	g.HoldUntil = nil // a field the answer leaves out keeps its value
	callTool(t, cs, "acquire_lock", map[string]any{"namespace": "agents", "name": "rests", "ttl_ms": 60000, "min_hold_ms": 60000}, &g)
	if g.HoldUntil != nil {
		t.Fatalf("a grant without a cap stated hold_until %v", g.HoldUntil)
	}
	var rel struct{ Released bool }
	callTool(t, cs, "release_lock", map[string]any{"namespace": "agents", "name": "rests", "token": g.Token}, &rel)
	key := locks.Key{Namespace: "agents", Name: "rests"}
	if _, err := mem.Acquire(context.Background(), key, locks.AcquireRequest{TTL: time.Second}); err == nil || locks.ErrorCode(err) != locks.CodeHeld {
		t.Fatalf("acquire after release_lock inside the min hold: got %v, want lock_held", err)
	}
	if p := toolProblem(t, cs, "acquire_lock", map[string]any{"namespace": "agents", "name": "rests"}); p.Code != "lock_held" {
		t.Errorf("acquire_lock inside the min hold: code %q, want lock_held", p.Code)
	}
}

// TestMCPPriority: acquire_lock's priority is the API's: declared 0 to 9,
// carried to the waiter's place in the queue, and refused out of range.
func TestMCPPriority(t *testing.T) {
	mem := embedded.New(embedded.Options{})
	_, ts := mcpTestServer(t, mem)
	cs := mcpSession(t, ts, nsToken(t, "agent", "agents"))
	if p, ok := toolArgs(t, cs, "acquire_lock")["priority"]; !ok || p.Type != "integer" || p.Minimum == nil || *p.Minimum != 0 ||
		p.Maximum == nil || *p.Maximum != locks.MaxPriority {
		t.Errorf("acquire_lock's priority: got %+v (declared %v), want an integer from 0 to %d", p, ok, locks.MaxPriority)
	}
	ctx := context.Background()
	key := locks.Key{Namespace: "agents", Name: "queued"}
	held, err := mem.Acquire(ctx, key, locks.AcquireRequest{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "acquire_lock",
			Arguments: map[string]any{"namespace": "agents", "name": "queued", "wait_ms": 30000, "priority": 7}})
		got <- res // nil when the call failed
	}()
	for {
		info, err := mem.Inspect(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case res := <-got:
			t.Fatalf("acquire_lock with priority 7 answered before it waited: %v", res)
		default:
		}
		if info.Waiters == 1 {
			if !slices.Equal(info.QueuePriorities, []int{7}) {
				t.Fatalf("the queue after acquire_lock with priority 7: priorities %v, want [7]", info.QueuePriorities)
			}
			break
		}
		time.Sleep(5 * time.Millisecond) // polling for the waiter to queue
	}
	if _, err := mem.Release(ctx, key, held.Token); err != nil {
		t.Fatal(err)
	}
	if res := <-got; res == nil || res.IsError {
		t.Fatalf("the waiting acquire_lock: got %v, want its grant", res)
	}
	if p := toolProblem(t, cs, "acquire_lock", map[string]any{"namespace": "agents", "name": "x", "wait_ms": 10, "priority": 10}); p.Code == "" {
		t.Errorf("priority 10: got %+v, want a refusal", p)
	}
}

// toolArg is one argument of a tool's input schema, as the tests read it.
type toolArg struct {
	Type    any      `json:"type"`
	Minimum *float64 `json:"minimum"`
	Maximum *float64 `json:"maximum"`
}

// toolArgs returns the arguments of tool name, as the server lists it.
func toolArgs(t *testing.T, cs *mcp.ClientSession, name string) map[string]toolArg {
	t.Helper()
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name != name {
			continue
		}
		data, _ := json.Marshal(tool.InputSchema)
		var in struct {
			Properties map[string]toolArg `json:"properties"`
		}
		if err := json.Unmarshal(data, &in); err != nil {
			t.Fatal(err)
		}
		return in.Properties
	}
	t.Fatalf("no tool %s listed", name)
	return nil
}
