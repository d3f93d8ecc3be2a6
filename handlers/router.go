package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/lockgate/lockgate"
	"github.com/lockgate/lockgate/internal/tracing"
	"github.com/lockgate/lockgate/middleware"
)

// NewServer checks cfg and returns a Server.
func NewServer(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	switch {
	case cfg.Backend == nil:
		return nil, errors.New("handlers: no backend")
	case cfg.Auth == nil:
		return nil, errors.New("handlers: no authenticator")
	case cfg.DefaultTTL > cfg.MaxTTL:
		return nil, fmt.Errorf("the default TTL (%s) is longer than the max TTL (%s)", cfg.DefaultTTL, cfg.MaxTTL)
	}
	s := &Server{cfg: cfg, locks: lockGrantor{cfg.Backend}, permits: permitGrantor{cfg.Backend}}
	s.draining, s.drain = context.WithCancel(context.Background())
	return s, nil
}

// Drain turns away every acquirer that is waiting, now or later, with a 503.
// Call it when shutdown starts, before http.Server.Shutdown, so that
// long waits do not hold the shutdown up.
func (s *Server) Drain() { s.drain() }

// Handler returns the whole HTTP surface: the API of openapi.yaml, /metrics
// and /openapi.yaml, with logging, request ids and metrics.
func (s *Server) Handler() (http.Handler, error) {
	spec, err := GetSpec()
	if err != nil {
		return nil, fmt.Errorf("load embedded spec: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.metrics = newMetrics(reg)
	reg.MustRegister(newJWKSCollector(s.cfg.Auth))
	if b, ok := s.cfg.Backend.(interface{ WatchReads() uint64 }); ok {
		// What watching costs Redis: one read per change of a watched
		// lock per gateway, however many watch it.
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "lockgate_watch_reads_total",
			Help: "Reads of watched locks from Redis: one per change of a watched lock, whatever the number of its watchers.",
		}, func() float64 { return float64(b.WatchReads()) }))
	}
	if sig := s.cfg.Signer; sig != nil {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "lockgate_grants_signed_total",
			Help: "Grants and renewals signed (signed_grant), each an Ed25519 signature: those whose calls asked, or every one with --sign-grants always.",
		}, func() float64 { return float64(sig.Signed()) }))
	}
	if s.cfg.Callbacks != nil {
		reg.MustRegister(s.cfg.Callbacks)
	}

	r := chi.NewRouter()
	// Top-level middleware runs before routing: nothing here may depend on
	// the matched route except after next returns.
	// The access log and the metrics wrap the router (middleware.Requests).
	r.Use(recoverer, headProbes)
	if s.cfg.Tracing != nil {
		r.Use(tracing.NameByRoute)
	}
	r.NotFound(func(w http.ResponseWriter, r *http.Request) { writeError(w, r, notFound(r.URL.Path)) })
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		methods := allowed(r, req)
		if len(methods) == 0 {
			// Never a 405 with an empty Allow (RFC 9110 15.5.6): a path
			// with no method is not there.
			writeError(w, req, errNotFound)
			return
		}
		w.Header().Set("Allow", strings.Join(methods, ", "))
		writeError(w, req, errMethodNotAllowed)
	})

	r.Get("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP)
	r.Get("/openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
		// The repository's file as it is, not the spec re-serialised from
		// api.gen.go, which changes operationIds' case and drops fields.
		w.Header().Set("Content-Type", "application/yaml")
		w.Write(lockgate.OpenAPI)
	})
	if s.cfg.UI != nil {
		s.mountUI(r)
	}

	g, err := newGate(spec, s.cfg.Auth, s.cfg.Subjects)
	if err != nil {
		return nil, fmt.Errorf("the spec's checks: %w", err)
	}
	if s.cfg.MCP {
		r.Post(MCPPath, s.mcpHandler(g, spec.Info.Version).ServeHTTP)
	}
	api := NewStrictHandlerWithOptions(s, []StrictMiddlewareFunc{acceptsEventStream}, StrictHTTPServerOptions{
		RequestErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			// The gate validated the body already; what is left is JSON the
			// schema allows but an int64 cannot hold, such as 2e3.
			writeError(w, r, invalid("numbers must be plain integers such as 5000, without exponent or fraction"))
		},
		ResponseErrorHandlerFunc: writeError,
	})
	r.Group(func(r chi.Router) {
		// Group middleware runs after routing, so the gate knows the
		// operation and its path parameters.
		r.Use(g.handler)
		HandlerWithOptions(api, ChiServerOptions{
			BaseRouter: r,
			ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
				writeError(w, r, paramError(err))
			},
		})
	})
	return s.cfg.Tracing.Handler(middleware.Requests(s.cfg.Logger, r, s.metrics.observe)), nil
}

