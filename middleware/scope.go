package middleware

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	chimw "github.com/go-chi/chi/v5/middleware"
	"github.com/rs/zerolog"
)

// Requests returns the gateway's outermost handler around router (a chi
// router): a request id, a zerolog logger, chi's routing context and,
// once the gate has verified them, the token's claims, all in one context
// value, so that the request is copied once (each copy of an http.Request
// and each context value were allocations per request: the access log,
// chi and the gate each made their own, issue 10). observe, when not nil,
// sees each finished request with its route pattern ("" when none
// matched) and status; the metrics count them.
//
// It writes one access log line per request, naming the method, path,
// route, status, size and duration; never headers (Authorization and
// Lock-Token carry secrets) or the query string (where a careless caller
// might put a token). The lines of a request carry its request_id and,
// once known, the token's sub: a hook adds them to each line that is
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
		sc := &scope{id: requestID(w, r), route: rctx}
		sc.logger = logger.Hook(sc)
		sc.Context = sc.logger.WithContext(r.Context())
		r = r.WithContext(sc)

		ww := chimw.NewWrapResponseWriter(w, r.ProtoMajor)
		defer func() {
			// Deferred, as hlog.AccessHandler did: a handler that aborts
			// with http.ErrAbortHandler is still counted and logged.
			status := ww.Status()
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
			if e := sc.logger.WithLevel(level); e != nil {
				e = e.Str("method", r.Method).
					Str("path", r.URL.Path).
					Int("status", status).
					Int("size", ww.BytesWritten()).
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

// scope is what Requests keeps of one request: the request's context,
// answering for its values. The gate fills in the claims once it has
// verified them (SetClaims); nothing else changes after it is made.
type scope struct {
	context.Context
	id     string
	logger zerolog.Logger
	route  *chi.Context
	claims Claims
	authed bool
}

func (sc *scope) Value(key any) any {
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

// Run implements zerolog.Hook: every line of the request carries its id
// and, once the token is verified, its subject.
func (sc *scope) Run(e *zerolog.Event, _ zerolog.Level, _ string) {
	e.Str("request_id", sc.id)
	if sc.authed {
		e.Str("sub", sc.claims.Subject)
	}
}

type scopeKey struct{}

// SetClaims gives r the verified claims c, for ClaimsFromContext, and
// adds their subject to r's log lines as "sub". Under Requests it returns
// r itself, whose context holds them from now on; elsewhere a copy of r.
func SetClaims(r *http.Request, c Claims) *http.Request {
	if sc, ok := r.Context().Value(scopeKey{}).(*scope); ok && !sc.authed {
		sc.claims, sc.authed = c, true
		return r
	}
	ctx := WithClaims(r.Context(), c)
	zerolog.Ctx(ctx).UpdateContext(func(zc zerolog.Context) zerolog.Context {
		return zc.Str("sub", c.Subject)
	})
	return r.WithContext(ctx)
}
