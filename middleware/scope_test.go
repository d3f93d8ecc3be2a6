package middleware

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"
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
				r = SetClaims(r, Claims{Identity: Identity{Subject: "svc"}})
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
