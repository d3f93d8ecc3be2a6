package e2e

import (
	"bytes"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/lockgate/lockgate/internal/redistest"
)

// collector is an OTLP/HTTP endpoint that keeps what it receives.
type collector struct {
	mu     sync.Mutex
	paths  []string
	bodies bytes.Buffer
}

func startCollector(t *testing.T) (*collector, string) {
	c := &collector{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.paths = append(c.paths, r.URL.Path)
		c.bodies.Write(body)
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK) // an empty ExportTraceServiceResponse
	}))
	t.Cleanup(srv.Close)
	return c, srv.URL
}

func (c *collector) received() ([]string, []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.paths...), bytes.Clone(c.bodies.Bytes())
}

// TestTracesExportedWhenAsked: with OTEL_EXPORTER_OTLP_ENDPOINT set, the
// gateway exports a span per request, named after its route, and one per
// engine call beneath it, over OTLP/HTTP; it joins the caller's trace
// (traceparent); probes are not traced; no span carries a JWT or an owner
// token.
func TestTracesExportedWhenAsked(t *testing.T) {
	t.Parallel()
	for _, b := range []backend{backends[0], backends[1]} {
		t.Run(b.name, func(t *testing.T) {
			col, endpoint := startCollector(t)
			gw := startGatewayEnv(t, map[string]string{"LOCKGATE_JWT_SECRET": secret, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}, b.args(t)...)
			jwt := token(t, nil)
			auth := bearer(jwt)
			url := gw.URL + "/locks/traced/x"
			const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
			var g grant
			wantJSON(t, call(t, "POST", url, `{"ttl_ms":60000}`,
				with(auth, []string{"traceparent", "00-" + traceID + "-00f067aa0ba902b7-01"})...), http.StatusCreated, &g)
			wantJSON(t, call(t, "PUT", url+"/lease", "", with(auth, []string{"Lock-Token", g.Token})...), http.StatusOK, &struct{}{})
			wantJSON(t, call(t, "GET", gw.URL+"/locks/traced", "", auth...), http.StatusOK, &struct{}{})
			if r := call(t, "DELETE", url, "", with(auth, []string{"Lock-Token", g.Token})...); r.status != http.StatusNoContent {
				t.Fatalf("release: got %d, want 204", r.status)
			}
			call(t, "GET", gw.URL+"/healthz", "")
			if err := gw.stop(); err != nil { // flushes the spans
				t.Fatal(err)
			}

			paths, got := col.received()
			if len(paths) == 0 {
				t.Fatal("the collector received nothing")
			}
			for _, p := range paths {
				if p != "/v1/traces" {
					t.Errorf("got an export to %s, want /v1/traces", p)
				}
			}
			for _, want := range []string{"POST /locks/{namespace}/{name}", "PUT /locks/{namespace}/{name}/lease",
				"GET /locks/{namespace}", "DELETE /locks/{namespace}/{name}", "lock.acquire", "lock.renew", "lock.list",
				"lock.release", "lockgate"} {
				if !bytes.Contains(got, []byte(want)) {
					t.Errorf("no exported span names %q", want)
				}
			}
			if id, _ := hex.DecodeString(traceID); !bytes.Contains(got, id) {
				t.Errorf("the acquire's span is not in the caller's trace %s", traceID)
			}
			for _, secret := range []string{jwt, strings.Split(jwt, ".")[2], g.Token, "Bearer", "/healthz"} {
				if bytes.Contains(got, []byte(secret)) {
					t.Errorf("the exported spans carry %q", secret)
				}
			}
		})
	}
}

// TestNoTracesUnlessAsked: OTEL_TRACES_EXPORTER=none wins over an
// endpoint, and nothing reaches it.
func TestNoTracesUnlessAsked(t *testing.T) {
	t.Parallel()
	col, endpoint := startCollector(t)
	gw := startGatewayEnv(t, map[string]string{"LOCKGATE_JWT_SECRET": secret,
		"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_TRACES_EXPORTER": "none"}, "--redis-url", redistest.Start(t).URL())
	acquire(t, gw.URL+"/locks/traced/y", "")
	if err := gw.stop(); err != nil {
		t.Fatal(err)
	}
	if paths, _ := col.received(); len(paths) != 0 {
		t.Fatalf("got %d exports, want none", len(paths))
	}
}

// TestTicketsTraced: a ticket's calls into the engine are traced as the
// lock's are, and no span carries the ticket token.
func TestTicketsTraced(t *testing.T) {
	t.Parallel()
	col, endpoint := startCollector(t)
	gw := startGatewayEnv(t, map[string]string{"LOCKGATE_JWT_SECRET": secret, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint},
		"--redis-url", redistest.Start(t).URL())
	auth := bearer(token(t, nil))
	url := gw.URL + "/locks/traced/ticket"
	holder := acquire(t, url, `{"ttl_ms":60000}`)
	tk := openTicket(t, url, `{"ttl_ms":60000,"wait_ms":30000}`, auth)
	if r := pollTicket(t, gw.URL, tk, auth); r.status != http.StatusOK {
		t.Fatalf("poll: got %d %s, want 200 (queued)", r.status, r.body)
	}
	if r := call(t, "DELETE", gw.URL+tk.location, "", with(auth, []string{"Ticket-Token", tk.TicketToken})...); r.status != http.StatusNoContent {
		t.Fatalf("close: got %d %s, want 204", r.status, r.body)
	}
	if r := call(t, "DELETE", url, "", with(auth, []string{"Lock-Token", holder.Token})...); r.status != http.StatusNoContent {
		t.Fatalf("release: got %d, want 204", r.status)
	}
	if err := gw.stop(); err != nil { // flushes the spans
		t.Fatal(err)
	}
	_, got := col.received()
	for _, want := range []string{"ticket.open", "ticket.poll", "ticket.close"} {
		if !bytes.Contains(got, []byte(want)) {
			t.Errorf("no exported span names %q", want)
		}
	}
	if bytes.Contains(got, []byte(tk.TicketToken)) {
		t.Error("the exported spans carry the ticket token")
	}
}