// notFound is the 404 of a path no route takes. Under /locks/ and
// /semaphores/ it says what the paths are: a name with a '/' in it
// (/locks/demo/a/b) is the usual way to get there.
func notFound(path string) error {
	for _, k := range []struct{ kind, one, below string }{
		{"locks", "lock", "/lease, /history and /tickets/{ticket}"},
		{"semaphores", "semaphore", "/lease"},
	} {
		rest, ok := strings.CutPrefix(path, "/"+k.kind+"/")
		if !ok || strings.Count(rest, "/") < 2 {
			continue
		}
		return &routeError{detail: "no such route: a " + k.one + " is /" + k.kind + "/{namespace}/{name}, and names cannot contain '/' " +
			"(use '.', ':' or '-' instead); below it are only " + k.below + "; see /openapi.yaml"}
	}
	return errNotFound
}

// routeError is a 404 with a detail in our own words.
type routeError struct{ detail string }

func (e *routeError) Error() string        { return "route not found: " + e.detail }
func (e *routeError) Detail() string       { return e.detail }
func (e *routeError) Is(target error) bool { return target == errNotFound }

// paramError words the generated wrapper's parameter errors. The gate has
// validated parameters against the spec already, so these are rare.
func paramError(err error) error {
	var (
		rh *RequiredHeaderError
		tm *TooManyValuesForParamError
		pf *InvalidParamFormatError
	)
	switch {
	case errors.As(err, &rh):
		return invalid("missing " + rh.ParamName + " header")
	case errors.As(err, &tm):
		return invalid("send " + tm.ParamName + " once")
	case errors.As(err, &pf):
		return invalid(pf.ParamName + " is invalid")
	}
	return invalid("the request parameters are invalid")
}

// allowed lists the methods that route req's path. It matches the path
// the router matched: the raw one when the URL has escapes, such as %2F,
// which the decoded path loses.
func allowed(mux chi.Routes, req *http.Request) []string {
	path := req.URL.RawPath
	if path == "" {
		path = req.URL.Path
	}
	var methods []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		if mux.Match(chi.NewRouteContext(), m, path) {
			methods = append(methods, m)
			if m == http.MethodGet && probes[path] {
				methods = append(methods, http.MethodHead)
			}
		}
	}
	return methods
}

// probes are the paths that answer HEAD as they answer GET.
var probes = map[string]bool{"/healthz": true, "/readyz": true}

// headProbes routes HEAD on the probes as GET: load balancers probe with
// HEAD, and only the status matters. net/http drops the body of a HEAD's
// answer. The request's own method stays HEAD for the access log and the
// metrics, which read it from the request they were given.
func headProbes(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead && r.URL.RawPath == "" && probes[r.URL.Path] {
			r = r.WithContext(r.Context())
			r.Method = http.MethodGet
		}
		next.ServeHTTP(w, r)
	})
}

// recoverer turns a panic into a 500 problem and a log line with the stack.
func recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				zerolog.Ctx(r.Context()).Error().Str("panic", fmt.Sprint(v)).Bytes("stack", debug.Stack()).Msg("handler panicked")
				writeError(w, r, fmt.Errorf("panic: %v", v))
			}
		}()
		next.ServeHTTP(w, r)
	})
}
