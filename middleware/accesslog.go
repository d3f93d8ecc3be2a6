package middleware

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"
	"github.com/rs/zerolog/hlog"
)

// AccessLog returns the logging chain: a per-request zerolog logger, the
// request id, and one access log line per request. The line names the
// method, path, route, status, size and duration; it never includes headers
// (Authorization and Lock-Token carry secrets) or the query string (where a
// careless caller might put a token).
func AccessLog(logger zerolog.Logger) func(http.Handler) http.Handler {
	access := hlog.AccessHandler(func(r *http.Request, status, size int, d time.Duration) {
		level := zerolog.InfoLevel
		if status >= 500 {
			level = zerolog.WarnLevel
		}
		e := hlog.FromRequest(r).WithLevel(level).
			Str("method", r.Method).
			Str("path", r.URL.Path).
			Int("status", status).
			Int("size", size).
			Dur("duration_ms", d)
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			e = e.Str("route", rc.RoutePattern())
		}
		e.Msg("request")
	})
	return func(next http.Handler) http.Handler {
		next = access(next)
		// hlog.NewHandler then RequestID, in one: the request's logger is
		// made with its request_id, and the request copied once for both
		// (each copy of an http.Request, and zerolog's Logger.With, was a
		// few percent of the gateway's allocations, issue 10).
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := requestID(w, r)
			l := logger.With().Str("request_id", id).Logger()
			ctx := l.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}
