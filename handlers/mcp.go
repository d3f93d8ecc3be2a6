package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/lockgate/lockgate/auth"
	"github.com/lockgate/lockgate/internal/jsonkeys"
	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/middleware"
)

// MCPPath is where the gateway serves the Model Context Protocol (Config.MCP).
const MCPPath = "/mcp"

// mcpInstructions is what an MCP client tells its model of the server as a
// whole; each tool describes itself.
const mcpInstructions = `Distributed locks (leases) shared with other agents and programs.
acquire_lock returns a token and a fencing_token: keep the token to renew_lease or release_lock,
and pass the fencing_token to whatever the lock protects. A lease ends on its own after ttl_ms
unless renewed; release the lock as soon as you are done. Errors carry a stable code
(lock_held, not_holder, forbidden, invalid_request, ...) in a JSON problem.`

// mcpHandler serves MCP's Streamable HTTP transport at MCPPath: the lock
// calls of the API as tools (mcp_tools.go), for AI agents.
//
// It admits each request as the gate admits the API's (admit: a bearer
// token, the subject's rate), and every tool checks the namespace it
// touches with the same check (grants), then makes the call the REST
// handler makes (the Server's methods), so that limits, metrics and the
// drain apply alike, and its errors are the same problems.
//
// The transport is stateless: each POST is a whole exchange, with no
// session kept in the gateway between them, so any gateway behind a load
// balancer can answer any call, nothing in memory ties a client to one
// process, and GET and DELETE (a session's stream, a session's end) are
// not served: 405, which clients read as "no stream offered". Answers are
// JSON, not event streams: the tools send no notifications, and proxies
// pass JSON through as they pass the API's.
func (s *Server) mcpHandler(g *gate, version string) http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "lockgate", Title: "lockgate distributed locks", Version: version},
		&mcp.ServerOptions{Instructions: mcpInstructions})
	s.addMCPTools(srv)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless:    true,
		JSONResponse: true,
		// The API's limit; a chunked body over it is the SDK's 413.
		MaxRequestBodyBytes: MaxBodyBytes,
		// Its guard against DNS rebinding refuses a loopback listener's
		// requests whose Host is not loopback, which is every request
		// through a reverse proxy on the same host. A rebound page gains
		// nothing here: every call needs a bearer token, which a browser
		// does not attach for another origin.
		DisableLocalhostProtection: true,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, _, err := g.admit(r)
		if err != nil {
			writeError(w, r, err)
			return
		}
		if r.ContentLength > MaxBodyBytes {
			writeError(w, r, errTooLarge)
			return
		}
		// The SDK hands tools a context that is not cancelled when the
		// request's is (it is a session's, and sessions may outlive
		// requests); in stateless mode the request is the whole call, so
		// the tools end with it (mcpCall).
		r = r.WithContext(context.WithValue(r.Context(), mcpRequestKey{}, r.Context()))
		h.ServeHTTP(w, r)
	})
}

// mcpRequestKey is the context key of the HTTP request's own context,
// under which mcpHandler passes it to the tools.
type mcpRequestKey struct{}

