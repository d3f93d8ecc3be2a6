package middleware

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"

	"github.com/lockgate/lockgate/auth"
)

// Fast path. Requests does in one request scope, copied into the request
// once, what zerolog's hlog chain did with a context value and a copy of
// the request each.
//
// Plain version: plainRequests in scope_test.go: hlog.NewHandler,
// RequestID and hlog.AccessHandler over the router, chi's routing context
// in a context value of its own, the claims put in by SetClaims as
// WithClaims and Logger.UpdateContext. Requests must give the same
// answers, Request-Id, observed routes and statuses, and log lines with
// the same fields, at every level; only the order of the fields differs
// (the hook writes request_id, iss and sub after a line's own fields). It
// differs on purpose in one thing: a flush through its writer reports the
// connection's error (TestRequestsWriterFlushError), which hlog's drops.
//
// Held to it by TestRequestsMatchPlainChain; TestRequests,
// TestRequestsWriter and TestLoggerKey check the parts.
//
// Gain, measured 2026-12-02 at 7a299a4 against the same gateway with
// plainRequests swapped in: gateway CPU per lock cycle (acquire and
// release; utime + stime of the gateway process) 165.8 µs plain against
// 143.5 µs (medians), the pairs' ratio 1.16 (95 % bootstrap interval
// 1.09-1.26), 16 alternating pairs of 2 s runs of the benchmark lab's
// --processes --targets embedded (docs/PERFORMANCE.md; 16 uncontended
// clients, load average 6 to 22 on 2 cores). BenchmarkAcquireRelease: 107
// allocations and 11.1 kB per cycle against 67 and 6.9 kB; process CPU per
// cycle 36.1 µs against 24.8 µs.

// Requests returns the gateway's outermost handler around router (a chi
// router): a request id, a zerolog logger, chi's routing context and,
// once the gate has verified them, the token's claims, all in one context
// value, so that the request is copied once (each copy of an http.Request
// and each context value were allocations per request: the access log,
// chi and the gate each made their own). observe, when not nil,
// sees each finished request with its route pattern ("" when none
// matched) and status; the metrics count them.
//
// It writes one access log line per request, naming the method, path,
// route, status, size and duration; never headers (Authorization and
// Lock-Token carry secrets) or the query string (where a careless caller
// might put a token). The lines of a request carry its request_id and,
// once known, the token's iss and sub: a hook adds them to each line that is
// written, so that a request that logs nothing (at warn, nearly all) costs
// no log buffer.
func Requests(logger zerolog.Logger, router chi.Router, observe func(r *http.Request, route string, status int)) http.Handler {
	var routes sync.Pool // of *chi.Context, as chi pools them itself
	routes.New = func() any { return chi.NewRouteContext() }
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rctx := routes.Get().(*chi.Context)
		rctx.Reset()
		rctx.Routes = router
		sc := &scope{route: rctx}
		sc.id = sc.requestID(w, r)
		sc.logger = logger // hooked at first use: see log
		// zerolog.WithContext would copy the logger into a context value of
		// its own; the scope answers for it instead. Like WithContext, it
		// does not stand in for a context's logger with a disabled one.
		sc.hasLogger = logger.GetLevel() != zerolog.Disabled || r.Context().Value(loggerKey) != nil
		sc.Context = r.Context()
		r = r.WithContext(sc)

		sc.w = statusWriter{ResponseWriter: w}
		ww := &sc.w
		defer func() {
			// Deferred, as hlog.AccessHandler did: a handler that aborts
			// with http.ErrAbortHandler is still counted and logged.
			status := ww.code
			if status == 0 {
				status = http.StatusOK
			}
			route := rctx.RoutePattern()
			if observe != nil {
				observe(r, route, status)
			}
			level := zerolog.InfoLevel
			if status >= 500 {
				level = zerolog.WarnLevel
			}
			// A level the logger leaves out needs no hooked logger
			// (see log); WithLevel checks the rest (writer, sampler).
			if e := sc.logAt(logger, level); e != nil {
				e = e.Str("method", r.Method).
					Str("path", r.URL.Path).
					Int("status", status).
					Int("size", ww.bytes).
					Dur("duration_ms", time.Since(start))
				if route != "" {
					e = e.Str("route", route)
				}
				e.Msg("request")
			}
			routes.Put(rctx)
		}()
		router.ServeHTTP(ww, r)
	})
}

