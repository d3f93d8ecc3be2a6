package middleware

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"
	"github.com/rs/zerolog/hlog"

	"github.com/lockgate/lockgate/auth"
)

// syncBuffer is a log sink the test reads after the server wrote to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for l := range strings.SplitSeq(strings.TrimSpace(s.b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func TestRequests(t *testing.T) {
	for name, tc := range map[string]struct {
		level     zerolog.Level
		status    int
		quiet     bool // the handler logs nothing itself: the access line alone hooks the logger
		wantLines int  // the handler's own line (when at warn or above) and the access line
	}{
		"info, 201, quiet": {level: zerolog.InfoLevel, status: http.StatusCreated, quiet: true, wantLines: 1},
		"warn, 503, quiet": {level: zerolog.WarnLevel, status: http.StatusServiceUnavailable, quiet: true, wantLines: 1},
		"info, 201":        {level: zerolog.InfoLevel, status: http.StatusCreated, wantLines: 2},
		"warn, 201":        {level: zerolog.WarnLevel, status: http.StatusCreated, wantLines: 1},
		"warn, 503":        {level: zerolog.WarnLevel, status: http.StatusServiceUnavailable, wantLines: 2},
		"error, 503":       {level: zerolog.ErrorLevel, status: http.StatusServiceUnavailable, wantLines: 0},
	} {
		t.Run(name, func(t *testing.T) {
			var logs syncBuffer
			var observed []string
			r := chi.NewRouter()
			r.Post("/locks/{ns}", func(w http.ResponseWriter, r *http.Request) {
				if _, ok := ClaimsFromContext(r.Context()); ok {
					t.Error("claims before SetClaims")
				}
				r = SetClaims(r, auth.Claims{Identity: auth.Identity{Subject: "svc"}})
				c, ok := ClaimsFromContext(r.Context())
				if !ok || c.Subject != "svc" {
					t.Errorf("got claims %+v, %v; want subject svc", c, ok)
				}
				if got := chi.URLParam(r, "ns"); got != "a" {
					t.Errorf("got ns %q, want a", got)
				}
				if !tc.quiet {
					zerolog.Ctx(r.Context()).Warn().Str("detail", "x").Msg("handler")
				}
				w.WriteHeader(tc.status)
			})
			h := Requests(zerolog.New(&logs).Level(tc.level), r, func(_ *http.Request, route string, status int) {
				observed = append(observed, route, http.StatusText(status))
			})
			srv := httptest.NewServer(h)
			defer srv.Close()

			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/locks/a?secret=s3cr3t", nil)
			req.Header.Set(RequestIDHeader, "rid-1")
			req.Header.Set("Authorization", "Bearer s3cr3t")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.Header.Get(RequestIDHeader); got != "rid-1" {
				t.Fatalf("got Request-Id %q, want rid-1", got)
			}
			srv.Close() // the access line is written once the handler returned

			if want := []string{"/locks/{ns}", http.StatusText(tc.status)}; strings.Join(observed, ",") != strings.Join(want, ",") {
				t.Fatalf("observed %q, want %q", observed, want)
			}
			lines := logs.lines(t)
			if len(lines) != tc.wantLines {
				t.Fatalf("got %d log lines, want %d: %v", len(lines), tc.wantLines, lines)
			}
			for _, l := range lines {
				if l["request_id"] != "rid-1" || l["sub"] != "svc" {
					t.Errorf("line %v: want request_id rid-1 and sub svc", l)
				}
				if l["message"] == "request" {
					if l["route"] != "/locks/{ns}" || l["path"] != "/locks/a" || l["method"] != "POST" || l["status"] != float64(tc.status) {
						t.Errorf("access line %v: want route, path, method and status", l)
					}
				}
			}
			if strings.Contains(logs.b.String(), "s3cr3t") {
				t.Fatalf("a secret reached the log: %s", logs.b.String())
			}
		})
	}
}

