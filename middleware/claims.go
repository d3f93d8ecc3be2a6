package middleware

import (
	"context"

	"github.com/lockgate/lockgate/auth"
)

type claimsKey struct{}

// WithClaims returns a copy of ctx that carries c.
func WithClaims(ctx context.Context, c auth.Claims) context.Context {
	return context.WithValue(ctx, claimsKey{}, c)
}

// ClaimsFromContext returns the claims of the request's verified token.
func ClaimsFromContext(ctx context.Context) (auth.Claims, bool) {
	switch c := ctx.Value(claimsKey{}).(type) {
	case auth.Claims:
		return c, true
	case *auth.Claims: // a Requests scope's, not copied into an interface
		return *c, true
	}
	return auth.Claims{}, false
}