// loggerKey is the context key under which zerolog keeps a request's
// *zerolog.Logger (zerolog.WithContext, zerolog.Ctx), learned once from
// zerolog.Ctx itself: the scope answers for it, so that a request's
// logger is no context value of its own.
var loggerKey = func() any {
	var spy keySpy
	zerolog.Ctx(&spy)
	return spy.key
}()

// keySpy is a context that remembers the key it was asked for.
type keySpy struct {
	context.Context
	key any
}

func (s *keySpy) Value(key any) any {
	s.key = key
	return nil
}

// statusWriter remembers the status and the size of a response, for the
// access log and the metrics, as chi's WrapResponseWriter did, without an
// allocation of its own: it lives in the request's scope. It flushes as
// that one did: the error of the flush is not reported.
type statusWriter struct {
	http.ResponseWriter
	code        int
	bytes       int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	if !w.wroteHeader {
		w.code, w.wroteHeader = code, true
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}

// Flush implements http.Flusher.
func (w *statusWriter) Flush() { w.FlushError() }

// FlushError flushes and returns the connection's write error, which
// http.ResponseController.Flush prefers to a plain Flush: the grant's 201
// learns from it that the grant did not reach its caller, and releases it.
func (w *statusWriter) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// scope is what Requests keeps of one request: the request's context,
// answering for its values. The gate fills in the claims once it has
// verified them (SetClaims); nothing else changes after it is made.
type scope struct {
	context.Context
	id        string
	idValue   [1]string // the Request-Id header's value
	logger    zerolog.Logger
	hooked    sync.Once // logger has the scope as its hook
	hasLogger bool      // the context answers with logger (see loggerKey)
	route     *chi.Context
	claims    auth.Claims
	authed    bool
	w         statusWriter
}

func (sc *scope) Value(key any) any {
	if key == loggerKey && sc.hasLogger {
		return sc.log()
	}
	switch key {
	case chi.RouteCtxKey:
		return sc.route
	case requestIDKey{}:
		return sc.id
	case scopeKey{}:
		return sc
	case claimsKey{}:
		if sc.authed {
			return &sc.claims
		}
	}
	return sc.Context.Value(key)
}

// log is the request's logger, whose lines carry the request's id and
// subject. The hook goes on at the first use: Logger.Hook allocates, and
// most requests log nothing but an access line, which the level often
// leaves out.
func (sc *scope) log() *zerolog.Logger {
	sc.hooked.Do(sc.hook)
	return &sc.logger
}

func (sc *scope) hook() { sc.logger = sc.logger.Hook(sc) }

// logAt is a line of the request at level, or nil when base, the logger
// Requests was given, leaves that level out.
func (sc *scope) logAt(base zerolog.Logger, level zerolog.Level) *zerolog.Event {
	if level < base.GetLevel() || level < zerolog.GlobalLevel() {
		return nil
	}
	return sc.log().WithLevel(level)
}

// Run implements zerolog.Hook: every line of the request carries its id
// and, once the token is verified, its identity.
func (sc *scope) Run(e *zerolog.Event, _ zerolog.Level, _ string) {
	e.Str("request_id", sc.id)
	if sc.authed {
		logIdentity(e, sc.claims.Identity)
	}
}

// logIdentity adds the caller's identity to a line: "iss" (when the
// token has one) and "sub".
func logIdentity(e *zerolog.Event, id auth.Identity) {
	if id.Issuer != "" {
		e.Str("iss", id.Issuer)
	}
	e.Str("sub", id.Subject)
}

type scopeKey struct{}

// SetClaims gives r the verified claims c, for ClaimsFromContext, and
// adds their identity to r's log lines as "iss" and "sub". Under Requests
// it returns r itself, whose context holds them from now on; elsewhere a
// copy of r.
func SetClaims(r *http.Request, c auth.Claims) *http.Request {
	if sc, ok := r.Context().Value(scopeKey{}).(*scope); ok && !sc.authed {
		sc.claims, sc.authed = c, true
		return r
	}
	ctx := WithClaims(r.Context(), c)
	zerolog.Ctx(ctx).UpdateContext(func(zc zerolog.Context) zerolog.Context {
		if c.Issuer != "" {
			zc = zc.Str("iss", c.Issuer)
		}
		return zc.Str("sub", c.Subject)
	})
	return r.WithContext(ctx)
}