// TestLoggerKey: the key the scope answers for is the one zerolog keeps
// a context's logger under.
func TestLoggerKey(t *testing.T) {
	l := zerolog.New(io.Discard)
	ctx := l.WithContext(context.Background())
	if got, ok := ctx.Value(loggerKey).(*zerolog.Logger); !ok || got == nil {
		t.Fatalf("got %v under loggerKey, want zerolog's logger", ctx.Value(loggerKey))
	}
}

// TestRequestsWriter: the access log and the metrics see the status and
// size of a response that was flushed by the handler, and a
// ResponseController reaches the connection through the scope's writer.
func TestRequestsWriter(t *testing.T) {
	var logs syncBuffer
	var status int
	r := chi.NewRouter()
	r.Get("/x", func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Errorf("SetWriteDeadline through the scope's writer: %v", err)
		}
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte("hello"))
		if err := rc.Flush(); err != nil {
			t.Errorf("Flush: %v", err)
		}
		w.WriteHeader(http.StatusTeapot) // too late: ignored
		w.Write([]byte("!"))
	})
	h := Requests(zerolog.New(&logs), r, func(_ *http.Request, _ string, s int) { status = s })
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	srv.Close()
	if resp.StatusCode != http.StatusCreated || string(body) != "hello!" {
		t.Fatalf("got %d %q, want 201 hello!", resp.StatusCode, body)
	}
	if status != http.StatusCreated {
		t.Errorf("observed status %d, want 201", status)
	}
	lines := logs.lines(t)
	if len(lines) != 1 || lines[0]["status"] != float64(201) || lines[0]["size"] != float64(6) {
		t.Errorf("got access lines %v, want one with status 201 and size 6", lines)
	}
}

// TestRequestsWriterFlushError: a flush that cannot reach the connection
// says so through the scope's writer. The grant's 201 relies on it to
// learn that the grant was not delivered, and to release it.
func TestRequestsWriterFlushError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	broken := &brokenListener{Listener: ln}
	flushed := make(chan error, 1)
	r := chi.NewRouter()
	r.Get("/x", func(w http.ResponseWriter, r *http.Request) {
		broken.breakWrites()
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte("grant"))
		flushed <- http.NewResponseController(w).Flush()
	})
	srv := &http.Server{Handler: Requests(zerolog.Nop(), r, func(*http.Request, string, int) {})}
	go srv.Serve(broken)
	defer srv.Close()
	resp, err := http.Get("http://" + ln.Addr().String() + "/x")
	if err == nil {
		resp.Body.Close()
	}
	if err := <-flushed; err == nil {
		t.Fatal("Flush through the scope's writer returned nil, want the connection's write error")
	}
}

// brokenListener accepts connections whose writes fail once breakWrites
// was called.
type brokenListener struct {
	net.Listener
	broken atomic.Bool
}

func (l *brokenListener) breakWrites() { l.broken.Store(true) }

func (l *brokenListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &brokenConn{Conn: c, l: l}, nil
}

type brokenConn struct {
	net.Conn
	l *brokenListener
}

func (c *brokenConn) Write(b []byte) (int, error) {
	if c.l.broken.Load() {
		return 0, errors.New("connection reset (test)")
	}
	return c.Conn.Write(b)
}

// plainRequests is the chain Requests stands in for: zerolog's
// hlog.NewHandler, RequestID and hlog.AccessHandler, chi's routing context
// in a context value of its own, and claims put in by SetClaims as
// WithClaims and Logger.UpdateContext.
func plainRequests(logger zerolog.Logger, router chi.Router, observe func(r *http.Request, route string, status int)) http.Handler {
	access := hlog.AccessHandler(func(r *http.Request, status, size int, d time.Duration) {
		if status == 0 {
			status = http.StatusOK
		}
		route := chi.RouteContext(r.Context()).RoutePattern()
		observe(r, route, status)
		level := zerolog.InfoLevel
		if status >= 500 {
			level = zerolog.WarnLevel
		}
		e := hlog.FromRequest(r).WithLevel(level).Str("method", r.Method).Str("path", r.URL.Path).
			Int("status", status).Int("size", size).Dur("duration_ms", d)
		if route != "" {
			e = e.Str("route", route)
		}
		e.Msg("request")
	})
	next := hlog.NewHandler(logger)(RequestID(access(router)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rctx := chi.NewRouteContext() // chi's own would be gone when the access line is written
		rctx.Routes = router
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, rctx)))
	})
}