// mcpCall is the context of one tool call: ctx, cancelled when the HTTP
// request that carries the call ends (the caller left), so that a wait
// ends and a grant nobody will receive is released, as for the API.
func mcpCall(ctx context.Context) (context.Context, context.CancelFunc) {
	req, ok := ctx.Value(mcpRequestKey{}).(context.Context)
	if !ok {
		return context.WithCancel(ctx)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(req, func() { cancel(context.Cause(req)) })
	return ctx, func() {
		stop()
		cancel(nil)
	}
}

// addMCPTool adds a tool whose arguments are In and whose result is Out,
// both described by schemas inferred from their types (and their fields'
// jsonschema tags), then adjusted by describe. Unlike the SDK's typed
// tools, every error, of the arguments too, is a tool error that carries
// the API's problem (mcpError).
func addMCPTool[In, Out any](srv *mcp.Server, t *mcp.Tool, describe func(in *jsonschema.Schema), call func(ctx context.Context, in In) (Out, error)) {
	in, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: %v", t.Name, err)) // a type of this file: a test finds it
	}
	out, err := jsonschema.For[Out](nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: %v", t.Name, err))
	}
	describeArgs(in)
	if describe != nil {
		describe(in)
	}
	t.InputSchema, t.OutputSchema = in, out
	srv.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ctx, cancel := mcpCall(ctx)
		defer cancel()
		args, err := decodeArgs[In](req.Params.Arguments, in)
		var res Out
		if err == nil {
			res, err = call(ctx, args)
		}
		if err != nil {
			return mcpError(ctx, t.Name, err), nil
		}
		data, err := json.Marshal(res)
		if err != nil {
			return nil, fmt.Errorf("encode the result of %s: %w", t.Name, err)
		}
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: string(data)}},
			StructuredContent: json.RawMessage(data),
		}, nil
	})
}

// decodeArgs reads a tool's arguments, a JSON object, as the gate reads a
// body: a key twice, a key the schema does not name, a value of the wrong
// type or a required one missing is an invalid_request, worded by the
// argument's name, never its value (a token may be one).
func decodeArgs[In any](raw json.RawMessage, schema *jsonschema.Schema) (In, error) {
	var in In
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = json.RawMessage("{}")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return in, invalid("the arguments must be one JSON object")
	}
	if key, dup := jsonkeys.Duplicate(raw); dup {
		return in, invalid("argument " + quoteShort(key) + " appears more than once")
	}
	for k := range fields {
		if _, ok := schema.Properties[k]; !ok {
			return in, invalid("unknown argument " + quoteShort(k) + "; see the tool's input schema")
		}
	}
	for _, k := range schema.Required {
		if _, ok := fields[k]; !ok {
			return in, invalid("missing argument " + quoteShort(k))
		}
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && schema.Properties[te.Field] != nil {
			return in, invalid("argument " + quoteShort(te.Field) + " must be " + article(schema.Properties[te.Field].Type))
		}
		return in, invalid("the arguments do not match the tool's input schema")
	}
	return in, nil
}

// article is a JSON Schema type with its article: "an integer".
func article(typ string) string {
	switch typ {
	case "integer", "object", "array":
		return "an " + typ
	case "":
		return "of the schema's type"
	}
	return "a " + typ
}

// mcpError is a failed call's answer: a tool error (isError) whose text is
// the API's problem for err (problemOf), as JSON, so that a model reads its
// detail and a program its code. The problem is not the structured
// content: clients check that against the tool's output schema.
func mcpError(ctx context.Context, tool string, err error) *mcp.CallToolResult {
	p, body := problemOf(err)
	if req, ok := ctx.Value(mcpRequestKey{}).(context.Context); !ok || !(errors.Is(err, context.Canceled) && req.Err() != nil) {
		// A caller that left is nobody's error (see clientLeft).
		log := zerolog.Ctx(ctx).With().Str("tool", tool).Logger()
		logProblem(log.WithContext(ctx), p, err)
	}
	data, _ := json.Marshal(body)
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(data)}}}
}

// mcpKey is the lock a tool names, if the caller's token grants its
// namespace: an invalid key is an invalid_request before the namespace is
// checked, as in the API (see gate).
func mcpKey(ctx context.Context, namespace, name string) (locks.Key, error) {
	key, err := locks.ParseKey(namespace, name)
	if err != nil {
		return key, err
	}
	return key, mcpGrants(ctx, namespace)
}

// mcpGrants checks that the caller's token grants namespace (grants).
func mcpGrants(ctx context.Context, namespace string) error {
	claims, ok := middleware.ClaimsFromContext(ctx)
	if !ok {
		return fmt.Errorf("mcp: no claims in the call's context: %w", auth.ErrUnauthenticated)
	}
	return grants(claims, namespace)
}