// TestRequestsMatchPlainChain holds Requests to plainRequests: the same
// answer, Request-Id, observed route and status, and log lines with the
// same fields and values (the order of the fields aside, and the
// duration), whatever the level, the status and the identity.
func TestRequestsMatchPlainChain(t *testing.T) {
	type outcome struct {
		status    int
		body      string
		requestID string
		observed  []string
		lines     []map[string]any
	}
	serve := func(t *testing.T, wrap func(zerolog.Logger, chi.Router, func(*http.Request, string, int)) http.Handler,
		level zerolog.Level, path string, status int, logs bool, id auth.Identity) outcome {
		t.Helper()
		var buf syncBuffer
		var out outcome
		r := chi.NewRouter()
		r.Post("/locks/{ns}/{name}", func(w http.ResponseWriter, r *http.Request) {
			r = SetClaims(r, auth.Claims{Identity: id})
			c, _ := ClaimsFromContext(r.Context())
			if logs {
				zerolog.Ctx(r.Context()).Warn().Str("ns", chi.URLParam(r, "ns")).Msg("handler")
			}
			w.WriteHeader(status)
			fmt.Fprintf(w, "%s %s %s", chi.URLParam(r, "name"), RequestIDFromContext(r.Context()), c.Subject)
		})
		h := wrap(zerolog.New(&buf).Level(level), r, func(_ *http.Request, route string, status int) {
			out.observed = append(out.observed, route, strconv.Itoa(status))
		})
		srv := httptest.NewServer(h)
		defer srv.Close()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, nil)
		req.Header.Set(RequestIDHeader, "rid-7")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close() // the access line is written once the handler returned
		out.status, out.body, out.requestID = resp.StatusCode, string(body), resp.Header.Get(RequestIDHeader)
		out.lines = buf.lines(t)
		for _, l := range out.lines {
			delete(l, "duration_ms")
		}
		return out
	}
	for name, tc := range map[string]struct {
		level  zerolog.Level
		path   string
		status int
		logs   bool
		id     auth.Identity
	}{
		"info, 201":                  {level: zerolog.InfoLevel, path: "/locks/a/b", status: http.StatusCreated},
		"info, 201, handler line":    {level: zerolog.InfoLevel, path: "/locks/a/b", status: http.StatusCreated, logs: true},
		"warn, 204, handler line":    {level: zerolog.WarnLevel, path: "/locks/a/b", status: http.StatusNoContent, logs: true},
		"warn, 503":                  {level: zerolog.WarnLevel, path: "/locks/a/b", status: http.StatusServiceUnavailable},
		"error, 503, handler line":   {level: zerolog.ErrorLevel, path: "/locks/a/b", status: http.StatusServiceUnavailable, logs: true},
		"debug, 409, with issuer":    {level: zerolog.DebugLevel, path: "/locks/a/b", status: http.StatusConflict, logs: true, id: auth.Identity{Issuer: "https://idp", Subject: "svc"}},
		"info, no route":             {level: zerolog.InfoLevel, path: "/nowhere", status: http.StatusNotFound},
		"disabled, 201, with issuer": {level: zerolog.Disabled, path: "/locks/a/b", status: http.StatusCreated, logs: true, id: auth.Identity{Issuer: "i", Subject: "s"}},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.id.Subject == "" {
				tc.id.Subject = "svc"
			}
			got := serve(t, Requests, tc.level, tc.path, tc.status, tc.logs, tc.id)
			want := serve(t, plainRequests, tc.level, tc.path, tc.status, tc.logs, tc.id)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Requests:\ngot  %+v\nwant %+v (the plain chain)", got, want)
			}
		})
	}
}
